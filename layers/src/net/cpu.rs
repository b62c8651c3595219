//! The CPU executor: every layer's output and gradient in memory allocated
//! once, forward in graph order, backward in reverse, per-layer wall-clock
//! times of the last step.
//!
//! The buffers follow [`super::plan::BufferPlan`]; ReLU's backward sums
//! the gradients of its output's consumers on the way.
//!
//! With [`CpuOptions::fuse_relu`], a ReLU that alone reads a batch norm's
//! or a residual add's output runs inside that layer's passes (see
//! [`ReluFusion`]): the layer writes the ReLU's output buffer, its own
//! output buffer is freed, and the ReLU's node does nothing in the
//! forward pass (nor in the backward pass, for batch norm when the ReLU's
//! output has one reader). The per-layer table books the ReLU's time under
//! the layer and says so in the kernels column.

use super::graph::{Graph, Op};
use super::init;
use super::plan::{passes_gradient, BufferPlan};
use crate::backend::cpu::{CpuLayer, Ctx, Param, ReluFusion};
use crate::ops::add::AddLayer;
use crate::ops::batchnorm::BatchNormLayer;
use crate::ops::concat::ConcatLayer;
use crate::ops::conv::cpu_layer::ConvLayer;
use crate::ops::dropout::DropoutLayer;
use crate::ops::flatten::FlattenLayer;
use crate::ops::linear::LinearLayer;
use crate::ops::loss::SoftmaxXentLayer;
use crate::ops::lrn::LrnLayer;
use crate::ops::pool::PoolLayer;
use crate::ops::relu::ReluLayer;
use cnnbench_kernels::eltwise;
use cnnbench_kernels::norm::lrn::LrnParams;
use cnnbench_kernels::Isa;
use std::collections::HashMap;
use std::time::Instant;

#[derive(Clone, Copy, Debug)]
pub struct CpuOptions {
    pub isa: Isa,
    /// Naive reference kernels everywhere (for `check`).
    pub reference: bool,
    pub seed: u64,
    /// Fuse each ReLU into the batch norm or residual add before it, where
    /// it alone reads that layer's output (never with `reference`).
    pub fuse_relu: bool,
}

/// Bytes held, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Memory {
    /// Parameters with their gradients and momentum buffers.
    pub params: usize,
    /// Layer outputs (the image included) and their gradients.
    pub activations: usize,
    /// Convolution plans' scratch, masks, saved statistics.
    pub workspace: usize,
}

impl Memory {
    pub fn total(&self) -> usize {
        self.params + self.activations + self.workspace
    }
}

pub struct CpuNet {
    pub graph: Graph,
    pub batch: usize,
    ctx: Ctx,
    /// One per node; `None` for the input.
    layers: Vec<Option<Box<dyn CpuLayer>>>,
    acts: Vec<Vec<f32>>,
    /// The activation buffer of each node (flatten shares its input's).
    act_of: Vec<usize>,
    grads: Vec<Vec<f32>>,
    /// The gradient buffers of each node's output, one per consuming edge.
    dy_parts: Vec<Vec<usize>>,
    /// Where the parts are summed when the layer does not sum them itself.
    dy_sum: Vec<Option<usize>>,
    /// The buffer each node's backward writes per input (`None`: no
    /// gradient needed, or passed through).
    dx_of: Vec<Vec<Option<usize>>>,
    /// Per ReLU node: the node whose layer runs it, and how much of it.
    fused_into: Vec<Option<(usize, ReluFusion)>>,
    /// Wall-clock seconds of each node in the last forward and backward.
    pub fwd_secs: Vec<f64>,
    pub bwd_secs: Vec<f64>,
    step: u64,
    seed: u64,
}

impl CpuNet {
    /// Allocates every tensor and makes every layer (convolution plans are
    /// made on their first run). The caller checks the memory estimate
    /// ([`estimate`]) first.
    pub fn new(graph: &Graph, batch: usize, opts: CpuOptions) -> CpuNet {
        let n = graph.nodes.len();
        // ReLU's backward sums its consumers' gradients on the way.
        let plan = BufferPlan::new(graph, batch, |op| *op == Op::Relu);
        let mut acts: Vec<Vec<f32>> = plan.act_len.iter().map(|&l| vec![0.0; l]).collect();
        acts[0].copy_from_slice(&init::input(graph, batch, opts.seed));
        let grads = plan.grad_len.iter().map(|&l| vec![0.0; l]).collect();
        let labels = init::labels(graph, batch, opts.seed);
        let mut layers: Vec<Option<Box<dyn CpuLayer>>> = (0..n).map(|_| None).collect();
        for (i, layer) in layers.iter_mut().enumerate().skip(1) {
            *layer = Some(make_layer(graph, i, &labels, opts.seed));
        }
        let mut net = CpuNet {
            graph: graph.clone(),
            batch,
            ctx: Ctx {
                isa: opts.isa,
                reference: opts.reference,
                step_seed: opts.seed,
                conv_choice: HashMap::new(),
            },
            layers,
            acts,
            act_of: plan.act_of,
            grads,
            dy_parts: plan.dy_parts,
            dy_sum: plan.dy_sum,
            dx_of: plan.dx_of,
            fused_into: vec![None; n],
            fwd_secs: vec![0.0; n],
            bwd_secs: vec![0.0; n],
            step: 0,
            seed: opts.seed,
        };
        if opts.fuse_relu && !opts.reference {
            net.fuse_relus();
        }
        net
    }

