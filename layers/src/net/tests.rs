//! The CPU executor against finite differences and against the reference
//! kernels, one op at a time and as a whole small network.

use super::cpu::{CpuNet, CpuOptions};
use super::graph::{
    Builder, Cell, ConvSpec, Dims, Graph, LrnSpec, PoolKind, PoolSpec, RecurrentSpec, TensorId,
};
use cnnbench_kernels::conv::reference::rel_l2_error;
use cnnbench_kernels::Isa;

fn opts(reference: bool) -> CpuOptions {
    CpuOptions {
        isa: Isa::detect(),
        reference,
        seed: 5,
        fuse_relu: !reference,
    }
}

/// Central differences of the loss at four coordinates of every parameter:
/// each must agree with the analytic gradient to 2% of the largest gradient
/// in the network. The step is small because ReLU and max pooling have
/// kinks that a larger step crosses; the loss is f32, so its rounding
/// (about 1e-7) over 2h stays well under that bound.
fn check_finite_differences(g: &Graph, batch: usize) {
    let mut net = CpuNet::new(g, batch, opts(false)).unwrap();
    fwd(&mut net);
    net.backward().unwrap();
    let grads: Vec<(String, Vec<f32>)> = net
        .named_params()
        .into_iter()
        .map(|(n, p)| (n, p.grad.clone()))
        .collect();
    let scale = grads
        .iter()
        .flat_map(|(_, g)| g.iter().map(|v| v.abs()))
        .fold(1e-3f32, f32::max);
    for (pi, (name, grad)) in grads.iter().enumerate() {
        let n = grad.len();
        for k in [0, n / 3, n / 2, n - 1] {
            let h = 1e-4f32;
            let at = |net: &mut CpuNet, v: f32| {
                net.params_mut()[pi].value[k] = v;
                fwd(net) as f64
            };
            let w = net.params_mut()[pi].value[k];
            let up = at(&mut net, w + h);
            let down = at(&mut net, w - h);
            at(&mut net, w);
            let fd = (up - down) / (2.0 * h as f64);
            let err = (fd - grad[k] as f64).abs() / scale as f64;
            assert!(
                err < 2e-2,
                "{}: {name}[{k}] analytic {} vs finite difference {fd} ({err:.3e} of {scale})",
                g.name,
                grad[k]
            );
        }
    }
}

/// A conv feeding the op under test, then a classifier: the conv's weight
/// gradient checks the op's backward.
fn around(name: &str, op: impl FnOnce(&mut Builder, TensorId) -> TensorId) -> Graph {
    let (mut b, x) = Builder::new(name, Dims::new(6, 6, 3));
    let c = b.conv("conv", x, ConvSpec::square(8, 3, 1, 1).with_bias());
    let y = op(&mut b, c);
    let f = b.linear("fc", y, 5);
    b.finish(f)
}

#[test]
fn every_op_matches_finite_differences() {
    let lrn = LrnSpec {
        size: 5,
        alpha: 0.5,
        beta: 0.75,
        k: 1.0,
    };
    let graphs = [
        around("conv", |_, x| x),
        around("bn", |b, x| b.bn("bn", x)),
        around("relu", |b, x| b.relu("relu", x)),
        around("maxpool", |b, x| b.max_pool("pool", x, 3, 2, 1)),
        around("maxpool-ceil", |b, x| b.max_pool_ceil("pool", x, 3, 2, 0)),
        around("avgpool", |b, x| b.avg_pool("pool", x, 3, 1, 1)),
        around("avgpool-nopad", |b, x| {
            let s = PoolSpec {
                kind: PoolKind::Avg { count_pad: false },
                kh: 3,
                kw: 3,
                sh: 2,
                sw: 2,
                ph: 1,
                pw: 1,
                ceil: true,
            };
            b.pool("pool", x, s)
        }),
        around("gap", |b, x| b.global_avg_pool("gap", x)),
        around("lrn", |b, x| b.lrn("lrn", x, lrn)),
        around("dropout", |b, x| b.dropout("drop", x, 0.5)),
        around("concat", |b, x| {
            let y = b.conv("side", x, ConvSpec::square(4, 1, 1, 0));
            b.concat("cat", &[x, y])
        }),
        around("add", |b, x| {
            let y = b.conv("side", x, ConvSpec::square(8, 3, 1, 1));
            b.add("add", x, y)
        }),
        around("grouped", |b, x| {
            b.conv("g", x, ConvSpec::square(4, 3, 2, 1).groups(2).with_bias())
        }),
        around("fc", |b, x| {
            let y = b.linear("fc0", x, 7);
            b.relu("r", y)
        }),
    ];
    for g in &graphs {
        check_finite_differences(g, 3);
    }
}

