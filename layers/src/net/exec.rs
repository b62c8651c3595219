//! The one executor: every layer's output and gradient allocated once on a
//! [`Backend`], forward in graph order, backward in reverse, gradients of
//! a tensor read by several layers summed, the SGD update, and per-layer
//! times of the last step on the backend's clock.
//!
//! The buffers follow [`BufferPlan`]. A layer that sums its consumers'
//! gradients itself (the CPU's ReLU) gets all of them; for every other
//! layer the backend sums them into a buffer of their own first.
//!
//! With [`ExecOptions::fuse_relu`], a ReLU that alone reads a layer's
//! output runs inside that layer's passes where the backend's layer takes
//! it (the pass in [`super::fusion`]): the layer writes the ReLU's output buffer,
//! its own output buffer is freed, and the ReLU's node does nothing in the
//! forward pass (nor in the backward pass, for
//! [`ReluFusion::ForwardBackward`]). With [`ExecOptions::fuse_add`], a
//! residual add and its ReLU may run inside the layer before the add
//! too. The per-layer table books the ReLU's time under the layer and says
//! so in the kernels column. The rewiring is in [`fuse`].
//!
//! The next batch's staging is in [`batch`]; what the host reads and sets
//! (outputs, one node's passes for `check`, named parameters) in [`host`].

mod batch;
mod fuse;
mod host;

use super::graph::Graph;
use super::init;
use super::plan::{passes_gradient, BufferPlan};
use crate::core::backend::{Backend, BatchDims, Elem, Layer, ReluFusion};
use crate::core::error::Result;
use crate::ops::spec::MakeLayer;

/// What every backend's network is built with.
#[derive(Clone, Copy, Debug)]
pub struct ExecOptions {
    pub seed: u64,
    /// Time every layer (the CPU always does; on a GPU, `--per-layer`).
    pub per_layer: bool,
    /// Fuse each ReLU into the layer before it where that layer's backend
    /// takes it.
    pub fuse_relu: bool,
    /// With `fuse_relu`, also offer each residual add with its ReLU to
    /// the layer before the add (the CPU's batch norm, the GPU's with
    /// `--fuse-bn`),
    /// and let a layer take the backward of a ReLU that would have summed
    /// its readers' gradients itself (the executor sums them for it).
    pub fuse_add: bool,
}

/// Bytes held, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Memory {
    /// Parameters with their gradients and momentum buffers (and half
    /// copies on a GPU).
    pub params: usize,
    /// Layer outputs (the image included) and their gradients, and the
    /// next batch staged during a real-data step.
    pub activations: usize,
    /// Workspaces, masks, saved statistics.
    pub workspace: usize,
}

impl Memory {
    pub fn total(&self) -> usize {
        self.params + self.activations + self.workspace
    }
}

/// One step's milliseconds per phase, on the backend's clock.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepMs {
    pub forward: f64,
    pub backward: f64,
    /// From the end of the backward pass until the gradient exchange of a
    /// data-parallel step has finished: the communication the backward did
    /// not hide (0 without one).
    pub exchange: f64,
    pub update: f64,
}

/// What a data-parallel step does while the backward pass runs: told
/// after each node's backward was enqueued (that node's parameter
/// gradients are then final on the backend's stream), and asked at the
/// end to make the step wait for what it started, before the update.
pub trait GradientHook {
    fn after_backward(&mut self, node: usize) -> Result<()>;
    fn finish(&mut self) -> Result<()>;
}

