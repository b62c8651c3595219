//! MLPerf ResNet-50's "NormConv" as graphs of cuDNN's runtime fusion
//! (issue 28, item 4): a convolution whose input is the previous
//! convolution's raw output `x`, with the batch norm and ReLU between them
//! folded into the convolution's kernels, in each direction:
//!
//! ```text
//! fwd      y = conv(relu(x·scale + shift), w)
//!          sum, sqsum = Σ y, Σ y²                per output channel (fp32)
//! bwd_d    dz = relu'(x·scale + shift) ⊙ dgrad(dy, w)
//!          dγ, dβ, eq_dy, eq_x, eq_bias = BN weight backward of dz over x
//! bwd_w    dw = wgrad(relu(x·scale + shift), dy)
//! ```
//!
//! `scale` and `shift` are the batch norm's coefficients per input channel
//! (`γ/σ` and `β − μγ/σ`), so the normalised, activated tensor is never
//! written: it lives in the graph as virtual tensors. The batch norm's
//! data gradient is then `dx = eq_dy·dz + eq_x·x + eq_bias`, one pass.
//! The graphs are cudnn-frontend's "ConvBNfprop", "Dgrad Drelu DBNweight"
//! and "scale-bias-relu-wgrad" samples (also Paddle's fused ops): NHWC,
//! f16 or bf16, one group. The forward's and weight gradient's scale and
//! shift are in the data's dtype, the data gradient's per-channel tensors
//! all fp32, as those samples have them.

use super::convolution::{conv_descriptor, operation, W, X, Y};
use super::descriptor::Descriptor;
use super::pointwise::{bn_bwd_weights_op, gen_stats_op, BnBwdWeights, Pointwise, PointwiseOp};
use super::tensor::TensorSpec;
use crate::backend::cuda::cudnn::ConvGeometry;
use crate::backend::cuda::{GpuError, GpuResult};
use crate::core::{DType, Layout};
use cnnbench_kernels::conv::{ConvShape, Direction};

/// The batch norm's scale per input channel.
pub const SCALE: i64 = 4;
/// Its shift, as [`SCALE`].
pub const SHIFT: i64 = 5;
/// The forward's output sum per channel (`[1, K, 1, 1]`, fp32).
pub const SUM: i64 = 6;
/// Its sum of squares, as [`SUM`].
pub const SQSUM: i64 = 7;
/// The data gradient's batch norm statistics and γ (`[1, C, 1, 1]`,
/// fp32).
pub const MEAN: i64 = 11;
pub const INVSTD: i64 = 12;
pub const GAMMA: i64 = 13;
/// The data gradient's output: the gradient at the batch norm's output,
/// after ReLU's backward (the data's dtype, shaped as `x`).
pub const DZ: i64 = 14;
/// The data gradient's per-channel outputs (fp32).
pub const DGAMMA: i64 = 15;
pub const DBETA: i64 = 16;
pub const EQ_DY: i64 = 17;
pub const EQ_X: i64 = 18;
pub const EQ_BIAS: i64 = 19;
/// Virtual tensors between operations.
const SCALED: i64 = 8;
const SHIFTED: i64 = 9;
const ACTIVATED: i64 = 10;
const DGRAD: i64 = 20;

/// One tensor a NormConv graph reads or writes: what a variant pack binds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bound {
    pub id: i64,
    pub name: &'static str,
    pub dtype: DType,
    /// N, C, H, W (a filter: K, C, R, S).
    pub dims: [usize; 4],
    /// Written by the graph.
    pub output: bool,
}