/// A small network with every op, branches whose gradients sum (concat
/// fan-out, residual add) and every kind of pooling.
pub fn every_op_net() -> Graph {
    let (mut b, x) = Builder::new("every-op", Dims::new(12, 12, 3));
    let c1 = b.conv("conv1", x, ConvSpec::square(16, 3, 1, 1).with_bias());
    let r1 = b.relu("relu1", c1);
    let n1 = b.lrn(
        "lrn1",
        r1,
        LrnSpec {
            size: 5,
            alpha: 1e-4,
            beta: 0.75,
            k: 1.0,
        },
    );
    let p1 = b.max_pool_ceil("pool1", n1, 3, 2, 0);
    let a = b.conv("a.conv", p1, ConvSpec::square(8, 1, 1, 0));
    let a = b.bn("a.bn", a);
    let a = b.relu("a.relu", a);
    let bb = b.conv("b.conv", p1, ConvSpec::square(8, 3, 1, 1));
    let bb = b.bn("b.bn", bb);
    let bb = b.relu("b.relu", bb);
    let cat = b.concat("cat", &[a, bb]);
    let y = b.conv("res.conv1", cat, ConvSpec::square(16, 3, 1, 1));
    let y = b.bn("res.bn1", y);
    let y = b.relu("res.relu1", y);
    let y = b.conv("res.conv2", y, ConvSpec::square(16, 3, 1, 1).groups(2));
    let y = b.bn("res.bn2", y);
    let s = b.add("res.add", y, cat);
    let s = b.relu("res.relu2", s);
    let p = b.avg_pool("pool2", s, 3, 2, 1);
    let gap = b.global_avg_pool("gap", p);
    let f = b.linear("fc1", gap, 12);
    let f = b.relu("fc1.relu", f);
    let f = b.dropout("fc1.drop", f, 0.5);
    let f = b.linear("fc2", f, 10);
    b.finish(f)
}

#[test]
fn a_whole_network_matches_finite_differences() {
    check_finite_differences(&every_op_net(), 2);
}

fn rnn(cell: Cell, hidden: usize, bidirectional: bool, sequences: bool) -> RecurrentSpec {
    RecurrentSpec {
        cell,
        hidden,
        bidirectional,
        sequences,
    }
}

/// Token ids through an embedding, a bidirectional GRU returning every
/// step, an LSTM returning its last, dropout and one sigmoid logit: the
/// imdb models' ops, and every recurrent output form.
pub fn token_net() -> Graph {
    let (mut b, x) = Builder::new("tokens", Dims::new(1, 5, 1));
    let e = b.embedding("emb", x, 11, 6);
    let g = b.recurrent("gru", e, rnn(Cell::Gru, 4, true, true));
    let l = b.recurrent("lstm", g, rnn(Cell::Lstm, 5, false, false));
    let d = b.dropout("drop", l, 0.3);
    let f = b.linear("fc", d, 1);
    b.finish_binary(f)
}

/// A float sequence through both vanilla cells, one output read twice
/// (its gradient a sum), average pooling over time and a softmax.
pub fn sequence_net() -> Graph {
    let (mut b, x) = Builder::new("sequence", Dims::new(1, 4, 3));
    let r = b.recurrent("relu_rnn", x, rnn(Cell::RnnRelu, 5, false, true));
    let t = b.recurrent("tanh_rnn", r, rnn(Cell::RnnTanh, 4, true, false));
    let gap = b.global_avg_pool("gap", r);
    let cat = b.concat("cat", &[t, gap]);
    let f = b.linear("fc", cat, 3);
    b.finish(f)
}

#[test]
fn sequence_networks_match_finite_differences() {
    check_finite_differences(&token_net(), 3);
    check_finite_differences(&sequence_net(), 3);
}

