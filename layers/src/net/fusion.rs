//! ReLU fusion as a pass over the graph: which ReLUs run inside the layer
//! before them, in that layer's own passes over memory.
//!
//! The pass finds each ReLU that alone reads its producer's output and
//! offers it to the producer's layer on the backend at hand
//! ([`crate::core::backend::Layer::fuse_relu`]), which says how much of it
//! it takes. Today the CPU's batch norm and residual add take it; no CUDA
//! layer does yet, and one that does needs no change here. The executor
//! then rewires its buffers to the decisions.

use super::graph::{Graph, Op};
use crate::core::backend::ReluFusion;

/// ReLU node `relu` runs inside node `into`'s layer, `how` much of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReluFused {
    pub relu: usize,
    pub into: usize,
    pub how: ReluFusion,
}

/// The ReLUs of `graph` their producers take. `one_gradient(r)`: whether
/// ReLU `r`'s output gradient is one tensor (the producer's backward can
/// then read it in the ReLU's place); `offer(p, backward)` asks producer
/// `p`'s layer, which may take the backward only when `backward` is true.
pub fn relu_fusions(
    graph: &Graph,
    one_gradient: impl Fn(usize) -> bool,
    mut offer: impl FnMut(usize, bool) -> ReluFusion,
) -> Vec<ReluFused> {
    let consumers = graph.consumers();
    let mut fused = Vec::new();
    for (r, node) in graph.nodes.iter().enumerate().skip(1) {
        if !matches!(node.op, Op::Relu(_)) {
            continue;
        }
        let p = node.inputs[0];
        if p == 0 || consumers[p] != [r] {
            continue;
        }
        let how = offer(p, one_gradient(r));
        if how != ReluFusion::None {
            fused.push(ReluFused {
                relu: r,
                into: p,
                how,
            });
        }
    }
    fused
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::graph::{Builder, ConvSpec, Dims};

    #[test]
    fn only_a_relu_that_alone_reads_its_producer_is_offered() {
        let (mut b, x) = Builder::new("t", Dims::new(4, 4, 3));
        let c = b.conv("conv", x, ConvSpec::square(4, 3, 1, 1));
        let n = b.bn("bn", c);
        let r1 = b.relu("relu1", n); // alone reads bn: offered
        let r2 = b.relu("relu2", r1); // its producer is a ReLU the pass offers
        let s = b.add("add", r1, r2); // r1 is read twice: relu2 is offered, relu1's output has two readers
        let r3 = b.relu("relu3", s);
        let p = b.global_avg_pool("pool", r3);
        let f = b.flatten("flat", p);
        let l = b.linear("fc", f, 2);
        let g = b.finish(l);
        let mut offered = Vec::new();
        let fused = relu_fusions(
            &g,
            |_| true,
            |p, _| {
                offered.push(g.nodes[p].name.clone());
                ReluFusion::Forward
            },
        );
        // relu1's producer (bn) has one reader; relu2's producer (relu1)
        // has two (relu2 and the add), so relu2 is not offered.
        assert_eq!(offered, ["bn", "add"]);
        assert_eq!(fused.len(), 2);
        assert!(fused.iter().all(|f| f.how == ReluFusion::Forward));
        let none = relu_fusions(&g, |_| true, |_, _| ReluFusion::None);
        assert!(none.is_empty());
    }
}
