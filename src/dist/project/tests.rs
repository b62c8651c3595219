use super::*;
use crate::dist::interconnect::{parse, parse_pair};
use cnnbench_layers::zoo;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

macro_rules! assert_close {
    ($a:expr, $b:expr) => {{
        let (a, b) = ($a, $b);
        assert!(close(a, b), "{} = {a}, expected {b}", stringify!($a));
    }};
}

/// 100 GB/s = 1e5 bytes per us, 10 us per ring step and per tree hop.
fn link_100() -> Link {
    parse("100:10").unwrap()
}

fn topo(gpus: usize, gpus_per_node: usize, links: &str) -> Topology {
    Topology {
        gpus,
        gpus_per_node,
        links: parse_pair(links).unwrap(),
    }
}

/// A parameter of `bytes` on `node`.
fn grad(node: usize, bytes: usize) -> GradParam {
    GradParam {
        node,
        index: 0,
        bytes,
    }
}

#[test]
fn ring_time_by_hand() {
    let l = link_100();
    // S = 100 MB: S/B = 1e8 / 1e5 = 1000 us.
    // n = 2: 2·1·10 + 2·1/2·1000 = 20 + 1000 = 1020 us.
    assert_close!(ring_us(&l, 2, 1e8), 1020.0);
    // n = 8: 2·7·10 + 2·7/8·1000 = 140 + 1750 = 1890 us.
    assert_close!(ring_us(&l, 8, 1e8), 1890.0);
    // Half of it: reduce-scatter over 8, 7·10 + 7/8·1000 = 945 us.
    assert_close!(ring_half_us(&l, 8, 1e8), 945.0);
    // One rank: nothing to do.
    assert_eq!(ring_us(&l, 1, 1e8), 0.0);
    // Tree over 8: 2·3·10 + 2·1000 = 2060 us; over 9, depth 4: 2080.
    assert_close!(tree_us(&l, 8, 1e8), 2060.0);
    assert_close!(tree_us(&l, 9, 1e8), 2080.0);
    assert_eq!(
        [1, 2, 3, 4, 5, 8, 9, 64, 65].map(ceil_log2),
        [0, 1, 2, 2, 3, 3, 4, 6, 7]
    );
}

#[test]
fn tree_for_small_messages_ring_for_large() {
    let l = link_100();
    // n = 8, S = 1 MB (S/B = 10 us): ring 140 + 2·7/8·10 = 157.5,
    // tree 60 + 2·10 = 80: the tree's shorter latency wins.
    assert_eq!(
        flat(&l, 8, 1e6),
        Exchange {
            algo: Algo::Tree,
            us: 80.0
        }
    );
    // S = 100 MB: ring 1890 < tree 2060: the ring's bandwidth wins.
    assert_eq!(
        flat(&l, 8, 1e8),
        Exchange {
            algo: Algo::Ring,
            us: 1890.0
        }
    );
    // NVLink in NCCL's model: a tree hop (28 us) costs more than a ring
    // step (3.4 us) and the tree moves more bytes, so a node of 8 GPUs
    // always rings, as NCCL does inside a node.
    let nv = parse("nvlink4").unwrap();
    for bytes in [4.0, 1e3, 1e6, 1e9] {
        assert_eq!(flat(&nv, 8, bytes).algo, Algo::Ring, "{bytes}");
    }
}

/// Forward 0.5 ms, backward 0.8 ms (nodes 1..3: 0.1, 0.5, 0.2), update
/// 0.1 ms, batch 32; node 3 holds 2 MB of gradients (past the 1 MiB
/// first bucket: a bucket of its own), node 1 holds 20 MB (under 25
/// MiB: the second bucket).
fn two_buckets(node_ms: [f64; 4]) -> Measured {
    Measured {
        batch: 32,
        forward_ms: 0.5,
        backward_ms: 0.8,
        update_ms: 0.1,
        node_backward_ms: node_ms.to_vec(),
        grads: vec![grad(1, 20_000_000), grad(3, 2_000_000)],
    }
}