pub struct Executor<B: Backend> {
    pub graph: Graph,
    pub batch: usize,
    pub(super) backend: B,
    pub(super) cx: B::Ctx,
    /// One per node; `None` for the input.
    pub(super) layers: Vec<Option<Box<dyn Layer<B>>>>,
    /// `None` where fusion freed the buffer.
    pub(super) acts: Vec<Option<B::Buf>>,
    /// The activation buffer of each node (flatten shares its input's).
    pub(super) act_of: Vec<usize>,
    pub(super) grads: Vec<Option<B::Buf>>,
    /// The gradient buffers of each node's output, one per consuming edge.
    pub(super) dy_parts: Vec<Vec<usize>>,
    /// Where the parts are summed when the layer does not sum them itself.
    pub(super) dy_sum: Vec<Option<usize>>,
    pub(super) sum_plans: Vec<Option<B::SumPlan>>,
    /// The buffer each node's backward writes per input.
    pub(super) dx_of: Vec<Vec<Option<usize>>>,
    /// What the fusion pass decided ([`fuse`]).
    pub(super) fused: fuse::Fused,
    pub(super) per_layer: bool,
    /// Before forward, after forward, after backward, after the gradient
    /// exchange, after the update.
    phase: [B::Event; 5],
    /// One before each node and one after the last, per pass.
    fwd_events: Vec<B::Event>,
    bwd_events: Vec<B::Event>,
    /// Milliseconds of each node in the last step (with `per_layer`).
    pub fwd_ms: Vec<f64>,
    pub bwd_ms: Vec<f64>,
    step: u64,
    seed: u64,
    /// The next batch on its way in ([`Executor::stage_batch`]), made on
    /// first use, with its labels; `staged` while one waits there.
    stage: Option<B::Stage>,
    staged_labels: Vec<u32>,
    staged: bool,
}

impl<B: MakeLayer> Executor<B> {
    /// Makes every node's layer from its op's spec, allocates every
    /// tensor, sets the seeded image ([`init::input`]) and fuses ReLUs
    /// where asked. Algorithms are chosen afterwards
    /// ([`Executor::plan_layers`]).
    pub fn build(
        backend: B,
        cx: B::Ctx,
        graph: &Graph,
        batch: usize,
        opts: ExecOptions,
    ) -> Result<Executor<B>> {
        let n = graph.nodes.len();
        let labels = init::labels(graph, batch, opts.seed);
        let mut layers = Vec::with_capacity(n);
        layers.push(None);
        for i in 1..n {
            let x = graph.input_dims(i);
            let node = graph.node_cx(i, batch, opts.seed, &x, &labels);
            layers.push(backend.make_layer(graph.nodes[i].op.spec(), &node)?);
        }
        let sums = |i: usize| layers[i].as_ref().is_some_and(|l| l.sums_gradients());
        let plan = BufferPlan::new(graph, batch, sums);
        let f32_bufs = [plan.act_of[n - 1], plan.act_of[0]];
        let ids = graph.input_vocab().is_some();
        let mut acts = Vec::with_capacity(plan.act_len.len());
        for (b, &len) in plan.act_len.iter().enumerate() {
            let elem = if b == f32_bufs[0] || (ids && b == f32_bufs[1]) {
                Elem::F32
            } else {
                Elem::Run
            };
            acts.push(Some(backend.alloc(len, elem)?));
        }
        let mut grads = Vec::with_capacity(plan.grad_len.len());
        for &len in &plan.grad_len {
            grads.push(Some(backend.alloc(len, Elem::Run)?));
        }
        let mut sum_plans = Vec::with_capacity(n);
        for i in 0..n {
            sum_plans.push(match plan.dy_sum[i] {
                Some(_) => Some(backend.plan_sum(dims(graph, i, batch))?),
                None => None,
            });
        }
        let events = |k: usize| (0..k).map(|_| backend.event()).collect::<Result<Vec<_>>>();
        let per_layer = if opts.per_layer { n + 1 } else { 0 };
        let mut net = Executor {
            graph: graph.clone(),
            batch,
            phase: [
                backend.event()?,
                backend.event()?,
                backend.event()?,
                backend.event()?,
                backend.event()?,
            ],
            fwd_events: events(per_layer)?,
            bwd_events: events(per_layer)?,
            backend,
            cx,
            layers,
            acts,
            act_of: plan.act_of,
            grads,
            dy_parts: plan.dy_parts,
            dy_sum: plan.dy_sum,
            sum_plans,
            dx_of: plan.dx_of,
            fused: fuse::Fused::new(n),
            per_layer: opts.per_layer,
            fwd_ms: vec![0.0; n],
            bwd_ms: vec![0.0; n],
            step: 0,
            seed: opts.seed,
            stage: None,
            staged_labels: Vec::new(),
            staged: false,
        };
        net.upload_output(0, &init::input(graph, batch, opts.seed))?;
        if opts.fuse_relu {
            net.fuse_relus(opts.fuse_add)?;
        }
        Ok(net)
    }
}

