//! Batch normalisation in training mode: batch statistics normalise the
//! output, and the running averages are updated as PyTorch does (unbiased
//! variance, `momentum` weight on the new batch).

pub mod cpu;
pub mod cuda;

pub use cpu::BatchNormLayer;