#[test]
fn sequence_networks_match_the_reference_network() {
    // From 32 sequences (with two threads) a one-direction layer splits
    // its batch in two problems; 33 makes the halves unequal.
    for (g, batch) in [
        (token_net(), 3),
        (sequence_net(), 3),
        (token_net(), 33),
        (sequence_net(), 33),
    ] {
        let mut fast = CpuNet::new(&g, batch, opts(false)).unwrap();
        let mut slow = CpuNet::new(&g, batch, opts(true)).unwrap();
        let (lf, ls) = (fwd(&mut fast), fwd(&mut slow));
        assert!(
            (lf - ls).abs() <= 1e-5 * ls.abs(),
            "{}: loss {lf} vs {ls}",
            g.name
        );
        fast.backward().unwrap();
        slow.backward().unwrap();
        let want: Vec<Vec<f32>> = slow.params_mut().iter().map(|p| p.grad.clone()).collect();
        for ((name, p), w) in fast.named_params().into_iter().zip(&want) {
            let e = rel_l2_error(&p.grad, w);
            assert!(e < 1e-4, "{}: {name}: {e:e}", g.name);
        }
    }
}

#[test]
fn a_token_id_outside_the_vocabulary_is_an_error() {
    let g = token_net();
    let mut net = CpuNet::new(&g, 2, opts(false)).unwrap();
    let mut ids = vec![1.0; 10];
    ids[7] = 11.0;
    net.upload_output(0, &ids).unwrap();
    let e = net.forward().unwrap_err().to_string();
    assert!(
        e.contains("token id 11 is not a whole number below the vocabulary of 11"),
        "{e}"
    );
}

#[test]
fn fast_kernels_match_the_reference_network() {
    let g = every_op_net();
    let mut fast = CpuNet::new(&g, 4, opts(false)).unwrap();
    let mut slow = CpuNet::new(&g, 4, opts(true)).unwrap();
    let (lf, ls) = (fwd(&mut fast), fwd(&mut slow));
    assert!((lf - ls).abs() <= 1e-5 * ls.abs(), "loss {lf} vs {ls}");
    assert!(rel_l2_error(fast.logits(), slow.logits()) < 1e-5);
    fast.backward().unwrap();
    slow.backward().unwrap();
    let want: Vec<Vec<f32>> = slow.params_mut().iter().map(|p| p.grad.clone()).collect();
    for ((name, p), w) in fast.named_params().into_iter().zip(&want) {
        let e = rel_l2_error(&p.grad, w);
        assert!(e < 1e-4, "{name}: {e:e}");
    }
}

#[test]
fn parameters_allocated_equal_the_graph_count() {
    let g = every_op_net();
    let mut net = CpuNet::new(&g, 2, opts(false)).unwrap();
    let n: usize = net.params_mut().iter().map(|p| p.value.len()).sum();
    assert_eq!(n, g.params());
    assert!(net.memory().activations > 0);
}

#[test]
fn sgd_lowers_the_loss() {
    let g = every_op_net();
    let mut net = CpuNet::new(&g, 8, opts(false)).unwrap();
    let first = fwd(&mut net);
    for _ in 0..30 {
        fwd(&mut net);
        net.backward().unwrap();
        net.sgd_update(0.05, 0.9).unwrap();
    }
    let last = fwd(&mut net);
    assert!(last < first, "loss {first} -> {last}");
}

/// Pre-activation residual blocks: each sum is read by the next block's
/// batch norm and by the next sum, so the gradient of an add's output is
/// itself a sum of two.
pub fn preact_net() -> Graph {
    let (mut b, x) = Builder::new("preact", Dims::new(6, 6, 3));
    let mut s = b.conv("conv", x, ConvSpec::square(8, 3, 1, 1).with_bias());
    for blk in ["b1", "b2"] {
        let y = b.bn(&format!("{blk}.bn"), s);
        let y = b.relu(&format!("{blk}.relu"), y);
        let y = b.conv(&format!("{blk}.conv"), y, ConvSpec::square(8, 3, 1, 1));
        s = b.add(&format!("{blk}.add"), y, s);
    }
    let f = b.linear("fc", s, 5);
    b.finish(f)
}

