//! cnnbench layers: the building blocks of the networks cnnbench times.
//!
//! Imports only point down the list:
//! - [`core`]: element types, layouts, seeded initialisation;
//! - [`backend`]: the CPU and CUDA backends (devices, memory, cuDNN, cuBLAS,
//!   NVRTC) and the interface each op's layers implement;
//! - [`ops`]: one folder per op with its spec, CPU side and CUDA side;
//! - [`net`]: the graph, its buffer plan and the executors;
//! - [`zoo`]: the models.

pub mod backend;
pub mod core;
pub mod net;
pub mod ops;
pub mod zoo;

// The paths the binary uses.
pub use crate::backend::cuda;
pub use crate::core::{dtype, layout, DType, Layout};
pub use crate::ops::{conv, gemm};
