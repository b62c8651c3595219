//! Which buffers a network's forward and backward passes need, worked out
//! once from the graph and shared by both executors.
//!
//! Gradients flow along edges. Each (consumer, input) edge owns a gradient
//! buffer, except where the consumer passes its output gradient through
//! unchanged (residual add, flatten): there the edge shares the consumer's
//! buffer, so nothing is copied. A tensor read by several layers gets the
//! sum of their gradients, either on the way (a backend's layer that sums
//! them itself) or in one pass into a buffer of its own first.

use super::graph::{Graph, Op};

pub struct BufferPlan {
    /// Elements of each activation buffer (the whole batch).
    pub act_len: Vec<usize>,
    /// The activation buffer of each node (one that aliases its input, a
    /// flatten, shares its input's).
    pub act_of: Vec<usize>,
    /// Elements of each gradient buffer.
    pub grad_len: Vec<usize>,
    /// The gradient buffers of each node's output, one per consuming edge.
    pub dy_parts: Vec<Vec<usize>>,
    /// Where the parts are summed when the layer does not sum them itself.
    pub dy_sum: Vec<Option<usize>>,
    /// The buffer each node's backward writes per input (`None`: no
    /// gradient needed, as for the image, or passed through).
    pub dx_of: Vec<Vec<Option<usize>>>,
}

/// Nodes whose backward hands the output gradient to the inputs as is
/// ([`crate::ops::spec::OpSpec::passes_gradient`]).
pub fn passes_gradient(op: &Op) -> bool {
    op.spec().passes_gradient()
}

impl BufferPlan {
    /// `sums_gradients(i)`: whether the backend's layer for node `i` sums
    /// several output gradients itself.
    pub fn new(graph: &Graph, batch: usize, sums_gradients: impl Fn(usize) -> bool) -> BufferPlan {
        let n = graph.nodes.len();
        let len = |i: usize| batch * graph.nodes[i].out.len();
        let mut act_len = Vec::new();
        let mut act_of = Vec::with_capacity(n);
        for (i, node) in graph.nodes.iter().enumerate() {
            if node.op.spec().aliases_input() {
                act_of.push(act_of[node.inputs[0]]);
            } else {
                act_len.push(len(i));
                act_of.push(act_len.len() - 1);
            }
        }
        // From the loss back: a node's consumers are planned before it.
        let consumers = graph.consumers();
        let mut grad_len = Vec::new();
        let mut dy_parts = vec![Vec::new(); n];
        let mut dy_sum = vec![None; n];
        let mut dx_of: Vec<Vec<Option<usize>>> = graph
            .nodes
            .iter()
            .map(|nd| vec![None; nd.inputs.len()])
            .collect();
        for i in (1..n).rev() {
            let node = &graph.nodes[i];
            let mut parts = Vec::new();
            for &k in &consumers[i] {
                for (s, &t) in graph.nodes[k].inputs.iter().enumerate() {
                    if t == i {
                        parts.extend(dx_of[k][s]);
                    }
                }
            }
            if parts.len() > 1 && !sums_gradients(i) {
                grad_len.push(len(i));
                dy_sum[i] = Some(grad_len.len() - 1);
            }
            let through = if parts.len() == 1 {
                Some(parts[0])
            } else {
                dy_sum[i]
            };
            for (s, &t) in node.inputs.iter().enumerate() {
                if t == 0 {
                    continue;
                }
                dx_of[i][s] = if passes_gradient(&node.op) {
                    through
                } else {
                    grad_len.push(len(t));
                    Some(grad_len.len() - 1)
                };
            }
            dy_parts[i] = parts;
        }
        BufferPlan {
            act_len,
            act_of,
            grad_len,
            dy_parts,
            dy_sum,
            dx_of,
        }
    }

    /// The gradient buffer node `i`'s backward reads: the sum, or the only
    /// part (`None` for a node nothing reads, like the loss).
    pub fn dy_of(&self, i: usize) -> Option<usize> {
        self.dy_sum[i].or_else(|| self.dy_parts[i].first().copied())
    }
}
