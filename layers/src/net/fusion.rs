//! ReLU fusion as a pass over the graph: which ReLUs run inside the layer
//! before them, in that layer's own passes over memory, and which residual
//! adds run with them.
//!
//! The pass finds each ReLU that alone reads its producer's output. Where
//! that producer is a residual add whose output only the ReLU reads, and
//! an input of the add is read by the add alone, it first offers the add
//! and the ReLU together to that input's layer
//! ([`crate::core::backend::Layer::fuse_add_relu`]: cuDNN's batch norm
//! with `BN_ADD_ACTIVATION`), input by input; otherwise, or where no layer
//! takes them, it offers the ReLU to its producer's layer
//! ([`crate::core::backend::Layer::fuse_relu`]), which says how much of it
//! it takes. Today the CPU's batch norm takes the ReLU, and the add with
//! it, and its residual add the ReLU; the CUDA batch norm takes the ReLU,
//! and the add with it, where cuDNN's fused kernels or cnnbench's own
//! apply (`--fuse-bn`). The executor then rewires its
//! buffers to the decisions.

use super::graph::{Graph, Op};
use crate::core::backend::ReluFusion;

/// ReLU node `relu` runs inside node `into`'s layer, `how` much of it;
/// with `add`, also that residual add (between `into` and the ReLU),
/// forward and backward.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReluFused {
    pub relu: usize,
    pub into: usize,
    pub how: ReluFusion,
    pub add: Option<AddFused>,
}

/// The residual add a fused layer takes with the ReLU after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddFused {
    /// The add's node.
    pub node: usize,
    /// Its other input (`z`), read by the fused layer.
    pub z: usize,
}

/// The ReLUs of `graph` their producers take. `one_gradient(r)`: whether
/// ReLU `r`'s output gradient is one tensor (the producer's backward can
/// then read it in the ReLU's place); `offer(p, backward)` asks producer
/// `p`'s layer, which may take the backward only when `backward` is true;
/// `offer_add(b)` asks layer `b` to take the add after it and that add's
/// ReLU, forward and backward (asked only where `one_gradient` holds).
pub fn relu_fusions(
    graph: &Graph,
    one_gradient: impl Fn(usize) -> bool,
    mut offer: impl FnMut(usize, bool) -> ReluFusion,
    mut offer_add: impl FnMut(usize) -> bool,
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
        let backward = one_gradient(r);
        if backward && matches!(graph.nodes[p].op, Op::Add(_)) {
            if let Some(f) = add_fusion(graph, &consumers, r, p, &mut offer_add) {
                fused.push(f);
                continue;
            }
        }
        let how = offer(p, backward);
        if how != ReluFusion::None {
            fused.push(ReluFused {
                relu: r,
                into: p,
                how,
                add: None,
            });
        }
    }
    fused
}

