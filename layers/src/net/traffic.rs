//! Each node's least memory traffic and FLOPs in its graph, for the
//! per-layer roofline: its op's own count ([`OpSpec::traffic`]: every
//! tensor the pass must touch, once, caches ignored), plus what the graph
//! adds (an output gradient that arrives in parts) and takes away (a pass
//! that runs inside another layer's).
//!
//! [`OpSpec::traffic`]: crate::ops::spec::OpSpec::traffic

use super::exec::Executor;
use super::graph::{Graph, Op};
use crate::core::backend::Backend;
use crate::ops::spec::{Elements, Traffic};

/// What the executor's fusion pass decided, as far as the per-layer rows
/// need it.
pub trait FusionView {
    /// The node whose layer runs node `i` (a ReLU, or a residual add with
    /// its ReLU), if it was fused.
    fn fused_into(&self, i: usize) -> Option<usize>;
    /// Whether that layer also runs node `i`'s backward.
    fn backward_taken(&self, i: usize) -> bool;
}

impl<B: Backend> FusionView for Executor<B> {
    fn fused_into(&self, i: usize) -> Option<usize> {
        Executor::fused_into(self, i)
    }
    fn backward_taken(&self, i: usize) -> bool {
        Executor::backward_taken(self, i)
    }
}

/// Every layer ran on its own (`--no-fuse`, or a record without fusion).
pub struct NoFusion;

impl FusionView for NoFusion {
    fn fused_into(&self, _i: usize) -> Option<usize> {
        None
    }
    fn backward_taken(&self, _i: usize) -> bool {
        false
    }
}

/// The least traffic in elements booked on each node's row of the
/// per-layer table, where the executor times that node (node 0, the image,
/// moves nothing).
///
/// - Where a node's output has `k > 1` readers, its gradient arrives in
///   `k` parts: a layer that computes a backward reads the `k - 1` further
///   parts too; one that hands the gradient through to its inputs (a
///   residual add) must write the sum for them: `k` parts read and the sum
///   written.
/// - A pass that runs inside another layer's (a fused ReLU, a fused add)
///   moves nothing of its own: the host writes the ReLU's output instead
///   of its own and masks the gradient from values it reads anyway; where
///   the fused ReLU's output has several readers, the host's backward
///   reads their gradient parts.
/// - A layer that took a residual add and its ReLU runs at the ReLU's
///   place, and the executor books its time on its own row
///   (`Executor::book_moved_times`): its count stays there, plus the add's
///   other input read forward and, with the backward fused, the gradient
///   it writes for that input. (The first GPU run of `--fuse-bn` showed
///   these rows without GB/s: the count was on the ReLU's row and the time
///   on the layer's.)
pub fn row_traffic(g: &Graph, fused: &dyn FusionView) -> Vec<Traffic> {
    let readers = g.consumers();
    let n = g.nodes.len();
    // The gradient parts beyond the first that node `i`'s backward reads.
    let extra_parts = |i: usize| {
        let k = readers[i].len();
        match k > 1 && !g.nodes[i].op.spec().passes_gradient() {
            true => ((k - 1) * g.nodes[i].out.len()) as u64,
            false => 0,
        }
    };
    let mut rows: Vec<Traffic> = (0..n)
        .map(|i| {
            if i == 0 {
                return Traffic::default();
            }
            let node = &g.nodes[i];
            let spec = node.op.spec();
            let input_grad = node.inputs.first().is_some_and(|&t| t != 0);
            let mut t = spec.traffic(&g.input_dims(i), node.out, input_grad);
            let k = readers[i].len();
            if k > 1 {
                let parts = if spec.passes_gradient() { k + 1 } else { k - 1 };
                t.backward.per_image += (parts * node.out.len()) as u64;
            }
            if fused.fused_into(i).is_some() {
                t.forward = Elements::default();
                if fused.backward_taken(i) {
                    t.backward = Elements::default();
                }
            }
            t
        })
        .collect();
    for a in 1..n {
        let Some(b) = fused.fused_into(a) else {
            continue;
        };
        if !matches!(g.nodes[a].op, Op::Add(_)) {
            continue;
        }
        // `b` took add `a` and its ReLU: the shortcut read forward; its
        // gradient written backward, and the block output read for the
        // ReLU's mask (the input alone no longer gives its sign).
        if !(a + 1..n)
            .any(|r| fused.fused_into(r) == Some(b) && matches!(g.nodes[r].op, Op::Relu(_)))
        {
            continue;
        }
        let y = g.nodes[a].out.len() as u64;
        rows[b].forward.per_image += y;
        if fused.backward_taken(a) {
            rows[b].backward.per_image += 2 * y;
        }
    }
    // A fused ReLU whose output several layers read: its host's backward
    // reads every part of that gradient.
    for i in 1..n {
        if let (Some(p), true) = (fused.fused_into(i), fused.backward_taken(i)) {
            if matches!(g.nodes[i].op, Op::Relu(_)) {
                rows[p].backward.per_image += extra_parts(i);
            }
        }
    }
    rows
}