impl<B: Backend> Executor<B> {
    pub fn backend(&self) -> &B {
        &self.backend
    }

    pub fn ctx_mut(&mut self) -> &mut B::Ctx {
        &mut self.cx
    }

    /// Each layer's `plan` on the network's own tensors (the GPU's
    /// algorithm search); the most workspace the choices need.
    pub fn plan_layers(&mut self) -> Result<usize> {
        let mut need = 0;
        for i in 1..self.graph.nodes.len() {
            // A node that hands its gradient through writes its input
            // gradient into its output gradient's buffer: nothing to plan,
            // and taking that buffer would hide its `dy`.
            if passes_gradient(&self.graph.nodes[i].op) {
                continue;
            }
            let Some(layer) = self.layers[i].as_mut() else {
                continue;
            };
            let mut dx_bufs: Vec<Option<B::Buf>> = self.dx_of[i]
                .iter()
                .map(|id| id.and_then(|b| self.grads[b].take()))
                .collect();
            let node = &self.graph.nodes[i];
            let x: Vec<B::In<'_>> = node
                .inputs
                .iter()
                .chain(&self.fused.z[i])
                .filter_map(|&t| self.acts[self.act_of[t]].as_ref().map(B::input))
                .collect();
            let y = B::input(held(&self.acts[self.act_of[i]]));
            let dy_buf = self.dy_sum[i].or_else(|| self.dy_parts[i].first().copied());
            let dy = dy_buf.and_then(|b| self.grads[b].as_ref().map(B::input));
            let r = {
                let mut dx: Vec<Option<B::Out<'_>>> = dx_bufs
                    .iter_mut()
                    .map(|b| b.as_mut().map(B::output))
                    .collect();
                layer.plan(&mut self.cx, &x, y, dy, &mut dx)
            };
            for (id, buf) in self.dx_of[i].iter().zip(dx_bufs) {
                if let (Some(id), Some(buf)) = (id, buf) {
                    self.grads[*id] = Some(buf);
                }
            }
            need = need.max(r?);
        }
        Ok(need)
    }

    /// Moves to the next training step: dropout draws new masks.
    pub fn next_step(&mut self) {
        self.step += 1;
    }

    pub(super) fn step_seed(&self) -> u64 {
        self.step.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ self.seed
    }

    /// The forward pass (enqueued, on a GPU).
    pub fn forward(&mut self) -> Result<()> {
        let seed = self.step_seed();
        B::set_step_seed(&mut self.cx, seed);
        let n = self.graph.nodes.len();
        for i in 1..n {
            if self.per_layer {
                self.backend.record(&mut self.fwd_events[i - 1])?;
            }
            if let Some(b) = self.fused.runs_here[i] {
                // A layer that took the add before this ReLU runs here.
                self.forward_node(b)?;
            } else if !self.skips_forward(i) {
                self.forward_node(i)?;
            }
        }
        if self.per_layer {
            self.backend.record(&mut self.fwd_events[n - 1])?;
        }
        Ok(())
    }