#[test]
fn the_first_bucket_hides_under_the_backward_the_last_is_exposed() {
    let m = two_buckets([0.0, 0.1, 0.5, 0.2]);
    let p = project(&m, &topo(2, 8, "100:10")).unwrap();
    // Bucket 0 (2 MB, S/B = 20 us): ring over 2, 20 + 20 = 40 us (tree:
    // 20 + 40 = 60). Ready after node 3's backward, at 0.2 ms; done
    // at 0.24 ms, well before the backward ends at 0.8 ms.
    // Bucket 1 (20 MB, S/B = 200 us): 20 + 200 = 220 us. Ready after
    // node 1, at 0.2 + 0.5 + 0.1 = 0.8 ms; done at 1.02 ms: 0.22 ms
    // exposed.
    assert_eq!((p.buckets, p.algorithm.as_str(), p.nodes), (2, "ring", 1));
    assert_close!(p.comm_ms, 0.26);
    assert_close!(p.exposed_ms, 0.22);
    // Step: 0.5 + 0.8 + 0.22 + 0.1 = 1.62 ms, against 1.4 on one GPU.
    assert_close!(p.step_ms, 1.62);
    // 2·32 images / 1.62 ms = 39506.17... a second.
    assert_close!(p.images_per_sec, 64.0 / 1.62e-3);
    // Speedup 2·1.4/1.62 = 1.7284; efficiency 1.4/1.62 = 0.8642.
    assert_close!(p.speedup, 2.0 * 1.4 / 1.62);
    assert_close!(p.efficiency, 1.4 / 1.62);

    // Per-node times that sum to half the measured backward are
    // stretched to it: the same projection.
    let half = two_buckets([0.0, 0.05, 0.25, 0.1]);
    assert_eq!(project(&half, &topo(2, 8, "100:10")).unwrap(), p);
}

#[test]
fn a_bucket_waits_for_the_stream() {
    // Node 3 takes 0.78 ms: bucket 0 is ready at 0.78 and done at
    // 0.82; bucket 1 is ready at 0.8 but waits for the stream until
    // 0.82, and ends at 1.04: 0.24 ms exposed.
    let m = two_buckets([0.0, 0.01, 0.01, 0.78]);
    let p = project(&m, &topo(2, 8, "100:10")).unwrap();
    assert_close!(p.exposed_ms, 0.24);
    assert_close!(p.step_ms, 1.64);
}

#[test]
fn buckets_may_differ_in_algorithm() {
    // 8 GPUs on "100:10": the 2 MB bucket by tree (60 + 40 = 100 us
    // against 140 + 35 = 175), the 100 MB one (a parameter past the
    // cap, never split) by ring (1890 against 2060).
    let mut m = two_buckets([0.0, 0.1, 0.5, 0.2]);
    m.grads[0].bytes = 100_000_000;
    let p = project(&m, &topo(8, 8, "100:10")).unwrap();
    assert_eq!(p.algorithm, "ring for 1 bucket, tree for 1");
    assert_close!(p.comm_ms, 0.1 + 1.89);
    // Bucket 0: 0.2 to 0.3 ms; bucket 1: 0.8 to 2.69 ms.
    assert_close!(p.exposed_ms, 1.89);
}

#[test]
fn hierarchical_by_hand() {
    // N = 16, G = 8: M = 2 nodes. One bucket of S = 80 MB (one
    // parameter, past every cap).
    // Inside (100 GB/s, 10 us): reduce-scatter 7·10 + 7/8·800 = 770 us,
    // the all-gather the same.
    // Between (10 GB/s = 1e4 bytes/us, 20 us), S/G = 10 MB (1000 us):
    // ring 2·1·20 + 2·1/2·1000 = 1040, tree 2·1·20 + 2·1000 = 2040.
    // Total 770 + 1040 + 770 = 2580 us.
    let t = topo(16, 8, "100:10,10:20");
    assert_close!(all_reduce(&t, 8e7).us, 2580.0);
    let m = Measured {
        batch: 64,
        forward_ms: 5.0,
        backward_ms: 10.0,
        update_ms: 1.0,
        node_backward_ms: vec![0.0, 10.0],
        grads: vec![grad(1, 80_000_000)],
    };
    let p = project(&m, &t).unwrap();
    assert_eq!(
        (p.nodes, p.buckets, p.algorithm.as_str()),
        (2, 1, "hierarchical: ring in node, ring between nodes")
    );
    // Ready when the backward ends: all 2.58 ms exposed; step
    // 5 + 10 + 2.58 + 1 = 18.58 ms against 16.
    assert_close!(p.exposed_ms, 2.58);
    assert_close!(p.step_ms, 18.58);
    assert_close!(p.speedup, 16.0 * 16.0 / 18.58);
    assert_close!(p.efficiency, 16.0 / 18.58);
    assert_close!(p.images_per_sec, 16.0 * 64.0 / 18.58e-3);

    // N = 512: M = 64 nodes; S = 8 MB. Inside: 70 + 7/8·80 = 140 us
    // each way. Between, S/G = 1 MB (100 us): ring 2·63·20 +
    // 2·63/64·100 = 2716.875, tree 2·6·20 + 2·100 = 440: the tree.
    // Total 140 + 440 + 140 = 720 us.
    let t = topo(512, 8, "100:10,10:20");
    assert_eq!(
        all_reduce(&t, 8e6),
        Exchange {
            algo: Algo::Tree,
            us: 720.0
        }
    );
    let mut m = m;
    m.grads[0].bytes = 8_000_000;
    let p = project(&m, &t).unwrap();
    assert_eq!(p.nodes, 64);
    assert_eq!(
        p.algorithm,
        "hierarchical: ring in node, tree between nodes"
    );
    assert_close!(p.exposed_ms, 0.72);
}

