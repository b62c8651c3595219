//! Max and average pooling (global average included).

pub mod cpu;
pub mod cuda;
pub mod kernels;

pub use cpu::PoolLayer;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolKind {
    Max,
    /// Average; `count_pad` counts padded cells in the divisor (PyTorch's
    /// `count_include_pad=True`, its default).
    Avg {
        count_pad: bool,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolSpec {
    pub kind: PoolKind,
    pub kh: usize,
    pub kw: usize,
    pub sh: usize,
    pub sw: usize,
    pub ph: usize,
    pub pw: usize,
    /// Round the output size up (Caffe, and PyTorch's `ceil_mode=True`).
    pub ceil: bool,
}
