//! Local response normalisation across channels (AlexNet).

pub mod cpu;
pub mod cuda;

pub use cpu::LrnLayer;

/// Local response normalisation across channels, Caffe/PyTorch style:
/// `y = x / (k + alpha/size · Σ x²)^beta` over `size` neighbouring channels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LrnSpec {
    pub size: usize,
    pub alpha: f32,
    pub beta: f32,
    pub k: f32,
}
