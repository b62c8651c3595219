//! Networks: the layer graph ([`graph`]) and the backends that run it.

#[cfg(test)]
mod backend_tests;
pub mod compare;
pub mod cpu;
pub mod exec;
pub mod fusion;
pub mod gpu;
pub mod graph;
pub mod init;
pub mod plan;
#[cfg(test)]
mod real_libs_tests;
#[cfg(test)]
pub(crate) mod tests;

pub use exec::{ExecOptions, Executor, Memory, StepMs};
pub use graph::{Builder, ConvSpec, Dims, Graph, LrnSpec, Node, Op, PoolKind, PoolSpec, TensorId};
