//! The executor's side of fusion: runs the pass ([`relu_fusions`]) against
//! the backend's layers and rewires buffers and passes to what they took.
//!
//! - A ReLU fused into its producer `p`: `p` writes the ReLU's output
//!   buffer, its own output buffer is freed, and the ReLU does nothing in
//!   the forward pass (nor in the backward pass for
//!   [`ReluFusion::ForwardBackward`]: `p` reads the ReLU's output gradient
//!   and the gradient between the two is never formed).
//! - A residual add and its ReLU fused into the layer `b` before the add
//!   ([`crate::core::backend::Layer::fuse_add_relu`]): `b` runs at the
//!   ReLU's place in both passes (the add's other input `z` may come after
//!   `b` in graph order, and so may the layers that read the add's
//!   gradient), reads `z` as a second input, writes the ReLU's output, and
//!   in the backward pass writes the add's output gradient, the buffer
//!   the add hands on to `z`, as its second input gradient. The outputs
//!   of `b` and of the add are freed.
//!
//! A ReLU's output gradient that the executor sums from several parts is
//! summed before the fused layer's backward, into the same buffer. One
//! that the ReLU's own layer would have summed on the way (the CPU's, and
//! the GPU's own kernel) is, with `with_add`, summed by the executor into
//! a buffer of its own for the fused layer: one gradient buffer more,
//! against the activation (and gradient) buffers the fusion frees.

use super::{dims, Executor};
use crate::core::backend::{Backend, Elem, ReluFusion};
use crate::core::error::Result;
use crate::net::fusion::relu_fusions;
use crate::net::plan::passes_gradient;

/// What the fusion pass decided, per node.
#[derive(Clone, Debug, Default)]
pub(in crate::net) struct Fused {
    /// Per ReLU (and fused add) node: the node whose layer runs it, and
    /// how much of it.
    pub into: Vec<Option<(usize, ReluFusion)>>,
    /// Per node whose layer took a ReLU: that ReLU.
    pub relu_of: Vec<Option<usize>>,
    /// Per ReLU node: the layer that runs in its place, having taken the
    /// add before it too.
    pub runs_here: Vec<Option<usize>>,
    /// Per node: it runs at its ReLU's place, not its own.
    pub moved: Vec<bool>,
    /// Per node: the second input it reads (the fused add's other input).
    pub z: Vec<Option<usize>>,
}

impl Fused {
    pub fn new(n: usize) -> Fused {
        Fused {
            into: vec![None; n],
            relu_of: vec![None; n],
            runs_here: vec![None; n],
            moved: vec![false; n],
            z: vec![None; n],
        }
    }
}

impl<B: Backend> Executor<B> {
    /// Runs the fusion pass against this backend's layers (the add with
    /// its ReLU offered, and a ReLU's gradient summed for the layer that
    /// takes it, only with `with_add`) and rewires the buffers to what
    /// they took.
    pub(super) fn fuse_relus(&mut self, with_add: bool) -> Result<()> {
        let (dy_parts, dy_sum) = (&self.dy_parts, &self.dy_sum);
        let one_gradient = |r: usize| {
            let parts = dy_parts[r].len();
            parts == 1 || dy_sum[r].is_some() || (with_add && parts > 1)
        };
        let layers = std::cell::RefCell::new(&mut self.layers);
        let offer = |p: usize, backward: bool| match layers.borrow_mut()[p].as_mut() {
            Some(layer) => layer.fuse_relu(backward),
            None => ReluFusion::None,
        };
        let offer_add = |b: usize| {
            with_add
                && layers.borrow_mut()[b]
                    .as_mut()
                    .is_some_and(|l| l.fuse_add_relu())
        };
        let decisions = relu_fusions(&self.graph, one_gradient, offer, offer_add);
        for f in decisions {
            let (r, p) = (f.relu, f.into);
            // The producer writes the ReLU's output; its own (and the
            // add's) is not needed.
            let relu_out = self.act_of[r];
            let own = std::mem::replace(&mut self.act_of[p], relu_out);
            self.acts[own] = None;
            if f.how == ReluFusion::ForwardBackward {
                // The producer reads the ReLU's output gradient (summed
                // first where it has several parts). (A producer that
                // passed gradients through would hand a freed buffer on to
                // its inputs.)
                assert!(!passes_gradient(&self.graph.nodes[p].op));
                let between = self.dx_of[r][0].take();
                match f.add {
                    // The gradient between the add and the ReLU is the
                    // add's output gradient: the fused layer writes it.
                    Some(_) => self.dx_of[p].push(between),
                    None => {
                        if let Some(b) = between {
                            self.grads[b] = None;
                        }
                    }
                }
                self.dy_parts[p] = self.dy_parts[r].clone();
                self.dy_sum[p] = self.dy_sum[r].take();
                self.sum_plans[p] = self.sum_plans[r].take();
                let parts = self.dy_parts[p].len();
                let reads_parts = parts > 1
                    && self.layers[p]
                        .as_mut()
                        .is_some_and(|l| l.takes_gradient_parts(parts));
                if reads_parts {
                    // The layer reads the parts itself: no sum, and its
                    // buffer goes.
                    if let Some(sum) = self.dy_sum[p].take() {
                        self.grads[sum] = None;
                    }
                    self.sum_plans[p] = None;
                } else if self.dy_sum[p].is_none() && parts > 1 {
                    // The ReLU's layer would have summed them on the way.
                    let d = dims(&self.graph, r, self.batch);
                    self.grads
                        .push(Some(self.backend.alloc(d.len(), Elem::Run)?));
                    self.dy_sum[p] = Some(self.grads.len() - 1);
                    self.sum_plans[p] = Some(self.backend.plan_sum(d)?);
                }
            }
            if let Some(add) = f.add {
                let a = add.node;
                let add_out = std::mem::replace(&mut self.act_of[a], relu_out);
                self.acts[add_out] = None;
                self.fused.into[a] = Some((p, f.how));
                self.fused.runs_here[r] = Some(p);
                self.fused.moved[p] = true;
                self.fused.z[p] = Some(add.z);
            }
            self.fused.into[r] = Some((p, f.how));
            self.fused.relu_of[p] = Some(r);
        }
        Ok(())
    }