/// Post-activation residual blocks as ResNet's: a projection shortcut
/// built after the block's last batch norm (the add's other input comes
/// later in graph order), an identity shortcut (the block's input, read by
/// two layers), and one built before it. Every channel count is a
/// multiple of 4, so cuDNN's fused batch norm takes each block end.
pub fn residual_net() -> Graph {
    let (mut b, x) = Builder::new("residual", Dims::new(6, 6, 3));
    let y = b.conv("conv", x, ConvSpec::square(8, 3, 1, 1));
    let y = b.bn("bn", y);
    let mut s = b.relu("relu", y);
    for (blk, c, project) in [("b1", 12, true), ("b2", 12, false), ("b3", 16, true)] {
        let cv = |b: &mut Builder, t, name: &str, k| {
            b.conv(
                &format!("{blk}.{name}"),
                t,
                ConvSpec::square(c, k, 1, k / 2),
            )
        };
        // b3 builds its shortcut first: the add's first input is then the
        // shortcut's batch norm.
        let early = (blk == "b3").then(|| {
            let d = cv(&mut b, s, "downsample.0", 1);
            b.bn(&format!("{blk}.downsample.1"), d)
        });
        let y = cv(&mut b, s, "conv1", 3);
        let y = b.bn(&format!("{blk}.bn1"), y);
        let y = b.relu(&format!("{blk}.relu1"), y);
        let y = cv(&mut b, y, "conv2", 3);
        let y = b.bn(&format!("{blk}.bn2"), y);
        let sum = match (early, project) {
            (Some(d), _) => b.add(&format!("{blk}.add"), d, y),
            (None, true) => {
                let d = cv(&mut b, s, "downsample.0", 1);
                let d = b.bn(&format!("{blk}.downsample.1"), d);
                b.add(&format!("{blk}.add"), y, d)
            }
            (None, false) => b.add(&format!("{blk}.add"), y, s),
        };
        s = b.relu(&format!("{blk}.relu2"), sum);
    }
    let p = b.global_avg_pool("gap", s);
    let f = b.linear("fc", p, 5);
    b.finish(f)
}

#[test]
fn residual_blocks_match_finite_differences() {
    check_finite_differences(&residual_net(), 2);
}

#[test]
fn an_add_read_twice_matches_finite_differences() {
    check_finite_differences(&preact_net(), 2);
}

#[test]
fn every_backend_starts_from_the_cpu_layers_parameters() {
    let g = every_op_net();
    let mut net = CpuNet::new(&g, 2, opts(false)).unwrap();
    let from_init: Vec<Vec<f32>> = (0..g.nodes.len())
        .flat_map(|i| super::init::layer_params(&g, i, opts(false).seed))
        .collect();
    let held: Vec<Vec<f32>> = net.params_mut().iter().map(|p| p.value.clone()).collect();
    assert_eq!(from_init, held);
    assert_eq!(
        net.input_mut().to_vec(),
        super::init::input(&g, 2, opts(false).seed)
    );
}

#[test]
fn the_buffer_plan_sums_only_where_layers_do_not() {
    use super::plan::BufferPlan;
    let g = preact_net();
    let cpu = BufferPlan::new(&g, 2, |i| matches!(g.nodes[i].op, super::Op::Relu(_)));
    let gpu = BufferPlan::new(&g, 2, |_| false);
    // The stem conv and the first add are each read twice (by a batch
    // norm and by the next add); every ReLU is read once.
    let summed = |p: &BufferPlan| p.dy_sum.iter().filter(|s| s.is_some()).count();
    assert_eq!(summed(&cpu), 2);
    assert_eq!(summed(&gpu), 2);
    assert_eq!(cpu.grad_len.len(), gpu.grad_len.len());
    // The loss has no output gradient; everything else one to read.
    let last = g.nodes.len() - 1;
    assert_eq!(gpu.dy_of(last), None);
    assert!((1..last).all(|i| gpu.dy_of(i).is_some()));
}

/// A ReLU read by two layers (its batch norm takes its backward too only
/// where the executor sums the two gradients for it), then a residual add
/// with its ReLU.
fn branching_relu_net() -> Graph {
    let (mut b, x) = Builder::new("branching", Dims::new(6, 6, 3));
    let y = b.conv("conv", x, ConvSpec::square(8, 3, 1, 1));
    let y = b.bn("bn", y);
    let y = b.relu("relu", y);
    let l = b.conv("left", y, ConvSpec::square(8, 3, 1, 1));
    let r = b.conv("right", y, ConvSpec::square(8, 1, 1, 0));
    let s = b.add("add", l, r);
    let s = b.relu("add.relu", s);
    let f = b.linear("fc", s, 5);
    b.finish(f)
}

