//! Softmax cross-entropy loss against seeded labels (mean over the batch).

pub mod cpu;
pub mod cuda;

pub use cpu::SoftmaxXentLayer;
