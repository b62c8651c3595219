//! Pointwise operations of the graph API (a multiplication or addition
//! of two tensors, one broadcast over the other, or a ReLU of one) and
//! the statistics one (per-channel sum and sum of squares): the pieces a
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
}

impl Pointwise {
    fn mode(self) -> sys::cudnnPointwiseMode_t {
        match self {
            Pointwise::Mul => sys::cudnnPointwiseMode_t::CUDNN_POINTWISE_MUL,
            Pointwise::Add => sys::cudnnPointwiseMode_t::CUDNN_POINTWISE_ADD,
            Pointwise::Relu => sys::cudnnPointwiseMode_t::CUDNN_POINTWISE_RELU_FWD,
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
    /// `y = f(x[, b])` computed in fp32; `b` exactly when `f` is binary.
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
        if let Some(b) = b {
            op.set_descs(Attr::CUDNN_ATTR_OPERATION_POINTWISE_BDESC, &[b])?;
        }
        op.set_descs(Attr::CUDNN_ATTR_OPERATION_POINTWISE_YDESC, &[y])?;
        op.finalize()?;
        Ok(PointwiseOp { op, _pw: pw })
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
