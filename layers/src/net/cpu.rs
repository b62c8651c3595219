//! The CPU half of the executor: [`CpuNet`] is the one [`Executor`] on the
//! [`Cpu`] backend, with the CPU layer of each op, the memory estimate made
//! before allocating, and what `check` needs to compare two networks layer
//! by layer.

use super::exec::{held, ExecOptions, Executor};
use super::graph::Graph;
use super::plan::passes_gradient;
use crate::backend::cpu::{Cpu, Ctx, Param};
use crate::core::error::Result;
use crate::core::shape::Dims;
use crate::ops::spec::OpSpec;
use cnnbench_kernels::Isa;
use std::collections::HashMap;

pub use super::exec::Memory;

#[derive(Clone, Copy, Debug)]
pub struct CpuOptions {
    pub isa: Isa,
    /// Naive reference kernels everywhere (for `check`).
    pub reference: bool,
    pub seed: u64,
    /// Fuse each ReLU into the batch norm or residual add before it, where
    /// it alone reads that layer's output, and a residual add with its ReLU
    /// into the batch norm before the add (never with `reference`).
    pub fuse_relu: bool,
}

pub type CpuNet = Executor<Cpu>;

impl Executor<Cpu> {
    /// Allocates every tensor and makes every layer (convolution plans are
    /// made on their first run). The caller checks the memory estimate
    /// ([`estimate`]) first.
    pub fn new(graph: &Graph, batch: usize, opts: CpuOptions) -> Result<CpuNet> {
        let cx = Ctx {
            isa: opts.isa,
            reference: opts.reference,
            step_seed: opts.seed,
            conv_choice: HashMap::new(),
        };
        let exec = ExecOptions {
            seed: opts.seed,
            // The host clock costs nanoseconds per layer.
            per_layer: true,
            fuse_relu: opts.fuse_relu && !opts.reference,
            // A residual add and its ReLU go into the batch norm before
            // the add (ResNet's block ends), in its passes both ways.
            fuse_add: opts.fuse_relu && !opts.reference,
        };
        Executor::build(Cpu { isa: opts.isa }, cx, graph, batch, exec)
    }

    /// The output of node `i` of the last forward pass (for a layer with a
    /// fused ReLU, the ReLU's output).
    pub fn output(&self, i: usize) -> &[f32] {
        &held(&self.acts[self.act_of[i]])[..]
    }

    /// The logits (the loss layer's input) of the last forward pass.
    pub fn logits(&self) -> &[f32] {
        let loss = self.graph.nodes.last().expect("a loss node");
        self.output(loss.inputs[0])
    }

    /// Every parameter, in graph order (a layer's weight before its bias).
    pub fn params_mut(&mut self) -> Vec<&mut Param> {
        self.layers
            .iter_mut()
            .flatten()
            .flat_map(|l| l.params())
            .collect()
    }

    /// The forward pass with every layer reading `other`'s outputs (same
    /// graph and batch) as its inputs: each layer's own error against
    /// `other`, free of what earlier layers did. Returns each node's
    /// output error (relative L2; the input's is 0).
    ///
    /// `check` uses it, and [`CpuNet::backward_from`]: run free, two
    /// correct implementations drift apart by rounding that deep networks
    /// amplify, and a value rounding to the other side of a ReLU's kink or
    /// a max-pooling tie sends its gradient down another path; neither
    /// says anything about the layers.
    ///
    /// `self` runs unfused; `other` may have fused ReLUs (see the module
    /// notes). A tensor `other` does not hold (a fused layer's output
    /// before its ReLU) is not compared (`None`), and `self` reads its own
    /// there: the ReLU's node then compares the fused layer's output.
    pub fn forward_from(&mut self, other: &CpuNet) -> Result<Vec<Option<f64>>> {
        assert_eq!(self.acts.len(), other.acts.len(), "same network");
        assert_eq!(self.fused_relus(), 0, "self runs unfused");
        self.cx.step_seed = other.cx.step_seed;
        let mut errs = vec![None; self.graph.nodes.len()];
        #[allow(clippy::needless_range_loop)] // `i` names the node throughout
        for i in 1..self.graph.nodes.len() {
            for &t in &self.graph.nodes[i].inputs {
                let b = self.act_of[t];
                copy_held(&mut self.acts[b], &other.acts[b]);
            }
            self.forward_node(i)?;
            let b = self.act_of[i];
            errs[i] = other.acts[b]
                .as_ref()
                .map(|theirs| rel_l2(&held(&self.acts[b])[..], theirs));
        }
        Ok(errs)
    }