    /// The node whose layer runs ReLU node `i` (or residual add `i`), if
    /// it was fused.
    pub fn fused_into(&self, i: usize) -> Option<usize> {
        self.fused.into[i].map(|(p, _)| p)
    }

    /// How many ReLUs run inside the layer before them.
    pub fn fused_relus(&self) -> usize {
        self.fused.relu_of.iter().flatten().count()
    }

    /// How many residual adds run inside the layer before them, with
    /// their ReLUs.
    pub fn fused_adds(&self) -> usize {
        self.fused.runs_here.iter().flatten().count()
    }

    /// What was fused, for records: `relu` (ReLUs inside the layer before
    /// them), `add+relu` (residual adds with their ReLUs), comma-separated;
    /// `None` when nothing was.
    pub fn fused_names(&self) -> Option<String> {
        let adds = self.fused_adds();
        let mut names = Vec::new();
        if self.fused_relus() > adds {
            names.push("relu");
        }
        if adds > 0 {
            names.push("add+relu");
        }
        (!names.is_empty()).then(|| names.join(","))
    }

    pub(super) fn skips_forward(&self, i: usize) -> bool {
        self.fused.into[i].is_some() || self.fused.moved[i]
    }

    pub(super) fn skips_backward(&self, i: usize) -> bool {
        self.backward_taken(i) || self.fused.moved[i]
    }

    /// Whether another layer runs node `i`'s backward (a ReLU or an add
    /// fused forward and backward).
    pub fn backward_taken(&self, i: usize) -> bool {
        matches!(self.fused.into[i], Some((_, ReluFusion::ForwardBackward)))
    }

    /// The node whose layer computes node `i`'s output in the forward
    /// pass: `i` itself, or the layer that took ReLU `i`; `None` where
    /// that output is not formed (a fused layer's own, a fused add's).
    pub fn forward_runner(&self, i: usize) -> Option<usize> {
        if self.fused.relu_of[i].is_some() {
            return None;
        }
        match self.fused.into[i] {
            Some((p, _)) if matches!(self.graph.nodes[i].op, crate::net::graph::Op::Relu(_)) => {
                Some(p)
            }
            Some(_) => None,
            None => Some(i),
        }
    }

    /// The nodes layer `i` reads: its inputs, then a fused add's other
    /// input.
    pub fn layer_inputs(&self, i: usize) -> Vec<usize> {
        let mut t = self.graph.nodes[i].inputs.clone();
        t.extend(self.fused.z[i]);
        t
    }

    /// The node whose output gradient layer `i`'s backward reads: the ReLU
    /// whose backward it took, else `i`.
    pub fn reads_gradient_of(&self, i: usize) -> usize {
        match self.fused.relu_of[i] {
            Some(r) if self.backward_taken(r) => r,
            _ => i,
        }
    }

    /// Node `i`'s name, or for a fused ReLU the names of everything its
    /// layer runs (`bn1+relu1`, `bn3+add+relu3`), as `check` names rows.
    pub fn fused_name(&self, i: usize) -> String {
        let g = &self.graph;
        match self.fused.into[i] {
            Some((p, _)) if self.fused.runs_here[i] == Some(p) => {
                let a = g.nodes[i].inputs[0];
                format!(
                    "{}+{}+{}",
                    g.nodes[p].name, g.nodes[a].name, g.nodes[i].name
                )
            }
            Some((p, _)) => format!("{}+{}", g.nodes[p].name, g.nodes[i].name),
            None => g.nodes[i].name.clone(),
        }
    }

    /// Books the time a moved layer took at its ReLU's place under the
    /// layer itself.
    pub(super) fn book_moved_times(&mut self) {
        for (r, b) in self.fused.runs_here.iter().enumerate() {
            if let Some(b) = *b {
                self.fwd_ms[b] = std::mem::take(&mut self.fwd_ms[r]);
                self.bwd_ms[b] = std::mem::take(&mut self.bwd_ms[r]);
            }
        }
    }
}
