//! cnnbench layers: tensors, dtypes and layouts, and each op's backends.
//!
//! One folder per op, with its CPU side (and, later, its CUDA side) next to
//! each other and tests shared between them.

pub mod add;
pub mod batchnorm;
pub mod concat;
pub mod conv;
pub mod cuda;
pub mod dropout;
pub mod dtype;
pub mod flatten;
pub mod gemm;
pub mod layout;
pub mod linear;
pub mod loss;
pub mod lrn;
pub mod net;
pub mod pool;
pub mod relu;
pub mod zoo;

pub use dtype::DType;
pub use layout::Layout;