    /// Hands each ReLU that alone reads its producer's output to the
    /// producer's layer, where the layer takes it, and rewires the buffers.
    fn fuse_relus(&mut self) {
        let consumers = self.graph.consumers();
        for r in 1..self.graph.nodes.len() {
            let node = &self.graph.nodes[r];
            if node.op != Op::Relu {
                continue;
            }
            let p = node.inputs[0];
            if p == 0 || consumers[p] != [r] {
                continue;
            }
            // The ReLU's output gradient must be one tensor for the
            // producer's backward to read it in the ReLU's place.
            let one_dy = self.dy_parts[r].len() == 1 && self.dy_sum[r].is_none();
            let layer = self.layers[p].as_mut().expect("a layer per node");
            let fusion = layer.fuse_relu(one_dy);
            if fusion == ReluFusion::None {
                continue;
            }
            // The producer writes the ReLU's output; its own is not needed.
            let relu_out = self.act_of[r];
            let own = std::mem::replace(&mut self.act_of[p], relu_out);
            self.acts[own] = Vec::new();
            if fusion == ReluFusion::ForwardBackward {
                // The producer reads the ReLU's output gradient, and the
                // gradient between the two is never formed. (A producer
                // that passed gradients through would hand that freed
                // buffer on to its inputs.)
                assert!(!passes_gradient(&self.graph.nodes[p].op));
                let between = self.dx_of[r][0]
                    .take()
                    .expect("a gradient for the producer");
                self.grads[between] = Vec::new();
                self.dy_parts[p] = self.dy_parts[r].clone();
                self.dy_sum[p] = None;
            }
            self.fused_into[r] = Some((p, fusion));
        }
    }

    /// The node whose layer runs ReLU node `i`, if it was fused.
    pub fn fused_into(&self, i: usize) -> Option<usize> {
        self.fused_into[i].map(|(p, _)| p)
    }

    /// How many ReLUs run inside the layer before them.
    pub fn fused_relus(&self) -> usize {
        self.fused_into.iter().flatten().count()
    }

    fn skips_forward(&self, i: usize) -> bool {
        self.fused_into[i].is_some()
    }

    fn skips_backward(&self, i: usize) -> bool {
        matches!(self.fused_into[i], Some((_, ReluFusion::ForwardBackward)))
    }

    /// Moves to the next training step: dropout draws new masks.
    pub fn next_step(&mut self) {
        self.step += 1;
    }

    /// The forward pass; returns the loss.
    pub fn forward(&mut self) -> f32 {
        self.ctx.step_seed = self.step.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ self.seed;
        for i in 1..self.graph.nodes.len() {
            let t0 = Instant::now();
            if !self.skips_forward(i) {
                self.forward_node(i);
            }
            self.fwd_secs[i] = t0.elapsed().as_secs_f64();
        }
        self.loss()
    }

    fn forward_node(&mut self, i: usize) {
        if self.graph.nodes[i].op == Op::Flatten {
            return;
        }
        let out_id = self.act_of[i];
        let mut out = std::mem::take(&mut self.acts[out_id]);
        {
            let inputs: Vec<&[f32]> = self.graph.nodes[i]
                .inputs
                .iter()
                .map(|&t| &self.acts[self.act_of[t]][..])
                .collect();
            let layer = self.layers[i].as_mut().expect("every node has a layer");
            layer.forward(&mut self.ctx, &inputs, &mut out);
        }
        self.acts[out_id] = out;
    }

    pub fn loss(&self) -> f32 {
        self.acts[*self.act_of.last().expect("a loss node")][0]
    }

    /// The backward pass: every parameter's gradient.
    pub fn backward(&mut self) {
        for i in (1..self.graph.nodes.len()).rev() {
            let t0 = Instant::now();
            if self.skips_backward(i) {
                // The producer's backward masks the gradient itself.
            } else if passes_gradient(&self.graph.nodes[i].op) {
                // Nothing to compute, but the gradient handed through may
                // be a sum (a residual sum read by two layers).
                self.sum_gradients(i);
            } else {
                self.backward_node(i);
            }
            self.bwd_secs[i] = t0.elapsed().as_secs_f64();
        }
    }

