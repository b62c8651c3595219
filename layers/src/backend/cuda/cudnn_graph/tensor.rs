//! Tensors of the graph API: always four logical dimensions in N, C, H, W
//! order (a filter: K, C/groups, R, S), the layout given by the strides,
//! each with a unique id the variant pack names its pointer by, and the
//! byte alignment its pointers are promised to have.

use super::descriptor::{Attr, Descriptor, Kind};
use crate::backend::cuda::cudnn::data_type;
use crate::backend::cuda::{GpuError, GpuResult};
use crate::core::{DType, Layout};

/// One tensor, before cuDNN sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorSpec {
    pub id: i64,
    pub dtype: DType,
    /// N, C, H, W (or K, C/groups, R, S).
    pub dims: [usize; 4],
    pub layout: Layout,
    /// Bytes every pointer bound to it is aligned to.
    pub alignment: usize,
    /// Passed between the operations of one graph, never in memory (no
    /// pointer binds it).
    pub is_virtual: bool,
}

/// The strides of dense `dims` (N, C, H, W) in `layout`: NCHW is
/// row-major; NHWC has C innermost.
pub fn strides(layout: Layout, [_, c, h, w]: [usize; 4]) -> [usize; 4] {
    match layout {
        Layout::Nchw => [c * h * w, h * w, w, 1],
        Layout::Nhwc => [h * w * c, 1, w * c, c],
    }
}

/// The largest power of two, at most 16, that divides every address:
/// what a tensor descriptor may promise about pointers bound to it.
pub fn alignment_of(addrs: &[u64]) -> usize {
    let mut a = 16u64;
    while a > 1 && addrs.iter().any(|p| p % a != 0) {
        a /= 2;
    }
    a as usize
}

fn to_i64(v: usize) -> GpuResult<i64> {
    i64::try_from(v).map_err(|_| {
        GpuError::invalid(
            "cudnnBackendSetAttribute",
            format!("dimension {v} does not fit in int64"),
        )
    })
}

impl TensorSpec {
    /// The finalized tensor descriptor.
    pub fn build(&self) -> GpuResult<Descriptor> {
        let dims = self.dims.map(to_i64);
        let strides = strides(self.layout, self.dims).map(to_i64);
        let mut d = Descriptor::new(Kind::CUDNN_BACKEND_TENSOR_DESCRIPTOR)?;
        // cudnn-frontend's order: data type, dimensions, strides, id,
        // alignment, then finalize.
        d.set_data_type(Attr::CUDNN_ATTR_TENSOR_DATA_TYPE, data_type(self.dtype))?;
        d.set_i64s(
            Attr::CUDNN_ATTR_TENSOR_DIMENSIONS,
            &dims.into_iter().collect::<GpuResult<Vec<_>>>()?,
        )?;
        d.set_i64s(
            Attr::CUDNN_ATTR_TENSOR_STRIDES,
            &strides.into_iter().collect::<GpuResult<Vec<_>>>()?,
        )?;
        d.set_i64(Attr::CUDNN_ATTR_TENSOR_UNIQUE_ID, self.id)?;
        d.set_i64(
            Attr::CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT,
            to_i64(self.alignment)?,
        )?;
        d.set_bool(Attr::CUDNN_ATTR_TENSOR_IS_VIRTUAL, self.is_virtual)?;
        d.finalize()?;
        Ok(d)
    }
}
