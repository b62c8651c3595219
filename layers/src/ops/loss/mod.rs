//! Softmax cross-entropy loss against seeded labels (mean over the batch).

pub mod cpu;
pub mod cuda;
pub mod kernels;

pub use cpu::SoftmaxXentLayer;
