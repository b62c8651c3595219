//! What the host reads from and sets on a network: the loss, a node's
//! output, one node's forward or backward alone (`check` compares each
//! layer with the CPU's that way), and the parameters by name.

use super::{dims, held, Executor};
use crate::core::backend::{Backend, BatchDims, Elem};
use crate::core::error::Result;
use crate::net::graph::Graph;
use crate::net::plan::passes_gradient;

impl<B: Backend> Executor<B> {
    /// The loss of the last forward pass (waits for the device).
    pub fn loss(&self) -> Result<f32> {
        let last = self.graph.nodes.len() - 1;
        let buf = held(&self.acts[self.act_of[last]]);
        let d = dims(&self.graph, last, self.batch);
        Ok(self.backend.download(buf, d, Elem::F32)?[0])
    }

    /// The dims of the tensor node `i`'s buffer holds: the buffer of a
    /// node that aliases its input (a flatten) is its input's, laid out as
    /// that input, so host values convert with the input's dims.
    pub(super) fn buffer_dims(&self, mut i: usize) -> BatchDims {
        while self.graph.nodes[i].op.spec().aliases_input() {
            i = self.graph.nodes[i].inputs[0];
        }
        dims(&self.graph, i, self.batch)
    }

    /// The loss, and token ids, are f32 in every precision.
    pub(super) fn elem(&self, i: usize) -> Elem {
        let ids = i == 0 && self.graph.input_vocab().is_some();
        if i == self.graph.nodes.len() - 1 || ids {
            Elem::F32
        } else {
            Elem::Run
        }
    }

    /// Node `i`'s output as NHWC f32 (waits for the device).
    pub fn output_host(&self, i: usize) -> Result<Vec<f32>> {
        let buf = held(&self.acts[self.act_of[i]]);
        self.backend
            .download(buf, self.buffer_dims(i), self.elem(i))
    }

    /// Sets node `i`'s output from NHWC f32 values (`check` feeds each
    /// layer the reference's inputs).
    pub fn upload_output(&mut self, i: usize, host: &[f32]) -> Result<()> {
        let (d, e) = (self.buffer_dims(i), self.elem(i));
        let buf = self.acts[self.act_of[i]]
            .as_mut()
            .expect("a node's output is held");
        self.backend.upload(buf, host, d, e)
    }

    /// Node `i`'s forward alone, after its inputs were set.
    pub fn forward_one(&mut self, i: usize) -> Result<()> {
        let seed = self.step_seed();
        B::set_step_seed(&mut self.cx, seed);
        self.forward_node(i)
    }

    /// Node `i`'s backward alone, reading `dy_parts` (NHWC f32, one per
    /// consuming edge, in the plan's order) times `scale` as its output
    /// gradients. The layer is linear in them, so its gradients come out
    /// scaled by `scale` too: `check` scales half-precision runs so that
    /// small gradients do not underflow, as mixed-precision training's
    /// loss scaling does.
    pub fn backward_one(&mut self, i: usize, dy_parts: &[&[f32]], scale: f32) -> Result<()> {
        if passes_gradient(&self.graph.nodes[i].op) {
            return Ok(());
        }
        let d = self.buffer_dims(i);
        for (&b, host) in self.dy_parts[i].clone().iter().zip(dy_parts) {
            let scaled: Vec<f32> = host.iter().map(|v| v * scale).collect();
            let buf = self.grads[b].as_mut().expect("a gradient part is held");
            self.backend.upload(buf, &scaled, d, Elem::Run)?;
        }
        self.backward_node(i)
    }

    /// Every parameter with its name (`conv1.weight`, `bn1.bias`), in
    /// graph order.
    pub fn named_params(&mut self) -> Vec<(String, &mut B::Param)> {
        let mut out = Vec::new();
        for (i, l) in self.layers.iter_mut().enumerate() {
            if let Some(l) = l {
                for (k, p) in l.params().into_iter().enumerate() {
                    out.push((param_name(&self.graph, i, k), p));
                }
            }
        }
        out
    }

    /// Node `i`'s parameters, weight then bias.
    pub fn node_params(&self, i: usize) -> Vec<&B::Param> {
        self.layers[i]
            .as_ref()
            .map_or_else(Vec::new, |l| l.params_ref())
    }

    /// Node `i`'s parameter gradients with their names, f32 in the CPU
    /// layers' order (waits for the device).
    pub fn layer_grads(&self, i: usize) -> Result<Vec<(String, Vec<f32>)>> {
        let mut out = Vec::new();
        if let Some(l) = &self.layers[i] {
            for (k, p) in l.params_ref().into_iter().enumerate() {
                out.push((param_name(&self.graph, i, k), self.backend.param_grad(p)?));
            }
        }
        Ok(out)
    }
}

/// `conv1.weight`, `conv1.bias`, `lstm.weight_ih_l0`: parameter `k` of
/// node `i`.
fn param_name(graph: &Graph, i: usize, k: usize) -> String {
    let node = &graph.nodes[i];
    format!("{}.{}", node.name, node.op.spec().param_name(k))
}
