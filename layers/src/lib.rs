//! cnnbench layers: tensors, dtypes and layouts, and each op's backends.
//!
//! One folder per op, with its CPU side (and, later, its CUDA side) next to
//! each other and tests shared between them.

pub mod conv;
pub mod cuda;
pub mod dtype;
pub mod gemm;
pub mod layout;

pub use dtype::DType;
pub use layout::Layout;