    /// The backward pass with every layer reading `other`'s output
    /// gradients and activations (see [`CpuNet::forward_from`]), after
    /// which each parameter gradient carries its own layer's error only.
    pub fn backward_from(&mut self, other: &CpuNet) -> Result<()> {
        for (mine, theirs) in self.acts.iter_mut().zip(&other.acts) {
            copy_held(mine, theirs);
        }
        for i in (1..self.graph.nodes.len()).rev() {
            if passes_gradient(&self.graph.nodes[i].op) {
                continue;
            }
            for &p in &self.dy_parts[i] {
                copy_held(&mut self.grads[p], &other.grads[p]);
            }
            self.backward_node(i)?;
        }
        Ok(())
    }

    /// Node `i`'s output gradients of the last backward pass, one per
    /// consuming edge, in the [`super::plan::BufferPlan`]'s order (`check` hands them
    /// to another backend's layer).
    pub fn dy_parts(&self, i: usize) -> Vec<&[f32]> {
        self.dy_parts[i]
            .iter()
            .map(|&p| &held(&self.grads[p])[..])
            .collect()
    }

    /// The image batch, to set inputs by hand (tests).
    pub fn input_mut(&mut self) -> &mut [f32] {
        let b = self.act_of[0];
        self.acts[b].as_mut().expect("the image is held")
    }
}

/// Copies `theirs` where the other network holds it; else keeps `mine`.
fn copy_held(mine: &mut Option<Vec<f32>>, theirs: &Option<Vec<f32>>) {
    if let (Some(mine), Some(theirs)) = (mine, theirs) {
        mine.copy_from_slice(theirs);
    }
}

fn rel_l2(got: &[f32], want: &[f32]) -> f64 {
    cnnbench_kernels::conv::reference::rel_l2_error(got, want)
}

/// What a CPU network will allocate, for the memory check made before
/// allocating.
pub struct Estimate {
    /// Parameters, activations, gradients and what layers keep beyond them
    /// (recurrent layers: every step's gates): what a reference network
    /// holds too.
    pub held: u128,
    /// The fast layers' plans (convolutions), at their bounds.
    pub plans: u128,
}

impl Estimate {
    pub fn total(&self) -> u128 {
        self.held + self.plans
    }
}

/// Bytes [`CpuNet::new`] and the layers' first runs will allocate on
/// `threads` threads. The plans' bounds are taken on a pool of that size,
/// so that the check neither waits for the run's pool nor starts rayon's
/// global one before it.
pub fn estimate(graph: &Graph, batch: usize, threads: usize) -> Estimate {
    let consumers = graph.consumers();
    let mut elems: u128 = graph.params() as u128 * 3;
    for (i, node) in graph.nodes.iter().enumerate() {
        let len = batch as u128 * node.out.len() as u128;
        if !node.op.spec().aliases_input() {
            elems += len; // the output
            elems += len * consumers[i].len() as u128; // its gradients
        }
    }
    let per_layer = |bytes: &dyn Fn(&dyn OpSpec, &[Dims]) -> u128| -> u128 {
        graph
            .nodes
            .iter()
            .enumerate()
            .map(|(i, node)| bytes(node.op.spec(), &graph.input_dims(i)))
            .sum()
    };
    let scratch = per_layer(&|op, x| op.cpu_scratch_bytes(x, batch));
    // A pool that cannot start leaves the plans out: the run cannot start
    // its threads either, and says so.
    let plans = rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .build()
        .map_or(0, |pool| {
            pool.install(|| per_layer(&|op, x| op.cpu_plan_bytes(x, batch)))
        });
    Estimate {
        held: elems * 4 + scratch,
        plans,
    }
}