    /// Sums node `i`'s output gradients into their own buffer, where the
    /// plan has one.
    fn sum_gradients(&mut self, i: usize) {
        if let Some(sum) = self.dy_sum[i] {
            let mut dst = std::mem::take(&mut self.grads[sum]);
            let srcs: Vec<&[f32]> = self.dy_parts[i]
                .iter()
                .map(|&p| &self.grads[p][..])
                .collect();
            eltwise::sum(self.ctx.isa, &srcs, &mut dst);
            self.grads[sum] = dst;
        }
    }

    fn backward_node(&mut self, i: usize) {
        self.sum_gradients(i);
        let parts = &self.dy_parts[i];
        // Take the written buffers out so the read ones can be borrowed.
        let dx_ids = self.dx_of[i].clone();
        let mut dx_bufs: Vec<Option<Vec<f32>>> = dx_ids
            .iter()
            .map(|id| id.map(|b| std::mem::take(&mut self.grads[b])))
            .collect();
        {
            let dys: Vec<&[f32]> = match self.dy_sum[i] {
                Some(sum) => vec![&self.grads[sum][..]],
                None => parts.iter().map(|&p| &self.grads[p][..]).collect(),
            };
            let node = &self.graph.nodes[i];
            let inputs: Vec<&[f32]> = node
                .inputs
                .iter()
                .map(|&t| &self.acts[self.act_of[t]][..])
                .collect();
            let out = &self.acts[self.act_of[i]][..];
            let mut dxs: Vec<Option<&mut [f32]>> =
                dx_bufs.iter_mut().map(|b| b.as_deref_mut()).collect();
            let layer = self.layers[i].as_mut().expect("every node has a layer");
            layer.backward(&mut self.ctx, &inputs, out, &dys, &mut dxs);
        }
        for (id, buf) in dx_ids.iter().zip(dx_bufs) {
            if let (Some(id), Some(buf)) = (id, buf) {
                self.grads[*id] = buf;
            }
        }
    }

    /// One SGD step with momentum over every parameter.
    pub fn sgd_update(&mut self, lr: f32, momentum: f32) {
        let isa = self.ctx.isa;
        for p in self.params_mut() {
            eltwise::sgd_update(isa, &mut p.value, &p.grad, &mut p.velocity, lr, momentum);
        }
    }

    /// Every parameter, in graph order (a layer's weight before its bias).
    pub fn params_mut(&mut self) -> Vec<&mut Param> {
        self.layers
            .iter_mut()
            .flatten()
            .flat_map(|l| l.params())
            .collect()
    }

    /// Parameters with their layer names: `conv1.weight`, `bn1.bias`, ...
    pub fn named_params(&mut self) -> Vec<(String, &mut Param)> {
        let names: Vec<String> = self.graph.nodes.iter().map(|n| n.name.clone()).collect();
        let mut out = Vec::new();
        for (i, l) in self.layers.iter_mut().enumerate() {
            if let Some(l) = l {
                for (k, p) in l.params().into_iter().enumerate() {
                    let what = if k == 0 { "weight" } else { "bias" };
                    out.push((format!("{}.{what}", names[i]), p));
                }
            }
        }
        out
    }

    /// The logits (the loss layer's input) of the last forward pass.
    pub fn logits(&self) -> &[f32] {
        let loss = self.graph.nodes.last().expect("a loss node");
        &self.acts[self.act_of[loss.inputs[0]]]
    }

    /// The output of node `i` of the last forward pass (for a layer with a
    /// fused ReLU, the ReLU's output).
    pub fn output(&self, i: usize) -> &[f32] {
        &self.acts[self.act_of[i]]
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
    pub fn forward_from(&mut self, other: &CpuNet) -> Vec<Option<f64>> {
        assert_eq!(self.acts.len(), other.acts.len(), "same network");
        assert!(
            self.fused_into.iter().all(Option::is_none),
            "self runs unfused"
        );
        self.ctx.step_seed = other.ctx.step_seed;
        let mut errs = vec![None; self.graph.nodes.len()];
        #[allow(clippy::needless_range_loop)] // `i` names the node throughout
        for i in 1..self.graph.nodes.len() {
            for &t in &self.graph.nodes[i].inputs {
                let b = self.act_of[t];
                copy_held(&mut self.acts[b], &other.acts[b]);
            }
            self.forward_node(i);
            let b = self.act_of[i];
            errs[i] = held(&other.acts[b]).then(|| rel_l2(&self.acts[b], &other.acts[b]));
        }
        errs
    }

    /// The backward pass with every layer reading `other`'s output
    /// gradients and activations (see [`CpuNet::forward_from`]), after
    /// which each parameter gradient carries its own layer's error only.
    pub fn backward_from(&mut self, other: &CpuNet) {
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
            self.backward_node(i);
        }
    }

