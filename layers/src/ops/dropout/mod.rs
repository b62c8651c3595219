//! Dropout in training mode: a fresh mask every step, kept elements scaled
//! by `1/(1-p)`.

pub mod cpu;
pub mod cuda;
pub mod kernels;

pub use cpu::DropoutLayer;