    pub(super) fn forward_node(&mut self, i: usize) -> Result<()> {
        let node = &self.graph.nodes[i];
        if node.op.spec().aliases_input() {
            return Ok(());
        }
        let Some(layer) = self.layers[i].as_mut() else {
            return Ok(());
        };
        let out_id = self.act_of[i];
        let mut out = self.acts[out_id].take().expect("a node's output is held");
        let r = {
            let x: Vec<B::In<'_>> = node
                .inputs
                .iter()
                .chain(&self.fused.z[i])
                .map(|&t| B::input(held(&self.acts[self.act_of[t]])))
                .collect();
            layer.forward(&mut self.cx, &x, B::output(&mut out))
        };
        self.acts[out_id] = Some(out);
        r
    }

    /// The backward pass (enqueued, on a GPU): every parameter's gradient.
    pub fn backward(&mut self) -> Result<()> {
        self.backward_hooked(&mut None)
    }

    /// The backward pass, telling `hook` after each node.
    fn backward_hooked(&mut self, hook: &mut Option<&mut dyn GradientHook>) -> Result<()> {
        // The step's seed again: a dropout layer's backward may regenerate
        // the forward's mask from it.
        let seed = self.step_seed();
        B::set_step_seed(&mut self.cx, seed);
        let n = self.graph.nodes.len();
        for i in (1..n).rev() {
            if self.per_layer {
                self.backend.record(&mut self.bwd_events[n - 1 - i])?;
            }
            if let Some(b) = self.fused.runs_here[i] {
                self.backward_node(b)?;
            } else if self.skips_backward(i) {
                // The producer's backward masks the gradient itself.
            } else if passes_gradient(&self.graph.nodes[i].op) {
                // Nothing to compute, but the gradient handed through may
                // be a sum (a residual sum read by two layers).
                self.sum_gradients(i)?;
            } else {
                self.backward_node(i)?;
            }
            if let Some(h) = hook.as_mut() {
                h.after_backward(i)?;
            }
        }
        if self.per_layer {
            self.backend.record(&mut self.bwd_events[n - 1])?;
        }
        Ok(())
    }

    /// Sums node `i`'s output gradients into their own buffer, where the
    /// plan has one.
    fn sum_gradients(&mut self, i: usize) -> Result<()> {
        let (Some(sum), Some(plan)) = (self.dy_sum[i], &self.sum_plans[i]) else {
            return Ok(());
        };
        let mut dst = self.grads[sum].take().expect("the sum's buffer is held");
        let r = {
            let parts: Vec<B::In<'_>> = self.dy_parts[i]
                .iter()
                .map(|&p| B::input(held(&self.grads[p])))
                .collect();
            self.backend
                .sum(&mut self.cx, plan, &parts, B::output(&mut dst))
        };
        self.grads[sum] = Some(dst);
        r
    }