/// The first input of add `a` (the ReLU `r`'s producer) whose layer takes
/// the add and the ReLU: one the add alone reads, beside another input.
fn add_fusion(
    graph: &Graph,
    consumers: &[Vec<usize>],
    r: usize,
    a: usize,
    offer_add: &mut impl FnMut(usize) -> bool,
) -> Option<ReluFused> {
    let inputs = &graph.nodes[a].inputs;
    if inputs.len() != 2 || inputs[0] == inputs[1] {
        return None;
    }
    for (k, &b) in inputs.iter().enumerate() {
        if b == 0 || consumers[b] != [a] || !offer_add(b) {
            continue;
        }
        return Some(ReluFused {
            relu: r,
            into: b,
            how: ReluFusion::ForwardBackward,
            add: Some(AddFused {
                node: a,
                z: inputs[1 - k],
            }),
        });
    }
    None
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
            |_| false,
        );
        // relu1's producer (bn) has one reader; relu2's producer (relu1)
        // has two (relu2 and the add), so relu2 is not offered.
        assert_eq!(offered, ["bn", "add"]);
        assert_eq!(fused.len(), 2);
        assert!(fused.iter().all(|f| f.how == ReluFusion::Forward));
        let none = relu_fusions(&g, |_| true, |_, _| ReluFusion::None, |_| false);
        assert!(none.is_empty());
    }

    /// The GPU's batch norm with `--fuse-bn`: it takes the ReLU (forward
    /// and backward) and the add with its ReLU; the add takes nothing.
    fn gpu_offers(
        g: &Graph,
    ) -> (
        impl Fn(usize, bool) -> ReluFusion + '_,
        impl Fn(usize) -> bool + '_,
    ) {
        let bn = move |p: usize| matches!(g.nodes[p].op, Op::BatchNorm(_));
        let offer = move |p: usize, backward: bool| {
            if bn(p) && backward {
                ReluFusion::ForwardBackward
            } else {
                ReluFusion::None
            }
        };
        (offer, bn)
    }

    fn names(g: &Graph, fused: &[ReluFused]) -> Vec<String> {
        fused
            .iter()
            .map(|f| match f.add {
                Some(a) => format!(
                    "{}+{}+{} (z {})",
                    g.nodes[f.into].name,
                    g.nodes[a.node].name,
                    g.nodes[f.relu].name,
                    g.nodes[a.z].name
                ),
                None => format!("{}+{}", g.nodes[f.into].name, g.nodes[f.relu].name),
            })
            .collect()
    }

    #[test]
    fn resnet50_on_the_gpu_fuses_every_block_end_and_every_bn_relu() {
        let g = crate::zoo::build("resnet50").expect("zoo model");
        let (offer, offer_add) = gpu_offers(&g);
        // The GPU's ReLU does not sum its gradients: the executor does, so
        // every ReLU's gradient is one tensor.
        let fused = relu_fusions(&g, |_| true, offer, offer_add);
        let adds: Vec<&ReluFused> = fused.iter().filter(|f| f.add.is_some()).collect();
        assert_eq!(adds.len(), 16, "one per bottleneck");
        assert_eq!(fused.len() - adds.len(), 33, "the stem's and two per block");
        assert!(fused.iter().all(|f| f.how == ReluFusion::ForwardBackward));
        let n = names(&g, &fused);
        assert!(n.contains(&"bn1+relu".to_string()), "{n:?}");
        assert!(
            n.contains(&"layer1.0.bn2+layer1.0.relu2".to_string()),
            "{n:?}"
        );
        // The block's last batch norm takes the add; the shortcut is z.
        assert!(
            n.contains(
                &"layer1.0.bn3+layer1.0.add+layer1.0.relu3 (z layer1.0.downsample.1)".to_string()
            ),
            "{n:?}"
        );
        assert!(
            n.contains(&"layer4.2.bn3+layer4.2.add+layer4.2.relu3 (z layer4.1.relu3)".to_string()),
            "{n:?}"
        );
        // A ReLU whose gradient is in parts nobody sums is not offered
        // with its add, nor its backward.
        let (offer, offer_add) = gpu_offers(&g);
        let many = |r: usize| g.consumers()[r].len() == 1;
        let fused = relu_fusions(&g, many, offer, offer_add);
        let adds = fused.iter().filter(|f| f.add.is_some()).count();
        assert_eq!(adds, 1, "the last block's ReLU alone has one reader");
    }

    #[test]
    fn the_cpu_decides() {
        // The CPU's layers: batch norm takes the ReLU both ways, and the
        // add with its ReLU; the add takes the forward of a ReLU. With adds
        // offered, every ReLU's gradient is one tensor to its layer (the
        // fused batch norm reads a block output's two parts itself).
        let g = crate::zoo::build("resnet50").expect("zoo model");
        let offer = |p: usize, backward: bool| match g.nodes[p].op {
            Op::BatchNorm(_) if backward => ReluFusion::ForwardBackward,
            Op::BatchNorm(_) | Op::Add(_) => ReluFusion::Forward,
            _ => ReluFusion::None,
        };
        let bn = |b: usize| matches!(g.nodes[b].op, Op::BatchNorm(_));
        let fused = relu_fusions(&g, |_| true, offer, bn);
        assert_eq!(fused.len(), 49);
        assert_eq!(fused.iter().filter(|f| f.add.is_some()).count(), 16);
        assert!(fused.iter().all(|f| bn(f.into)));
        assert!(fused.iter().all(|f| f.how == ReluFusion::ForwardBackward));
    }

    #[test]
    fn the_add_goes_to_the_first_input_that_takes_it() {
        let g = crate::net::tests::residual_net();
        let (offer, offer_add) = gpu_offers(&g);
        let fused = relu_fusions(&g, |_| true, offer, offer_add);
        assert_eq!(
            names(&g, &fused),
            [
                "bn+relu",
                "b1.bn1+b1.relu1",
                "b1.bn2+b1.add+b1.relu2 (z b1.downsample.1)",
                "b2.bn1+b2.relu1",
                "b2.bn2+b2.add+b2.relu2 (z b1.relu2)",
                "b3.bn1+b3.relu1",
                // b3's add reads its shortcut's batch norm first.
                "b3.downsample.1+b3.add+b3.relu2 (z b3.bn2)",
            ]
        );
        // Where the shortcut's batch norm refuses, the other input takes it.
        let (offer, _) = gpu_offers(&g);
        let not_shortcuts = |b: usize| {
            matches!(g.nodes[b].op, Op::BatchNorm(_)) && !g.nodes[b].name.contains("downsample")
        };
        let fused = relu_fusions(&g, |_| true, offer, not_shortcuts);
        assert!(
            names(&g, &fused).contains(&"b3.bn2+b3.add+b3.relu2 (z b3.downsample.1)".to_string())
        );
        // An add read twice, or a batch norm read twice, is never fused.
        let g = crate::net::tests::preact_net();
        let (offer, offer_add) = gpu_offers(&g);
        let fused = relu_fusions(&g, |_| true, offer, offer_add);
        assert!(fused.iter().all(|f| f.add.is_none()));
    }

    /// A CPU network with ReLUs fused, and adds too with `fuse_add` (as
    /// every CPU run but `--no-fuse`'s).
    fn cpu_net(g: &Graph, fuse_add: bool) -> crate::net::cpu::CpuNet {
        use crate::backend::cpu::{Cpu, Ctx};
        let isa = cnnbench_kernels::Isa::detect();
        let cx = Ctx {
            isa,
            reference: false,
            step_seed: 5,
            conv_choice: Default::default(),
        };
        let opts = crate::net::exec::ExecOptions {
            seed: 5,
            per_layer: true,
            fuse_relu: true,
            fuse_add,
        };
        crate::net::exec::Executor::build(Cpu { isa }, cx, g, 2, opts).expect("a CPU network")
    }

    #[test]
    fn an_add_fused_into_batch_norm_computes_what_separate_layers_do() {
        use crate::net::compare;
        use crate::net::cpu::{CpuNet, CpuOptions};
        use cnnbench_kernels::conv::reference::rel_l2_error;
        let tests = [
            (
                crate::net::tests::every_op_net(),
                "res.bn2+res.add+res.relu2",
                1,
            ),
            // z (b3.bn2, b1.downsample.1) comes after the fused layer in
            // graph order; b1's and b2's ReLUs have two readers, whose
            // gradients the fused layer reads itself (no sum).
            (
                crate::net::tests::residual_net(),
                "b3.downsample.1+b3.add+b3.relu2",
                3,
            ),
        ];
        for (g, row, adds) in tests {
            let mut on = cpu_net(&g, true);
            let mut relu_only = cpu_net(&g, false);
            assert_eq!(on.fused_adds(), adds, "{}", g.name);
            // A fused add's layer reads its gradient's parts: no sum.
            for p in (0..g.nodes.len()).filter(|&p| on.fused.moved[p]) {
                assert!(on.dy_sum[p].is_none(), "{}: {}", g.name, g.nodes[p].name);
            }
            let two =
                (0..g.nodes.len()).filter(|&p| on.fused.moved[p] && on.dy_parts[p].len() == 2);
            assert_eq!(two.count(), if adds == 3 { 2 } else { 0 }, "{}", g.name);
            assert_eq!(on.fused_names().as_deref(), Some("relu,add+relu"));
            assert_eq!(relu_only.fused_names().as_deref(), Some("relu"));
            assert!(on.memory().activations < relu_only.memory().activations);
            on.step(None).unwrap();
            relu_only.step(None).unwrap();
            let (a, b) = (on.loss().unwrap(), relu_only.loss().unwrap());
            assert!(
                (a - b).abs() <= 1e-6 * b.abs(),
                "{}: loss {a} vs {b}",
                g.name
            );
            let want: Vec<Vec<f32>> = relu_only
                .params_mut()
                .iter()
                .map(|p| p.grad.clone())
                .collect();
            for ((name, p), w) in on.named_params().into_iter().zip(&want) {
                let e = rel_l2_error(&p.grad, w);
                assert!(e < 1e-5, "{}: {name}: {e:e}", g.name);
            }
            // The layer runs at its ReLU's place; its time is booked under it.
            let r = (0..g.nodes.len())
                .find(|&r| on.fused.runs_here[r].is_some())
                .unwrap();
            let b = on.fused.runs_here[r].unwrap();
            assert_eq!((on.fwd_ms[r], on.bwd_ms[r]), (0.0, 0.0));
            assert!(on.fwd_ms[b] > 0.0 && on.bwd_ms[b] > 0.0);
            let add = g.nodes[r].inputs[0];
            assert_eq!(on.kernels(add), format!("fused into {}", g.nodes[b].name));
            // `check`'s comparison reads around the fused layers (a fresh
            // network: the first step's dropout masks, as the reference's).
            let mut on = cpu_net(&g, true);
            let reference_opts = CpuOptions {
                isa: cnnbench_kernels::Isa::detect(),
                reference: true,
                seed: 5,
                fuse_relu: false,
            };
            let mut reference = CpuNet::new(&g, 2, reference_opts).unwrap();
            reference.forward().unwrap();
            reference.backward().unwrap();
            let outs = compare::outputs(&mut on, &reference).unwrap();
            let rows: Vec<&str> = outs.iter().map(|p| p.tensor.as_str()).collect();
            assert!(rows.contains(&format!("{row}.output").as_str()), "{rows:?}");
            let add_row = format!("{}.output", g.nodes[add].name);
            assert!(!rows.contains(&add_row.as_str()), "{rows:?}");
            let grads = compare::gradients(&mut on, &mut reference, |_| 1.0).unwrap();
            for p in outs.iter().chain(&grads) {
                let e = rel_l2_error(&p.got, &p.want);
                assert!(e < 1e-4, "{}: {}: {e:e}", g.name, p.tensor);
            }
        }
    }
}