#[test]
fn one_gpu_is_the_measured_run() {
    let m = two_buckets([0.0, 0.1, 0.5, 0.2]);
    let p = project(&m, &topo(1, 8, "ib-ndr")).unwrap();
    assert_eq!(
        (p.gpus, p.nodes, p.algorithm.as_str(), p.buckets),
        (1, 1, "none", 0)
    );
    assert_eq!((p.comm_ms, p.exposed_ms), (0.0, 0.0));
    assert!(p.comm_ms.is_sign_positive());
    let step_1 = 0.5 + 0.8 + 0.1;
    assert_eq!(p.step_ms, step_1);
    assert_eq!((p.speedup, p.efficiency), (1.0, 1.0));
    assert_close!(p.images_per_sec, 32.0 / 1.4e-3);
}

#[test]
fn bad_topologies_and_runs_are_refused() {
    let m = two_buckets([0.0, 0.1, 0.5, 0.2]);
    let e = |m: &Measured, t: &Topology| project(m, t).unwrap_err().to_string();
    assert_eq!(
        e(&m, &topo(12, 8, "nvlink4,ib-ndr")),
        "12 GPUs do not fill whole nodes of 8 GPUs: give a multiple of 8"
    );
    // Fewer than a node is one partly filled node.
    assert_eq!(project(&m, &topo(3, 8, "nvlink4")).unwrap().nodes, 1);
    assert!(e(&m, &topo(0, 8, "nvlink4")).contains("at least one GPU"));
    assert!(e(&m, &topo(8, 0, "nvlink4")).contains("one GPU per node"));
    let t = topo(2, 8, "nvlink4");
    let mut bad = m.clone();
    bad.batch = 0;
    assert_eq!(e(&bad, &t), "the measured run has a batch of 0");
    let mut bad = m.clone();
    bad.backward_ms = f64::NAN;
    assert!(e(&bad, &t).contains("backward time NaN ms"));
    let mut bad = m.clone();
    bad.node_backward_ms[2] = -1.0;
    assert!(e(&bad, &t).starts_with("node 2's measured backward time -1 ms"));
    let mut bad = m.clone();
    bad.node_backward_ms.truncate(3);
    assert_eq!(
        e(&bad, &t),
        "a gradient belongs to node 3, but backward times were measured for 3 nodes"
    );
    let mut bad = m.clone();
    bad.node_backward_ms = vec![0.0; 4];
    assert!(e(&bad, &t).contains("per-node backward times are all 0"));
    // One GPU needs no ready times.
    assert_eq!(project(&bad, &topo(1, 8, "nvlink4")).unwrap().speedup, 1.0);
    let mut bad = m;
    (bad.forward_ms, bad.backward_ms, bad.update_ms) = (0.0, 0.0, 0.0);
    bad.node_backward_ms = vec![0.0; 4];
    assert!(e(&bad, &t).contains("takes no time"));
}

#[test]
fn gpu_lists() {
    assert_eq!(
        parse_gpu_list("2,4,8,64,512").unwrap(),
        vec![2, 4, 8, 64, 512]
    );
    assert_eq!(parse_gpu_list(" 8, 2,8 ,1").unwrap(), vec![8, 2, 1]);
    assert_eq!(parse_gpu_list("1000000").unwrap(), vec![MAX_GPUS]);
    let e = |s: &str| parse_gpu_list(s).unwrap_err().to_string();
    assert_eq!(
        e("2,,4"),
        "--project-gpus \"2,,4\": an empty entry; give GPU counts like 2,4,8,64"
    );
    assert!(e("").contains("an empty entry"));
    assert!(e("8,").contains("an empty entry"));
    for bad in [
        "0",
        "-2",
        "two",
        "2.5",
        "1000001",
        "99999999999999999999999",
    ] {
        assert!(
            e(bad).ends_with("is not a GPU count from 1 to 1000000"),
            "{bad}: {}",
            e(bad)
        );
    }
}

