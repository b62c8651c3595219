//! MLPerf ResNet-50's "NormConv" forward as one graph of cuDNN's runtime
//! fusion (issue 28, item 4): the batch norm before a convolution applied
//! in the convolution's prologue with its ReLU, and the statistics of the
//! batch norm after it gathered in its epilogue:
//!
//! ```text
//! y          = conv(relu(x · scale + shift), w)
//! sum, sqsum = Σ y, Σ y²    per output channel, over N, H, W (fp32)
//! ```
//!
//! `x` is the previous convolution's raw output and `scale`, `shift` the
//! batch norm's coefficients per input channel (`γ/σ` and `β − μγ/σ`), so
//! the normalised, activated tensor is never written: it lives in the
//! graph as virtual fp32 tensors. The graph is cudnn-frontend's
//! "ConvBNfprop" pattern (scale, bias, ReLU, convolution, statistics), as
//! Paddle's fused_scale_bias_relu_conv_bn builds it: NHWC, f16 or bf16,
//! one group.

use super::convolution::{conv_descriptor, operation, W, X, Y};
use super::descriptor::Descriptor;
use super::pointwise::{gen_stats_op, Pointwise, PointwiseOp};
use super::tensor::TensorSpec;
use crate::backend::cuda::cudnn::ConvGeometry;
use crate::backend::cuda::{GpuError, GpuResult};
use crate::core::{DType, Layout};
use cnnbench_kernels::conv::{ConvShape, Direction};

/// The batch norm's scale per input channel (`[1, C, 1, 1]`, the data's
/// dtype).
pub const SCALE: i64 = 4;
/// Its shift, as [`SCALE`].
pub const SHIFT: i64 = 5;
/// The output's sum per channel (`[1, K, 1, 1]`, fp32).
pub const SUM: i64 = 6;
/// The output's sum of squares per channel, as [`SUM`].
pub const SQSUM: i64 = 7;
/// The virtual tensors between the prologue's operations.
const SCALED: i64 = 8;
const SHIFTED: i64 = 9;
const ACTIVATED: i64 = 10;

/// The ids a variant pack binds, in the order [`NormConvFwd::ids`] gives.
pub const IDS: [i64; 7] = [X, W, Y, SCALE, SHIFT, SUM, SQSUM];

/// The five operations of one NormConv forward; owns every descriptor
/// they refer to.
pub struct NormConvFwd {
    pub dtype: DType,
    prologue: [PointwiseOp; 3],
    conv: Descriptor,
    stats: Descriptor,
    // Kept alive with the operations that refer to them.
    _tensors: Vec<Descriptor>,
    _conv_desc: Descriptor,
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

impl NormConvFwd {
    /// The graph's operations for `p` in `dtype`, NHWC, pointers aligned
    /// to `alignment` bytes.
    pub fn new(
        p: &ConvShape,
        geometry: &ConvGeometry,
        dtype: DType,
        alignment: usize,
    ) -> GpuResult<NormConvFwd> {
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
        let x_dims = [p.mb, p.ic, p.ih, p.iw];
        let per_in = [1, p.ic, 1, 1];
        let per_out = [1, p.oc, 1, 1];
        let specs = [
            spec(X, dtype, x_dims, false),
            spec(SCALE, dtype, per_in, false),
            spec(SHIFT, dtype, per_in, false),
            spec(SCALED, DType::F32, x_dims, true),
            spec(SHIFTED, DType::F32, x_dims, true),
            spec(ACTIVATED, DType::F32, x_dims, true),
            spec(W, dtype, [p.oc, p.icg(), p.kh, p.kw], false),
            spec(Y, dtype, [p.mb, p.oc, p.oh, p.ow], false),
            spec(SUM, DType::F32, per_out, false),
            spec(SQSUM, DType::F32, per_out, false),
        ];
        let t = specs
            .iter()
            .map(TensorSpec::build)
            .collect::<GpuResult<Vec<_>>>()?;
        let [x, scale, shift, scaled, shifted, activated, w, y, sum, sqsum] =
            [0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map(|i| &t[i]);
        let prologue = [
            PointwiseOp::new(Pointwise::Mul, x, Some(scale), scaled)?,
            PointwiseOp::new(Pointwise::Add, scaled, Some(shift), shifted)?,
            PointwiseOp::new(Pointwise::Relu, shifted, None, activated)?,
        ];
        let conv_desc = conv_descriptor(geometry)?;
        let conv = operation(Direction::Fwd, [activated, w, y], &conv_desc)?;
        let stats = gen_stats_op(y, sum, sqsum)?;
        Ok(NormConvFwd {
            dtype,
            prologue,
            conv,
            stats,
            _tensors: t,
            _conv_desc: conv_desc,
        })
    }

    /// The operations in graph order: scale, shift, ReLU, convolution,
    /// statistics.
    pub fn ops(&self) -> [&Descriptor; 5] {
        let [a, b, c] = &self.prologue;
        [&a.op, &b.op, &c.op, &self.conv, &self.stats]
    }
}
