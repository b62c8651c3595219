//! Fully connected: `y[N×out] = x[N×in]·W[in×out] + b`, on the tiled GEMM.

pub mod cpu;
pub mod cuda;

pub use cpu::LinearLayer;