    pub(super) fn backward_node(&mut self, i: usize) -> Result<()> {
        self.sum_gradients(i)?;
        let Some(layer) = self.layers[i].as_mut() else {
            return Ok(());
        };
        // Take the written buffers out so the read ones can be borrowed.
        let mut dx_bufs: Vec<Option<B::Buf>> = self.dx_of[i]
            .iter()
            .map(|id| id.and_then(|b| self.grads[b].take()))
            .collect();
        let r = {
            let grads = &self.grads;
            let dy: Vec<B::In<'_>> = match self.dy_sum[i] {
                Some(sum) => vec![B::input(held(&grads[sum]))],
                None => self.dy_parts[i]
                    .iter()
                    .map(|&p| B::input(held(&grads[p])))
                    .collect(),
            };
            let node = &self.graph.nodes[i];
            let x: Vec<B::In<'_>> = node
                .inputs
                .iter()
                .chain(&self.fused.z[i])
                .map(|&t| B::input(held(&self.acts[self.act_of[t]])))
                .collect();
            let y = B::input(held(&self.acts[self.act_of[i]]));
            let mut dx: Vec<Option<B::Out<'_>>> = dx_bufs
                .iter_mut()
                .map(|b| b.as_mut().map(B::output))
                .collect();
            layer.backward(&mut self.cx, &x, y, &dy, &mut dx)
        };
        for (id, buf) in self.dx_of[i].iter().zip(dx_bufs) {
            if let (Some(id), Some(buf)) = (id, buf) {
                self.grads[*id] = Some(buf);
            }
        }
        r
    }

    /// One SGD step with momentum over every parameter.
    pub fn sgd_update(&mut self, lr: f32, momentum: f32) -> Result<()> {
        for l in self.layers.iter_mut().flatten() {
            for p in l.params() {
                self.backend.sgd(&mut self.cx, p, lr, momentum)?;
            }
        }
        Ok(())
    }

    /// One training step (the next dropout masks), timed per phase on the
    /// backend's clock; waits for the device. With `per_layer`, also fills
    /// `fwd_ms` and `bwd_ms`.
    pub fn step(&mut self, update: Option<(f32, f32)>) -> Result<StepMs> {
        self.step_hooked(update, None)
    }

    /// [`Executor::step`] with a gradient exchange: `hook` hears of each
    /// node's backward, and the update waits for what it started.
    pub fn step_hooked(
        &mut self,
        update: Option<(f32, f32)>,
        mut hook: Option<&mut dyn GradientHook>,
    ) -> Result<StepMs> {
        self.next_step();
        self.backend.record(&mut self.phase[0])?;
        self.forward()?;
        self.backend.record(&mut self.phase[1])?;
        self.backward_hooked(&mut hook)?;
        self.backend.record(&mut self.phase[2])?;
        if let Some(h) = hook {
            h.finish()?;
        }
        self.backend.record(&mut self.phase[3])?;
        if let Some((lr, m)) = update {
            self.sgd_update(lr, m)?;
        }
        self.backend.record(&mut self.phase[4])?;
        self.backend.wait(&self.phase[4])?;
        let b = &self.backend;
        if self.per_layer {
            let n = self.graph.nodes.len();
            for i in 1..n {
                self.fwd_ms[i] = b.elapsed_ms(&self.fwd_events[i - 1], &self.fwd_events[i])?;
                self.bwd_ms[i] =
                    b.elapsed_ms(&self.bwd_events[n - 1 - i], &self.bwd_events[n - i])?;
            }
            self.book_moved_times();
        }
        let b = &self.backend;
        Ok(StepMs {
            forward: b.elapsed_ms(&self.phase[0], &self.phase[1])?,
            backward: b.elapsed_ms(&self.phase[1], &self.phase[2])?,
            exchange: b.elapsed_ms(&self.phase[2], &self.phase[3])?,
            update: b.elapsed_ms(&self.phase[3], &self.phase[4])?,
        })
    }

    /// The kernels each layer ran (convolutions: algorithm per direction).
    pub fn kernels(&self, i: usize) -> String {
        match self.fused.into[i] {
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
        let layers = || self.layers.iter().flatten();
        let params = layers()
            .flat_map(|l| l.params_ref())
            .map(B::param_bytes)
            .sum();
        let activations = self
            .acts
            .iter()
            .chain(&self.grads)
            .flatten()
            .map(B::buf_bytes)
            .sum::<usize>()
            + self.stage.as_ref().map_or(0, B::stage_bytes);
        let workspace = B::ctx_bytes(&self.cx) + layers().map(|l| l.scratch_bytes()).sum::<usize>();
        Memory {
            params,
            activations,
            workspace,
        }
    }
}

/// A buffer the plan holds (fusion frees only buffers nobody reads).
pub(super) fn held<T>(b: &Option<T>) -> &T {
    b.as_ref().expect("a buffer the network reads is held")
}

/// Node `i`'s output tensor, the whole batch.
fn dims(graph: &Graph, i: usize, batch: usize) -> BatchDims {
    let d = graph.nodes[i].out;
    BatchDims {
        n: batch,
        h: d.h,
        w: d.w,
        c: d.c,
    }
}
