//! A convolution as a one-node operation: its tensors (ids [`X`], [`W`],
//! [`Y`] in every direction: the gradients take the ids of what they are
//! gradients of), the convolution descriptor (fp32 compute, cross
//! correlation, symmetric padding as the legacy descriptor has), and the
//! forward, backward-data or backward-filter operation over them.

use super::descriptor::{Attr, AttrType, Descriptor, Kind};
use super::tensor::TensorSpec;
use crate::backend::cuda::cudnn::ConvGeometry;
use crate::backend::cuda::loader::cudnn_sys as sys;
use crate::backend::cuda::GpuResult;
use crate::core::{DType, Layout};
use cnnbench_kernels::conv::{ConvShape, Direction};

/// The unique id of the source (forward, backward-filter) or of its
/// gradient (backward-data).
pub const X: i64 = 1;
/// The weights (forward, backward-data) or their gradient
/// (backward-filter).
pub const W: i64 = 2;
/// The destination (forward) or its gradient (backward).
pub const Y: i64 = 3;

/// One direction of one convolution as cuDNN's graph API sees it. Owns
/// every descriptor the operation refers to.
pub struct ConvOperation {
    pub dir: Direction,
    pub dtype: DType,
    pub op: Descriptor,
    // Kept alive with the operation that refers to them.
    _tensors: [Descriptor; 3],
    _conv: Descriptor,
}

/// The three tensors of `p` in `dtype` and `layout`, pointers aligned to
/// `alignment` bytes: source, weights, destination.
pub fn tensor_specs(
    p: &ConvShape,
    dtype: DType,
    layout: Layout,
    alignment: usize,
) -> [TensorSpec; 3] {
    let t = |id, dims| TensorSpec {
        id,
        dtype,
        dims,
        layout,
        alignment,
        is_virtual: false,
    };
    [
        t(X, [p.mb, p.ic, p.ih, p.iw]),
        t(W, [p.oc, p.icg(), p.kh, p.kw]),
        t(Y, [p.mb, p.oc, p.oh, p.ow]),
    ]
}

/// The finalized convolution descriptor: fp32 compute for every dtype
/// (half types accumulate in fp32; whether fp32 data may use TF32 tensor
/// cores is the engines' numerical notes, chosen later).
pub fn conv_descriptor(g: &ConvGeometry) -> GpuResult<Descriptor> {
    let two = |v: [usize; 2]| [v[0] as i64, v[1] as i64];
    let mut c = Descriptor::new(Kind::CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR)?;
    c.set_data_type(
        Attr::CUDNN_ATTR_CONVOLUTION_COMP_TYPE,
        sys::cudnnDataType_t::CUDNN_DATA_FLOAT,
    )?;
    c.set_enum(
        Attr::CUDNN_ATTR_CONVOLUTION_CONV_MODE,
        AttrType::CUDNN_TYPE_CONVOLUTION_MODE,
        sys::cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION as u32,
    )?;
    c.set_i64(Attr::CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, 2)?;
    c.set_i64s(Attr::CUDNN_ATTR_CONVOLUTION_DILATIONS, &two(g.dilation))?;
    c.set_i64s(Attr::CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, &two(g.stride))?;
    c.set_i64s(Attr::CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, &two(g.pad))?;
    c.set_i64s(Attr::CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, &two(g.pad))?;
    c.finalize()?;
    Ok(c)
}

/// The operation's kind and its attributes (x, w, y, conv, alpha, beta),
/// in cudnn-frontend's names per direction.
fn op_attrs(dir: Direction) -> (Kind, [Attr; 6]) {
    use Attr::*;
    match dir {
        Direction::Fwd => (
            Kind::CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
            [
                CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
                CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
                CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
                CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
                CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
                CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
            ],
        ),
        Direction::BwdData => (
            Kind::CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
            [
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
            ],
        ),
        Direction::BwdFilter => (
            Kind::CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
            [
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
            ],
        ),
    }
}

/// The finalized operation of direction `dir` over `[x, w, y]` (in
/// [`op_attrs`]' order: the gradients stand where their tensors do) and
/// the convolution descriptor `conv`: output = 1·conv + 0·output.
pub fn operation(
    dir: Direction,
    [x, w, y]: [&Descriptor; 3],
    conv: &Descriptor,
) -> GpuResult<Descriptor> {
    let (kind, [ax, aw, ay, ac, alpha, beta]) = op_attrs(dir);
    let mut op = Descriptor::new(kind)?;
    op.set_descs(ax, &[x])?;
    op.set_descs(aw, &[w])?;
    op.set_descs(ay, &[y])?;
    op.set_descs(ac, &[conv])?;
    // Float scalars, as for fp32 compute (double only for double).
    op.set_f32(alpha, 1.0)?;
    op.set_f32(beta, 0.0)?;
    op.finalize()?;
    Ok(op)
}

impl ConvOperation {
    /// Direction `dir` of `p` in `dtype` and `layout`, its pointers
    /// aligned to `alignment` bytes; output = 1·conv + 0·output.
    pub fn new(
        p: &ConvShape,
        geometry: &ConvGeometry,
        dtype: DType,
        layout: Layout,
        dir: Direction,
        alignment: usize,
    ) -> GpuResult<ConvOperation> {
        let [x, w, y] = tensor_specs(p, dtype, layout, alignment).map(|t| t.build());
        let tensors = [x?, w?, y?];
        let conv = conv_descriptor(geometry)?;
        let op = operation(dir, [&tensors[0], &tensors[1], &tensors[2]], &conv)?;
        Ok(ConvOperation {
            dir,
            dtype,
            op,
            _tensors: tensors,
            _conv: conv,
        })
    }
}
