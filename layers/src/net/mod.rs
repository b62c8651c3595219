//! Networks: the layer graph and its builder ([`graph`]; the ops it holds
//! are registered in [`crate::ops`]), the buffer plan ([`plan`]), the one executor that runs a
//! graph on any backend ([`exec`]) with its CPU and GPU constructors
//! ([`cpu`], [`gpu`]), the ReLU fusion pass ([`fusion`]), and the
//! layer-by-layer comparison with the CPU reference ([`compare`]).

#[cfg(test)]
mod backend_tests;
pub mod buckets;
pub mod compare;
pub mod cpu;
pub mod cuda_graph;
pub mod data_parallel;
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
pub mod traffic;

pub use exec::{ExecOptions, Executor, GradientHook, Memory, StepMs};
pub use graph::{
    Builder, Cell, ConvSpec, Dims, Graph, LrnSpec, Node, Op, PoolKind, PoolSpec, RecurrentSpec,
    TensorId,
};
