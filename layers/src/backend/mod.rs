//! The backends a network runs on: the CPU (our kernels) and CUDA (cuDNN,
//! cuBLAS and NVRTC kernels through `cudarc`).

pub mod cpu;
pub mod cuda;
