//! The interface between the CPU executor ([`super::cpu::CpuNet`]) and each
//! op's CPU side.

use cnnbench_kernels::conv::{ConvShape, Direction};
use cnnbench_kernels::Isa;
use std::collections::HashMap;

/// What every layer may consult while it runs.
pub struct Ctx {
    pub isa: Isa,
    /// Run the naive references instead of the fast kernels (`check`).
    pub reference: bool,
    /// Changes every training step (dropout draws a new mask).
    pub step_seed: u64,
    /// The fastest convolution algorithm per problem and direction, found
    /// by timing the candidates on the first run of each shape.
    pub conv_choice: HashMap<(ConvShape, Direction), &'static str>,
}

/// A parameter tensor with its gradient (and SGD's momentum buffer).
pub struct Param {
    pub value: Vec<f32>,
    pub grad: Vec<f32>,
    pub velocity: Vec<f32>,
}

impl Param {
    pub fn new(value: Vec<f32>) -> Param {
        let n = value.len();
        Param {
            value,
            grad: vec![f32::NAN; n],
            velocity: vec![0.0; n],
        }
    }
}

/// How much of the ReLU that follows a layer the layer runs itself, in
/// its own passes over memory (see [`CpuLayer::fuse_relu`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReluFusion {
    None,
    /// The layer writes `max(y, 0)`; the ReLU's backward still runs.
    Forward,
    /// Also the ReLU's backward: the layer's backward receives the ReLU's
    /// output gradient and masks it itself.
    ForwardBackward,
}

/// One layer's CPU side. Tensors are NHWC `f32` slices of the whole batch.
pub trait CpuLayer: Send {
    /// `out = f(inputs)`.
    fn forward(&mut self, ctx: &mut Ctx, inputs: &[&[f32]], out: &mut [f32]);

    /// Gradients of the inputs for which `dxs[k]` is `Some`, and of the
    /// parameters, from the output gradient. `dys` holds one gradient per
    /// consumer of the output; unless [`CpuLayer::sums_gradients`] is true
    /// the executor sums them first and passes exactly one.
    fn backward(
        &mut self,
        ctx: &mut Ctx,
        inputs: &[&[f32]],
        out: &[f32],
        dys: &[&[f32]],
        dxs: &mut [Option<&mut [f32]>],
    );

    /// Whether `backward` sums several output gradients itself (on the way,
    /// for free) instead of the executor summing them beforehand.
    fn sums_gradients(&self) -> bool {
        false
    }

    fn params(&mut self) -> Vec<&mut Param> {
        Vec::new()
    }

    /// Bytes of scratch memory held (convolution workspaces, masks, saved
    /// statistics), for the memory report.
    fn scratch_bytes(&self) -> usize {
        0
    }

    /// Takes over the ReLU that alone reads this layer's output, and says
    /// how much of it ([`ReluFusion::None`]: nothing, the default). The
    /// executor then writes the ReLU's output through this layer and skips
    /// the ReLU's forward (and its backward for `ForwardBackward`, which it
    /// allows only when `backward` is true). Never asked of reference
    /// layers.
    fn fuse_relu(&mut self, _backward: bool) -> ReluFusion {
        ReluFusion::None
    }

    /// The kernels that ran, for the per-layer table (`conv` layers name
    /// their algorithm per direction).
    fn kernels(&self) -> String {
        String::new()
    }
}
