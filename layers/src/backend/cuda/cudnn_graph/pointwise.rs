//! Pointwise operations of the graph API (a multiplication or addition
//! of two tensors, one broadcast over the other, or a ReLU of one) and
//! the statistics one (per-channel sum and sum of squares), ReLU's
//! backward and a batch norm's weight backward: the pieces a
//! convolution's runtime-fused prologue and epilogue are made of.
//! Attribute order as cudnn-frontend's `PointWiseDescBuilder` and
//! `OperationBuilder` set them.

use super::descriptor::{Attr, AttrType, Descriptor, Kind};
use crate::backend::cuda::loader::cudnn_sys as sys;
use crate::backend::cuda::GpuResult;

/// What one pointwise operation computes, in fp32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pointwise {
    /// `y = x · b`
    Mul,
    /// `y = x + b`
    Add,
    /// `y = max(x, 0)`
    Relu,
    /// `dx = dy` where `x > 0`, else 0: ReLU's backward, with `b` the
    /// incoming gradient `dy` and `x` the forward's input.
    ReluBwd,
}

impl Pointwise {
    fn mode(self) -> sys::cudnnPointwiseMode_t {
        match self {
            Pointwise::Mul => sys::cudnnPointwiseMode_t::CUDNN_POINTWISE_MUL,
            Pointwise::Add => sys::cudnnPointwiseMode_t::CUDNN_POINTWISE_ADD,
            Pointwise::Relu => sys::cudnnPointwiseMode_t::CUDNN_POINTWISE_RELU_FWD,
            Pointwise::ReluBwd => sys::cudnnPointwiseMode_t::CUDNN_POINTWISE_RELU_BWD,
        }
    }

    /// Whether it takes a second tensor (`b`).
    pub fn binary(self) -> bool {
        self != Pointwise::Relu
    }
}

/// One pointwise operation; owns its pointwise descriptor.
pub struct PointwiseOp {
    pub op: Descriptor,
    _pw: Descriptor,
}

impl PointwiseOp {
    /// `y = f(x[, b])` computed in fp32; `b` exactly when `f` is binary
    /// (for [`Pointwise::ReluBwd`], `b` is `dy` and `y` is `dx`).
    pub fn new(
        f: Pointwise,
        x: &Descriptor,
        b: Option<&Descriptor>,
        y: &Descriptor,
    ) -> GpuResult<PointwiseOp> {
        let mut pw = Descriptor::new(Kind::CUDNN_BACKEND_POINTWISE_DESCRIPTOR)?;
        pw.set_enum(
            Attr::CUDNN_ATTR_POINTWISE_MODE,
            AttrType::CUDNN_TYPE_POINTWISE_MODE,
            f.mode() as u32,
        )?;
        pw.set_data_type(
            Attr::CUDNN_ATTR_POINTWISE_MATH_PREC,
            sys::cudnnDataType_t::CUDNN_DATA_FLOAT,
        )?;
        pw.finalize()?;
        let mut op = Descriptor::new(Kind::CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR)?;
        op.set_descs(Attr::CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, &[&pw])?;
        op.set_descs(Attr::CUDNN_ATTR_OPERATION_POINTWISE_XDESC, &[x])?;
        // A backward mode names its tensors dy and dx, as cudnn-frontend's
        // builder sets them.
        let (b_attr, y_attr) = match f {
            Pointwise::ReluBwd => (
                Attr::CUDNN_ATTR_OPERATION_POINTWISE_DYDESC,
                Attr::CUDNN_ATTR_OPERATION_POINTWISE_DXDESC,
            ),
            _ => (
                Attr::CUDNN_ATTR_OPERATION_POINTWISE_BDESC,
                Attr::CUDNN_ATTR_OPERATION_POINTWISE_YDESC,
            ),
        };
        if let Some(b) = b {
            op.set_descs(b_attr, &[b])?;
        }
        op.set_descs(y_attr, &[y])?;
        op.finalize()?;
        Ok(PointwiseOp { op, _pw: pw })
    }

    /// The operation and the pointwise descriptor it refers to (which
    /// must outlive it).
    pub fn into_parts(self) -> (Descriptor, Descriptor) {
        (self.op, self._pw)
    }
}

/// The per-channel sum and sum of squares of `x` (`[1, C, 1, 1]` each,
/// fp32), as a batch norm's statistics need them.
pub fn gen_stats_op(x: &Descriptor, sum: &Descriptor, sqsum: &Descriptor) -> GpuResult<Descriptor> {
    let mut op = Descriptor::new(Kind::CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR)?;
    op.set_enum(
        Attr::CUDNN_ATTR_OPERATION_GENSTATS_MODE,
        AttrType::CUDNN_TYPE_GENSTATS_MODE,
        sys::cudnnGenStatsMode_t::CUDNN_GENSTATS_SUM_SQSUM as u32,
    )?;
    op.set_data_type(
        Attr::CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC,
        sys::cudnnDataType_t::CUDNN_DATA_FLOAT,
    )?;
    op.set_descs(Attr::CUDNN_ATTR_OPERATION_GENSTATS_XDESC, &[x])?;
    op.set_descs(Attr::CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, &[sum])?;
    op.set_descs(Attr::CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, &[sqsum])?;
    op.finalize()?;
    Ok(op)
}

/// The tensors of a batch norm's weight backward: `x` and `dy` whole
/// tensors in the data's dtype, the others per channel (`[1, C, 1, 1]`,
/// fp32).
pub struct BnBwdWeights<'a> {
    /// The batch norm's input.
    pub x: &'a Descriptor,
    /// The gradient of its output.
    pub dy: &'a Descriptor,
    /// Saved by its forward: the batch mean and 1/σ.
    pub mean: &'a Descriptor,
    pub invstd: &'a Descriptor,
    /// Its γ.
    pub gamma: &'a Descriptor,
    /// Outputs: γ's and β's gradients, and the coefficients of the data
    /// gradient `dx = eq_dy·dy + eq_x·x + eq_bias`.
    pub dgamma: &'a Descriptor,
    pub dbeta: &'a Descriptor,
    pub eq_dy: &'a Descriptor,
    pub eq_x: &'a Descriptor,
    pub eq_bias: &'a Descriptor,
}

/// A batch norm's weight backward as one operation (`BN_BWD_WEIGHTS`, as
/// cudnn-frontend's `dbn_weight` builds it): the reductions over `dy` and
/// `dy·x̂` and what they make of γ's and β's gradients.
pub fn bn_bwd_weights_op(t: &BnBwdWeights) -> GpuResult<Descriptor> {
    use Attr::*;
    let mut op = Descriptor::new(Kind::CUDNN_BACKEND_OPERATION_BN_BWD_WEIGHTS_DESCRIPTOR)?;
    op.set_data_type(
        CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_MATH_PREC,
        sys::cudnnDataType_t::CUDNN_DATA_FLOAT,
    )?;
    for (attr, d) in [
        (
            CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_DY_SCALE_DESC,
            t.eq_dy,
        ),
        (CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_X_SCALE_DESC, t.eq_x),
        (CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_BIAS, t.eq_bias),
        (CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_MEAN_DESC, t.mean),
        (CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_INVSTD_DESC, t.invstd),
        (CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_BN_SCALE_DESC, t.gamma),
        (CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_X_DESC, t.x),
        (CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DY_DESC, t.dy),
        (CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DBN_SCALE_DESC, t.dgamma),
        (CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DBN_BIAS_DESC, t.dbeta),
    ] {
        op.set_descs(attr, &[d])?;
    }
    op.finalize()?;
    Ok(op)
}