impl Bound {
    pub fn len(&self) -> usize {
        self.dims.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The tensors a NormConv graph of `dir` binds, in variant-pack order:
/// inputs first, then outputs.
pub fn bound(dir: Direction, p: &ConvShape, dtype: DType) -> Vec<Bound> {
    let x = [p.mb, p.ic, p.ih, p.iw];
    let y = [p.mb, p.oc, p.oh, p.ow];
    let w = [p.oc, p.icg(), p.kh, p.kw];
    let per_in = [1, p.ic, 1, 1];
    let per_out = [1, p.oc, 1, 1];
    let f = DType::F32;
    let t = |id, name, dtype, dims, output| Bound {
        id,
        name,
        dtype,
        dims,
        output,
    };
    match dir {
        Direction::Fwd => vec![
            t(X, "x", dtype, x, false),
            t(W, "w", dtype, w, false),
            t(SCALE, "scale", dtype, per_in, false),
            t(SHIFT, "shift", dtype, per_in, false),
            t(Y, "y", dtype, y, true),
            t(SUM, "sum", f, per_out, true),
            t(SQSUM, "sqsum", f, per_out, true),
        ],
        Direction::BwdData => vec![
            t(Y, "dy", dtype, y, false),
            t(W, "w", dtype, w, false),
            t(X, "x", dtype, x, false),
            t(SCALE, "scale", f, per_in, false),
            t(SHIFT, "shift", f, per_in, false),
            t(MEAN, "mean", f, per_in, false),
            t(INVSTD, "invstd", f, per_in, false),
            t(GAMMA, "gamma", f, per_in, false),
            t(DZ, "dz", dtype, x, true),
            t(DGAMMA, "dgamma", f, per_in, true),
            t(DBETA, "dbeta", f, per_in, true),
            t(EQ_DY, "eq_dy", f, per_in, true),
            t(EQ_X, "eq_x", f, per_in, true),
            t(EQ_BIAS, "eq_bias", f, per_in, true),
        ],
        Direction::BwdFilter => vec![
            t(X, "x", dtype, x, false),
            t(Y, "dy", dtype, y, false),
            t(SCALE, "scale", dtype, per_in, false),
            t(SHIFT, "shift", dtype, per_in, false),
            t(W, "dw", dtype, w, true),
        ],
    }
}

/// Why cuDNN's runtime fusion cannot take `p` in `dtype` and `layout`, if
/// it cannot.
pub fn refusal(p: &ConvShape, dtype: DType, layout: Layout) -> Option<String> {
    if !matches!(dtype, DType::F16 | DType::Bf16) {
        return Some(format!("{dtype}: runtime fusion takes f16 or bf16"));
    }
    if layout != Layout::Nhwc {
        return Some(format!("{layout}: runtime fusion takes NHWC"));
    }
    if p.g != 1 {
        return Some(format!("{} groups: runtime fusion takes one", p.g));
    }
    None
}

/// The operations of one NormConv graph; owns every descriptor they refer
/// to.
pub struct NormConvGraph {
    pub dir: Direction,
    pub dtype: DType,
    /// In graph order.
    ops: Vec<Descriptor>,
    // Kept alive with the operations that refer to them: the pointwise
    // descriptors, the tensors, the convolution descriptor.
    _pointwise: Vec<Descriptor>,
    _tensors: Vec<Descriptor>,
    _conv_desc: Descriptor,
}

impl NormConvGraph {
    /// The graph of direction `dir` for `p` in `dtype`, NHWC, pointers
    /// aligned to `alignment` bytes.
    pub fn new(
        dir: Direction,
        p: &ConvShape,
        geometry: &ConvGeometry,
        dtype: DType,
        alignment: usize,
    ) -> GpuResult<NormConvGraph> {
        if let Some(why) = refusal(p, dtype, Layout::Nhwc) {
            return Err(GpuError::invalid("NormConv graph", why));
        }
        let spec = |id, dtype, dims, is_virtual| TensorSpec {
            id,
            dtype,
            dims,
            layout: Layout::Nhwc,
            alignment,
            is_virtual,
        };
        let bound = bound(dir, p, dtype);
        let x_dims = [p.mb, p.ic, p.ih, p.iw];
        // The prologue's virtual tensors: fp32 in the forward and the data
        // gradient's recomputation, the data's dtype in the weight
        // gradient (cudnn-frontend's samples).
        let mid = match dir {
            Direction::BwdFilter => dtype,
            _ => DType::F32,
        };
        let mut specs: Vec<TensorSpec> = bound
            .iter()
            .map(|b| spec(b.id, b.dtype, b.dims, false))
            .collect();
        specs.push(spec(SCALED, mid, x_dims, true));
        specs.push(spec(SHIFTED, mid, x_dims, true));
        if dir != Direction::BwdData {
            specs.push(spec(ACTIVATED, mid, x_dims, true));
        } else {
            specs.push(spec(DGRAD, DType::F32, x_dims, true));
        }
        let tensors = specs
            .iter()
            .map(TensorSpec::build)
            .collect::<GpuResult<Vec<_>>>()?;
        let by_id = |id: i64| -> &Descriptor {
            let i = specs
                .iter()
                .position(|s| s.id == id)
                .expect("a tensor of the graph");
            &tensors[i]
        };
        let conv_desc = conv_descriptor(geometry)?;
        let mut kept = Vec::new();
        let pw = |f, x, b: Option<i64>, y| PointwiseOp::new(f, by_id(x), b.map(by_id), by_id(y));
        // x·scale + shift, the batch norm's output, in every direction.
        let mut ops = vec![
            pw(Pointwise::Mul, X, Some(SCALE), SCALED)?,
            pw(Pointwise::Add, SCALED, Some(SHIFT), SHIFTED)?,
        ];
        let mut rest = Vec::new();
        match dir {
            Direction::Fwd | Direction::BwdFilter => {
                ops.push(pw(Pointwise::Relu, SHIFTED, None, ACTIVATED)?);
                rest.push(operation(
                    dir,
                    [by_id(ACTIVATED), by_id(W), by_id(Y)],
                    &conv_desc,
                )?);
                if dir == Direction::Fwd {
                    rest.push(gen_stats_op(by_id(Y), by_id(SUM), by_id(SQSUM))?);
                }
            }
            Direction::BwdData => {
                // ReLU's backward follows the convolution it takes dy from.
                let dgrad = operation(dir, [by_id(DGRAD), by_id(W), by_id(Y)], &conv_desc)?;
                let relu_bwd = pw(Pointwise::ReluBwd, SHIFTED, Some(DGRAD), DZ)?;
                let bn = bn_bwd_weights_op(&BnBwdWeights {
                    x: by_id(X),
                    dy: by_id(DZ),
                    mean: by_id(MEAN),
                    invstd: by_id(INVSTD),
                    gamma: by_id(GAMMA),
                    dgamma: by_id(DGAMMA),
                    dbeta: by_id(DBETA),
                    eq_dy: by_id(EQ_DY),
                    eq_x: by_id(EQ_X),
                    eq_bias: by_id(EQ_BIAS),
                })?;
                let (relu_bwd, relu_pw) = relu_bwd.into_parts();
                rest.extend([dgrad, relu_bwd, bn]);
                kept.push(relu_pw);
            }
        }
        let mut ordered = Vec::with_capacity(ops.len() + rest.len());
        for op in ops {
            let (op, desc) = op.into_parts();
            ordered.push(op);
            kept.push(desc);
        }
        ordered.extend(rest);
        Ok(NormConvGraph {
            dir,
            dtype,
            ops: ordered,
            _pointwise: kept,
            _tensors: tensors,
            _conv_desc: conv_desc,
        })
    }

    /// The operations in graph order: the prologue's pointwise ones, the
    /// convolution, then its epilogue.
    pub fn ops(&self) -> Vec<&Descriptor> {
        self.ops.iter().collect()
    }
}
