//! Channel concatenation (Inception modules): NHWC, so every pixel's
//! channels are copied from each input in turn.

pub mod cpu;
pub mod cuda;

pub use cpu::ConcatLayer;
