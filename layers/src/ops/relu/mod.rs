//! ReLU. Its backward sums the gradients of all consumers of its output on
//! the way (a ResNet block's input feeds both the branch and the shortcut).

pub mod cpu;
pub mod cuda;

pub use cpu::ReluLayer;