#[test]
fn fused_relus_compute_what_separate_ones_do() {
    for (g, fused) in [
        (every_op_net(), 4),
        (branching_relu_net(), 2),
        (preact_net(), 2),
    ] {
        let mut on = CpuNet::new(&g, 3, opts(false)).unwrap();
        let mut off = CpuNet::new(
            &g,
            3,
            CpuOptions {
                fuse_relu: false,
                ..opts(false)
            },
        )
        .unwrap();
        assert_eq!(on.fused_relus(), fused, "{}", g.name);
        assert_eq!(off.fused_relus(), 0);
        assert!(on.memory().activations < off.memory().activations);
        let (a, b) = (fwd(&mut on), fwd(&mut off));
        assert!(
            (a - b).abs() <= 1e-6 * b.abs(),
            "{}: loss {a} vs {b}",
            g.name
        );
        on.backward().unwrap();
        off.backward().unwrap();
        let want: Vec<Vec<f32>> = off.params_mut().iter().map(|p| p.grad.clone()).collect();
        for ((name, p), w) in on.named_params().into_iter().zip(&want) {
            let e = rel_l2_error(&p.grad, w);
            assert!(e < 1e-5, "{}: {name}: {e:e}", g.name);
        }
    }
    check_finite_differences(&branching_relu_net(), 2);
}

/// `check`'s layer-by-layer comparison against a fused network: the fused
/// layers' own outputs are skipped, their ReLUs' rows check them.
#[test]
fn layer_by_layer_comparison_reads_around_fused_layers() {
    for g in [branching_relu_net(), residual_net()] {
        layer_by_layer_reads_around_fused_layers(&g);
    }
}

fn layer_by_layer_reads_around_fused_layers(g: &Graph) {
    let mut fast = CpuNet::new(g, 2, opts(false)).unwrap();
    let mut slow = CpuNet::new(g, 2, opts(true)).unwrap();
    fwd(&mut fast);
    let errs = slow.forward_from(&fast).unwrap();
    for (i, node) in g.nodes.iter().enumerate().skip(1) {
        let fused_layer = g
            .nodes
            .iter()
            .enumerate()
            .any(|(r, _)| fast.fused_into(r) == Some(i));
        // An add inside a batch norm forms no output of its own either.
        let fused_add = matches!(node.op, super::Op::Add(_)) && fast.fused_into(i).is_some();
        match errs[i] {
            None => assert!(fused_layer || fused_add, "{} not compared", node.name),
            Some(e) => {
                assert!(!fused_layer, "{} compared", node.name);
                assert!(e < 1e-5, "{}: {e:e}", node.name);
            }
        }
    }
    fast.backward().unwrap();
    slow.backward_from(&fast).unwrap();
    let want: Vec<Vec<f32>> = slow.params_mut().iter().map(|p| p.grad.clone()).collect();
    for ((name, p), w) in fast.named_params().into_iter().zip(&want) {
        let e = rel_l2_error(&p.grad, w);
        assert!(e < 1e-4, "{name}: {e:e}");
    }
}

/// The forward pass, then its loss.
fn fwd(net: &mut CpuNet) -> f32 {
    net.forward().unwrap();
    net.loss().unwrap()
}

#[test]
fn memory_counts_every_parameter_with_its_gradient_and_momentum() {
    let g = crate::zoo::build("resnet18").expect("zoo model");
    let net = CpuNet::new(&g, 1, opts(false)).unwrap();
    assert_eq!(net.memory().params, g.params() * 12);
}

#[test]
fn node_param_sizes_are_the_layers_parameters() {
    // Every model: the sizes sum to the spec's count (cheap, no layers).
    for name in crate::zoo::NAMES {
        let g = crate::zoo::build(name).expect("zoo model");
        for i in 0..g.nodes.len() {
            let sizes = g.node_param_sizes(i);
            assert_eq!(
                sizes.iter().sum::<usize>(),
                g.node_params(i),
                "{name} node {i}"
            );
            assert!(sizes.iter().all(|&n| n > 0), "{name} node {i}: {sizes:?}");
        }
    }
    // Biased and unbiased convolutions, batch norms, grouped convolutions
    // and fully connected layers: the lengths the layers actually hold.
    for g in [
        crate::zoo::build("resnet18").expect("zoo model"),
        crate::zoo::build("googlenet").expect("zoo model"),
        crate::zoo::build("alexnet").expect("zoo model"),
        every_op_net(),
    ] {
        let mut net = CpuNet::new(&g, 1, opts(false)).unwrap();
        let held: Vec<(String, usize)> = net
            .named_params()
            .into_iter()
            .map(|(name, p)| (name, p.value.len()))
            .collect();
        let sized: Vec<(String, usize)> = (0..g.nodes.len())
            .flat_map(|i| {
                let node = &g.nodes[i].name;
                g.node_param_sizes(i)
                    .into_iter()
                    .zip(["weight", "bias"])
                    .map(move |(n, what)| (format!("{node}.{what}"), n))
            })
            .collect();
        assert_eq!(sized, held, "{}", g.name);
    }
}
