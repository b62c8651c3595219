//! One folder per op: its spec (`mod.rs`), its CPU side (`cpu.rs`), its
//! CUDA side (`cuda.rs`, with the op's `.cu` file beside it where cuDNN
//! lacks the kernel) and its tests.

pub mod add;
pub mod batchnorm;
pub mod concat;
pub mod conv;
pub mod cuda_programs;
pub mod dropout;
pub mod flatten;
pub mod gemm;
pub mod linear;
pub mod loss;
pub mod lrn;
pub mod pool;
pub mod relu;
pub mod spec;