/// FLOPs of node `i`'s forward and backward passes for one image, where
/// its op counts multiply-accumulates (convolutions, fully connected and
/// recurrent layers; 0 for the rest): forward 2·MACs; backward 2·MACs for
/// the weights' gradient and 2·MACs for the input's, except where the
/// input is the image. The same count as the step's GFLOP/s.
pub fn node_flops(g: &Graph, i: usize) -> (u64, u64) {
    let m = g.node_macs(i);
    let data = if g.nodes[i].inputs.first() == Some(&0) {
        0
    } else {
        2 * m
    };
    (2 * m, 2 * m + data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::shape::Dims;
    use crate::ops::spec::OpSpec;
    use crate::zoo;

    fn node(g: &Graph, name: &str) -> usize {
        g.nodes
            .iter()
            .position(|n| n.name == name)
            .unwrap_or_else(|| panic!("no node {name}"))
    }

    /// Bytes of node `name` at batch 32 in f16 (2 bytes), forward and
    /// backward, nothing fused.
    fn bytes(g: &Graph, name: &str) -> (u64, u64) {
        let t = row_traffic(g, &NoFusion)[node(g, name)];
        (t.forward.bytes(32, 2), t.backward.bytes(32, 2))
    }

    const MB: u64 = 32 * 2; // batch 32, f16

    #[test]
    fn resnet50_layers_move_what_was_counted_by_hand() {
        let g = zoo::build("resnet50").expect("resnet50 is in the zoo");
        let (x112, x56, x56_256) = (64 * 112 * 112, 64 * 56 * 56, 256 * 56 * 56);

        // conv1: 7x7x3 -> 64 on the image: no input gradient, so the
        // backward reads dy and x and writes dW only.
        let (w, img) = (7 * 7 * 3 * 64, 3 * 224 * 224);
        assert_eq!(
            bytes(&g, "conv1"),
            ((img + x112) * MB + w * 2, (x112 + img) * MB + w * 2)
        );
        // bn1 over 64x112x112: 2 reads + 1 write forward (gamma, beta
        // read); 2 x (x + dy) + dx backward (gamma read, 2 gradients).
        assert_eq!(
            bytes(&g, "bn1"),
            (3 * x112 * MB + 2 * 64 * 2, 5 * x112 * MB + 3 * 64 * 2)
        );
        // relu: x -> y; y, dy -> dx.
        assert_eq!(bytes(&g, "relu"), (2 * x112 * MB, 3 * x112 * MB));
        // maxpool 3x3/2: x -> y; x, y, dy -> dx, and a second gradient
        // part (block 1's conv1 and its shortcut both read it).
        assert_eq!(
            bytes(&g, "maxpool"),
            ((x112 + x56) * MB, (2 * x112 + 3 * x56) * MB)
        );
        // layer1.0.conv2: 3x3, 64 -> 64 at 56x56, with its input gradient.
        let w = 3 * 3 * 64 * 64;
        assert_eq!(
            bytes(&g, "layer1.0.conv2"),
            (2 * x56 * MB + w * 2, 3 * x56 * MB + 2 * w * 2)
        );
        // The residual add: two inputs read, one output; no backward.
        assert_eq!(bytes(&g, "layer1.0.add"), (3 * x56_256 * MB, 0));
        // The ReLU after it feeds the next block's conv1 and its add: its
        // backward reads a second gradient part.
        assert_eq!(
            bytes(&g, "layer1.0.relu3"),
            (2 * x56_256 * MB, 4 * x56_256 * MB)
        );
        // fc: 2048 -> 1000, weight and bias.
        let (w, b) = (2048 * 1000, 1000);
        assert_eq!(
            bytes(&g, "fc"),
            (
                (2048 + 1000) * MB + (w + b) * 2,
                (1000 + 2 * 2048) * MB + (2 * w + b) * 2
            )
        );
    }

    /// Fusions as a list: (node, host, backward too).
    struct Fusions(Vec<(usize, usize, bool)>);

    impl FusionView for Fusions {
        fn fused_into(&self, i: usize) -> Option<usize> {
            self.0.iter().find(|f| f.0 == i).map(|f| f.1)
        }
        fn backward_taken(&self, i: usize) -> bool {
            self.0.iter().any(|f| f.0 == i && f.2)
        }
    }

    #[test]
    fn a_fused_pass_moves_nothing_of_its_own() {
        let g = zoo::build("resnet50").expect("resnet50 is in the zoo");
        let (bn1, relu) = (node(&g, "bn1"), node(&g, "relu"));
        let (bn3, add, relu3) = (
            node(&g, "layer1.0.bn3"),
            node(&g, "layer1.0.add"),
            node(&g, "layer1.0.relu3"),
        );
        let plain = row_traffic(&g, &NoFusion);
        // The stem's ReLU forward only; block 1's add and ReLU both ways.
        let fused = row_traffic(
            &g,
            &Fusions(vec![
                (relu, bn1, false),
                (add, bn3, true),
                (relu3, bn3, true),
            ]),
        );
        assert_eq!(fused[relu].forward, Elements::default());
        assert_eq!(fused[relu].backward, plain[relu].backward);
        assert_eq!(fused[bn1], plain[bn1]);
        // bn3's row (where its time is booked) reads the shortcut and
        // writes its gradient besides its own count...
        let y = (256 * 56 * 56) as u64;
        assert_eq!(fused[relu3], Traffic::default());
        assert_eq!(fused[add], Traffic::default());
        assert_eq!(
            fused[bn3].forward.per_image,
            plain[bn3].forward.per_image + y
        );
        // ... and, backward, the block output for the ReLU's mask and the
        // second part of relu3's output gradient (the next block's conv1
        // and add both read that output).
        assert_eq!(
            fused[bn3].backward.per_image,
            plain[bn3].backward.per_image + 3 * y
        );
        assert_eq!(fused[bn3].backward.fixed, plain[bn3].backward.fixed);
        assert_eq!(fused[0], Traffic::default());
    }

    #[test]
    fn flops_follow_the_macs() {
        let g = zoo::build("resnet50").expect("resnet50 is in the zoo");
        let conv1 = node(&g, "conv1");
        let m = g.node_macs(conv1);
        assert_eq!(node_flops(&g, conv1), (2 * m, 2 * m));
        let c2 = node(&g, "layer1.0.conv2");
        let m = g.node_macs(c2);
        assert_eq!(node_flops(&g, c2), (2 * m, 4 * m));
        assert_eq!(node_flops(&g, node(&g, "bn1")), (0, 0));
    }

    #[test]
    fn every_op_of_the_zoo_counts_at_least_its_output_forward() {
        for name in zoo::NAMES {
            let g = zoo::build(name).expect("zoo model");
            let t = row_traffic(&g, &NoFusion);
            for (i, n) in g.nodes.iter().enumerate().skip(1) {
                let spec = n.op.spec();
                if spec.aliases_input() {
                    assert_eq!(t[i], Traffic::default(), "{name}: {}", n.name);
                } else {
                    assert!(
                        t[i].forward.per_image >= n.out.len() as u64,
                        "{name}: {}",
                        n.name
                    );
                }
            }
        }
        // The embedding's backward writes its whole table's gradient.
        let e = crate::ops::embedding::EmbeddingSpec { vocab: 100, dim: 8 };
        let x = [Dims::new(1, 5, 1)];
        let y = e.out(&x).expect("a sequence of ids");
        let t = e.traffic(&x, y, false);
        assert_eq!(t.backward.fixed, 800);
        assert_eq!(t.forward.per_image, 5 + 2 * 40);
    }
}
