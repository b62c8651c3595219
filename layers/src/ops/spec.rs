//! What every op says about itself ([`OpSpec`]), and how each backend
//! builds an op's layer from it ([`MakeLayer`]).
//!
//! The graph holds one spec per node ([`super::Op`]); the executor asks the
//! node's spec for the layer of the backend it runs on, and every backend
//! starts from the same parameters ([`OpSpec::init`]).

use crate::backend::cpu::Cpu;
use crate::backend::cuda::backend::Cuda;
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

    /// Element counts of the learnable parameters, in the order the
    /// layers hold them and [`OpSpec::init`] makes them: weight, then bias
    /// (BN: weight (gamma), then bias (beta); running statistics are
    /// buffers, not parameters). The gradient buckets are cut along them.
    fn param_sizes(&self, _x: &[Dims]) -> Vec<usize> {
        Vec::new()
    }

    /// Learnable parameters: the sum of [`OpSpec::param_sizes`].
    fn params(&self, x: &[Dims]) -> usize {
        self.param_sizes(x).iter().sum()
    }

    /// Multiply-accumulates of the forward pass for one image (convolutions
    /// and fully connected layers; the rest count 0, as papers do).
    fn macs(&self, _x: &[Dims], _y: Dims) -> u64 {
        0
    }

    /// The least memory traffic of the forward and backward passes, in
    /// elements ([`Traffic`]): every tensor the pass must touch, read or
    /// written once, as if nothing stayed in a cache between passes or
    /// came back from one within a pass. The backward reads one output
    /// gradient (where the output has several readers, the graph adds the
    /// other parts: `net::traffic`) and writes the first input's gradient
    /// only when `input_grad` (the image gets none). Parameters count in
    /// [`Elements::fixed`]: read by the forward, their gradients written by
    /// the backward.
    ///
    /// By default, an op without parameters that touches each element
    /// once: the forward reads every input and writes the output, the
    /// backward reads the output gradient and writes the inputs'
    /// gradients.
    fn traffic(&self, x: &[Dims], y: Dims, input_grad: bool) -> Traffic {
        Traffic {
            forward: Elements::per_image(total(x) + y.len()),
            backward: Elements::per_image(y.len() + input_grads(x, input_grad)),
        }
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

    /// Whether the output is the first input's memory seen with other
    /// dims (flatten): the executor gives it no buffer of its own and
    /// runs nothing forward, and the layer after sees the input's dims
    /// ([`NodeCx::flattened`]).
    fn aliases_input(&self) -> bool {
        false
    }

    /// Whether the backward hands the output gradient to every input as
    /// is (residual add, flatten): the inputs' gradients share its
    /// buffer, and nothing runs backward.
    fn passes_gradient(&self) -> bool {
        false
    }

    /// The value count of a label when this op is the loss, where it is
    /// not the classes (the loss's input channels): a binary
    /// classifier's one logit takes 2.
    fn label_classes(&self) -> Option<usize> {
        None
    }

    /// The vocabulary, when the op reads token ids (an embedding): read
    /// from the network's input, they are held as f32 on every backend
    /// and in every precision.
    fn id_vocab(&self) -> Option<usize> {
        None
    }

    /// Whether the op runs in the NHWC layout only (a sequence's features
    /// innermost, as cuDNN's RNN API reads them).
    fn nhwc_only(&self) -> bool {
        false
    }

    /// Bytes the CPU layer keeps at batch `batch` beyond its output and
    /// gradients (a recurrent layer: every step's gates, for the backward
    /// pass), for the memory check made before allocating.
    fn cpu_scratch_bytes(&self, _x: &[Dims], _batch: usize) -> u128 {
        0
    }

    /// Bytes of the plans the fast CPU layer keeps at batch `batch` (the
    /// reference layer keeps none), at their bounds on the current rayon
    /// pool, for the same check.
    fn cpu_plan_bytes(&self, _x: &[Dims], _batch: usize) -> u128 {
        0
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

/// Element counts of one pass's least memory traffic: what scales with the
/// batch (activations and their gradients, per image) and what does not
/// (parameters and their gradients, per step). The caller prices them at
/// the run's element size ([`Elements::bytes`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Elements {
    pub per_image: u64,
    pub fixed: u64,
}

impl Elements {
    /// `n` elements per image, nothing fixed.
    pub fn per_image(n: usize) -> Elements {
        Elements {
            per_image: n as u64,
            fixed: 0,
        }
    }

    /// `self` plus `n` fixed elements (parameters, their gradients).
    pub fn plus_fixed(self, n: usize) -> Elements {
        Elements {
            fixed: self.fixed + n as u64,
            ..self
        }
    }

    /// Bytes at batch `batch`, every element `elem_bytes` wide.
    pub fn bytes(self, batch: usize, elem_bytes: usize) -> u64 {
        (self.per_image * batch as u64 + self.fixed) * elem_bytes as u64
    }
}

/// The least memory traffic of an op's passes ([`OpSpec::traffic`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    pub forward: Elements,
    pub backward: Elements,
}

/// Elements of all of `x`.
pub fn total(x: &[Dims]) -> usize {
    x.iter().map(Dims::len).sum()
}

/// Elements of the input gradients a backward writes: every input's, but
/// the first input's only when it needs one (`input_grad`).
pub fn input_grads(x: &[Dims], input_grad: bool) -> usize {
    let skip = usize::from(!input_grad).min(x.len());
    total(&x[skip..])
}

/// A layer with weights (convolution, fully connected, recurrent): the
/// forward reads `x` and the parameters and writes `y`; the backward reads
/// `dy` and `x` and writes the parameters' gradients (the weight's from
/// `dy` and `x`, a bias's from `dy`), and, when `input_grad`, also reads
/// the weight and writes `dx`.
pub fn weighted(x: Dims, y: Dims, weight: usize, params: usize, input_grad: bool) -> Traffic {
    let dx = if input_grad { x.len() } else { 0 };
    let weight_read = if input_grad { weight } else { 0 };
    Traffic {
        forward: Elements::per_image(x.len() + y.len()).plus_fixed(params),
        backward: Elements::per_image(y.len() + x.len() + dx).plus_fixed(params + weight_read),
    }
}