#[test]
fn assumptions_name_the_links_and_the_model() {
    let links = parse_pair("nvlink4,ib-ndr").unwrap();
    let a = assumptions(&links, 8);
    let all = a.join("\n");
    assert!(a.iter().all(|l| !l.contains('\n')));
    for want in [
        "8 GPUs per node",
        "nvlink4 at 450 GB/s",
        "ib-ndr at 50 GB/s",
        "3.4 us per ring step",
        "14 us per ring step",
        "NCCL 2.20.3",
        "H100 Tensor Core GPU datasheet",
        "one NIC per GPU",
        "fp32",
        "25 MiB",
        "the first 1 MiB",
        "one communication stream",
        "2(n-1)·alpha + 2(n-1)/n·S/B",
        "2·ceil(log2 n)·alpha_tree + 2·S/B",
        "S/8 among the M nodes",
        "weak scaling",
        "tf_cnn_benchmarks",
        "compute is unchanged by N",
        "no stragglers",
    ] {
        assert!(all.contains(want), "{want} missing from:\n{all}");
    }
}

/// ResNet-50 at batch 64 with each node's backward proportional to its
/// multiply-accumulates, and 10% more backward that no node holds.
fn resnet50() -> Measured {
    let g = zoo::build("resnet50").expect("zoo model");
    let batch = 64;
    // 2 MACs of backward per forward MAC, at 50 TMAC/s.
    let node_backward_ms: Vec<f64> = (0..g.nodes.len())
        .map(|i| 2.0 * (g.node_macs(i) * batch as u64) as f64 / 5e10)
        .collect();
    let backward: f64 = node_backward_ms.iter().sum();
    Measured {
        batch,
        forward_ms: backward / 2.0,
        backward_ms: 1.1 * backward,
        update_ms: 1.0,
        node_backward_ms,
        grads: buckets::graph_params(&g, GRAD_BYTES),
    }
}

#[test]
fn resnet50_scales_sensibly() {
    let m = resnet50();
    let mut last = 0.0;
    for links in ["nvlink4,ib-ndr", "pcie4,eth100", "nvlink3,ib-hdr"] {
        for n in [1, 2, 4, 8, 16, 64, 512] {
            let p = project(&m, &topo(n, 8, links)).unwrap();
            let ctx = format!("{links} x{n}: {p:?}");
            assert!(p.efficiency > 0.0 && p.efficiency <= 1.0, "{ctx}");
            assert!(p.step_ms >= last, "{ctx}");
            assert!(p.exposed_ms <= p.comm_ms, "{ctx}");
            assert_eq!(p.buckets, if n == 1 { 0 } else { 5 }, "{ctx}");
            assert_eq!(p.nodes, n.div_ceil(8), "{ctx}");
            assert_eq!(p.algorithm.starts_with("hierarchical"), n > 8, "{ctx}");
            last = p.step_ms;
        }
        last = 0.0;
    }
    // Inside a DGX H100, ResNet-50's 102 MB of gradients hide almost
    // entirely under a ~20 ms backward.
    let p = project(&m, &topo(8, 8, "nvlink4")).unwrap();
    assert!(p.efficiency > 0.95, "{p:?}");
    // Over PCIe 4 they do not.
    let slow = project(&m, &topo(8, 8, "pcie4")).unwrap();
    assert!(slow.efficiency < p.efficiency, "{slow:?}");
}

#[test]
fn links_whose_projections_are_not_finite_are_refused_up_front() {
    for (links, gpus) in [
        ("1e-308:1e308", 64),
        ("1e-308:1", 2),
        ("1:1e308", 2),
        ("nvlink4,1e-300:1", 16),
    ] {
        let e = finite_links(&topo(gpus, 8, links))
            .expect_err(links)
            .to_string();
        assert!(
            e.starts_with(&format!("--interconnect {links}: an all-reduce of "))
                && e.contains("not be finite")
                && !e.contains('\n'),
            "{e}"
        );
    }
    // Slow and fast links that a machine could have stay accepted, as do
    // the intra-node links of a projection that never leaves the node.
    for (links, gpus) in [
        ("0.001:100000", 64),
        ("1e6:0.001", 64),
        ("nvlink4,eth100", 1024),
        ("nvlink4,1e-300:1", 8),
    ] {
        finite_links(&topo(gpus, 8, links)).unwrap();
    }
}
