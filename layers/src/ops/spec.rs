//! What every op says about itself ([`OpSpec`]), and how each backend
//! builds an op's layer from it ([`MakeLayer`]).
//!
//! The graph holds one spec per node ([`super::Op`]); the executor asks the
//! node's spec for the layer of the backend it runs on, and every backend
//! starts from the same parameters ([`OpSpec::init`]).

use crate::backend::cpu::Cpu;
use crate::backend::cuda::layer::Cuda;
use crate::backend::cuda::GpuResult;
use crate::core::backend::{Backend, Layer};
use crate::core::error::Result;
use crate::core::init::layer_seed;
use crate::core::shape::Dims;

/// One node as its op sees it: its inputs' and output's dims (per image),
/// the batch, and the run's seeded data.
pub struct NodeCx<'a> {
    /// The node's index in the graph (dropout's mask stream).
    pub index: usize,
    pub batch: usize,
    pub x: &'a [Dims],
    pub y: Dims,
    /// The run's seed.
    pub seed: u64,
    /// One seeded class per image (the loss).
    pub labels: &'a [u32],
    /// Whether the first input needs a gradient (not for the image).
    pub input_grad: bool,
    /// The dims before flattening, when the first input is a flatten.
    pub flattened: Option<Dims>,
}

impl NodeCx<'_> {
    /// The seed of this node's parameters.
    pub fn layer_seed(&self) -> u64 {
        layer_seed(self.seed, self.index)
    }
}

pub trait OpSpec {
    /// The short type name shown in layer tables and JSON (`conv`, `bn`).
    fn kind(&self) -> &'static str;

    /// The output's dims (per image) from the inputs', or why the inputs
    /// do not fit the op. By default: one input, and the output has its
    /// dims (elementwise ops, normalisations).
    fn out(&self, x: &[Dims]) -> std::result::Result<Dims, String> {
        one_input(x)
    }

    /// Learnable parameters (BN: weight and bias; running statistics are
    /// buffers, not parameters).
    fn params(&self, _x: &[Dims]) -> usize {
        0
    }

    /// Multiply-accumulates of the forward pass for one image (convolutions
    /// and fully connected layers; the rest count 0, as papers do).
    fn macs(&self, _x: &[Dims], _y: Dims) -> u64 {
        0
    }

    /// The name of parameter `k` in the layers' order (`weight`, then
    /// `bias`, unless the op says otherwise).
    fn param_name(&self, k: usize) -> &'static str {
        if k == 0 {
            "weight"
        } else {
            "bias"
        }
    }

    /// The initial parameters in the CPU layers' order (weight, then
    /// bias): what every backend starts from, so that they can be
    /// compared.
    fn init(&self, _cx: &NodeCx) -> Vec<Vec<f32>> {
        Vec::new()
    }

    /// The layer on the CPU.
    fn cpu(&self, cx: &NodeCx) -> Result<Box<dyn Layer<Cpu>>>;

    /// The layer on CUDA (`None`: the node needs none, as a flatten, whose
    /// output aliases its input).
    fn cuda<'g>(&self, cx: &NodeCx, b: &Cuda<'g>) -> GpuResult<Option<Box<dyn Layer<Cuda<'g>>>>>;
}

/// A backend whose layers every op can build.
pub trait MakeLayer: Backend {
    fn make_layer(&self, spec: &dyn OpSpec, cx: &NodeCx) -> Result<Option<Box<dyn Layer<Self>>>>;
}

impl MakeLayer for Cpu {
    fn make_layer(&self, spec: &dyn OpSpec, cx: &NodeCx) -> Result<Option<Box<dyn Layer<Cpu>>>> {
        spec.cpu(cx).map(Some)
    }
}

impl<'g> MakeLayer for Cuda<'g> {
    fn make_layer(
        &self,
        spec: &dyn OpSpec,
        cx: &NodeCx,
    ) -> Result<Option<Box<dyn Layer<Cuda<'g>>>>> {
        spec.cuda(cx, self)
    }
}

/// The one input of an op that takes one, or why `x` is not that.
pub fn one_input(x: &[Dims]) -> std::result::Result<Dims, String> {
    match x {
        [x] => Ok(*x),
        _ => Err(format!("takes one input, not {}", x.len())),
    }
}
