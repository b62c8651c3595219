//! A thin, safe wrapper of cuDNN's graph (backend) API, for convolutions
//! through the engines the legacy `cudnnConvolution*` calls cannot reach
//! (`--api graph`). Attribute names and their order follow
//! NVIDIA/cudnn-frontend's C++ (`cudnn_frontend_Tensor.h`,
//! `..._ConvDesc.h`, `..._Operation.h`, `..._OperationGraph.h`,
//! `..._Heuristics.h`, `..._ExecutionPlan.h`, `..._VariantPack.h`).
//!
//! - [`descriptor`]: one backend descriptor, destroyed when dropped; typed
//!   setters and getters; every failure is one line naming the call and
//!   the attribute.
//! - [`tensor`]: tensors (logical N, C, H, W with the layout's strides,
//!   unique ids, byte alignment).
//! - [`convolution`]: the convolution descriptor and the one-node
//!   operation of each direction.
//! - [`engine`]: the operation graph, cuDNN's heuristics (mode A, then the
//!   fallback list) and what each engine configuration is: its numerical
//!   notes and its name (engine id and knobs).
//! - [`pointwise`]: pointwise operations (scale, shift, ReLU) and the
//!   statistics one, and [`norm_conv`]: the NormConv forward of runtime
//!   fusion built from them (batch norm and ReLU in a convolution's
//!   prologue, the next batch norm's statistics in its epilogue).
//! - [`plan`]: execution plans (an engine configuration finalized on a
//!   handle, with its workspace) and variant packs (the device pointers),
//!   and the call that runs them.
//!
//! Tensors, convolution descriptors and operations need no handle and are
//! tested against the real library without a GPU; the operation graph and
//! everything after it needs a handle, hence a GPU.

pub mod convolution;
pub mod descriptor;
pub mod engine;
pub mod norm_conv;
pub mod plan;
pub mod pointwise;
pub mod tensor;
#[cfg(test)]
mod tests;

pub use convolution::ConvOperation;
pub use descriptor::Descriptor;
pub use engine::{EngineConfig, OperationGraph};
pub use plan::{ExecutionPlan, VariantPack};
pub use tensor::TensorSpec;