    /// Node `i`'s output gradients of the last backward pass, one per
    /// consuming edge, in the [`BufferPlan`]'s order (`check` hands them
    /// to another backend's layer).
    pub fn dy_parts(&self, i: usize) -> Vec<&[f32]> {
        self.dy_parts[i]
            .iter()
            .map(|&p| &self.grads[p][..])
            .collect()
    }

    /// The image batch, to set inputs by hand (tests).
    pub fn input_mut(&mut self) -> &mut [f32] {
        &mut self.acts[0]
    }

    /// The kernels each layer ran (convolutions: algorithm per direction).
    pub fn kernels(&self, i: usize) -> String {
        match self.fused_into[i] {
            Some((p, ReluFusion::Forward)) => {
                format!("forward fused into {}", self.graph.nodes[p].name)
            }
            Some((p, _)) => format!("fused into {}", self.graph.nodes[p].name),
            None => self.layers[i]
                .as_ref()
                .map(|l| l.kernels())
                .unwrap_or_default(),
        }
    }

    pub fn memory(&self) -> Memory {
        let params = self.graph.params() * 3 * 4;
        let activations = (self.acts.iter().map(Vec::len).sum::<usize>()
            + self.grads.iter().map(Vec::len).sum::<usize>())
            * 4;
        let workspace = self
            .layers
            .iter()
            .flatten()
            .map(|l| l.scratch_bytes())
            .sum();
        Memory {
            params,
            activations,
            workspace,
        }
    }
}

/// Whether a network holds a tensor: fusion frees the buffers it makes
/// unnecessary (a batch of at least one image leaves no other empty).
fn held(buf: &[f32]) -> bool {
    !buf.is_empty()
}

/// Copies `theirs` where the other network holds it; else keeps `mine`.
fn copy_held(mine: &mut [f32], theirs: &[f32]) {
    if held(theirs) {
        mine.copy_from_slice(theirs);
    }
}

fn rel_l2(got: &[f32], want: &[f32]) -> f64 {
    cnnbench_kernels::conv::reference::rel_l2_error(got, want)
}

/// Bytes [`CpuNet::new`] will allocate before any convolution plan: the
/// memory check made before allocating.
pub fn estimate(graph: &Graph, batch: usize) -> u128 {
    let consumers = graph.consumers();
    let mut elems: u128 = graph.params() as u128 * 3;
    for (i, node) in graph.nodes.iter().enumerate() {
        let len = batch as u128 * node.out.len() as u128;
        if node.op != Op::Flatten {
            elems += len; // the output
            elems += len * consumers[i].len() as u128; // its gradients
        }
    }
    elems * 4
}

/// The CPU layer of node `i`; `labels` holds one seeded class per image
/// (the batch size).
fn make_layer(graph: &Graph, i: usize, labels: &[u32], seed: u64) -> Box<dyn CpuLayer> {
    let batch = labels.len();
    let node = &graph.nodes[i];
    let x = graph.nodes[node.inputs.first().copied().unwrap_or(0)].out;
    let layer_seed = init::layer_seed(seed, i);
    match node.op {
        Op::Input => unreachable!("the input has no layer"),
        Op::Conv(s) => Box::new(ConvLayer::new(
            graph.conv_shape(i, batch),
            s.bias,
            node.inputs[0] != 0,
            layer_seed,
        )),
        Op::BatchNorm { eps, momentum } => Box::new(BatchNormLayer::new(x.c, eps, momentum)),
        Op::Relu => Box::new(ReluLayer),
        Op::Pool(_) => {
            let (shape, max) = graph.pool_shape(i, batch);
            Box::new(PoolLayer::new(shape, max))
        }
        Op::Lrn(s) => {
            let p = LrnParams {
                size: s.size,
                alpha: s.alpha,
                beta: s.beta,
                k: s.k,
            };
            Box::new(LrnLayer::new(p, x.c, batch * x.len()))
        }
        Op::Linear { out } => Box::new(LinearLayer::new(batch, x.len(), out, layer_seed)),
        Op::Dropout { p } => Box::new(DropoutLayer::new(p, batch * x.len(), i as u64)),
        Op::Concat => {
            let widths = node.inputs.iter().map(|&t| graph.nodes[t].out.c).collect();
            Box::new(ConcatLayer::new(batch * x.h * x.w, widths))
        }
        Op::Add => Box::new(AddLayer::default()),
        Op::Flatten => Box::new(FlattenLayer),
        Op::SoftmaxXent => Box::new(SoftmaxXentLayer::new(x.c, labels.to_vec())),
    }
}
