//! What more GPUs would do for a measured run (`model NAME --project-gpus
//! 2,4,8,64,512 --interconnect INTRA[,INTER]`): the step time, images/s,
//! speedup and efficiency of data-parallel training on N GPUs, from one
//! GPU's measured forward, backward (per node) and update times and the
//! links' bandwidth and latency.
//!
//! The gradients are all-reduced in fp32, in DDP's buckets
//! ([`buckets::assign`]), on one communication stream that overlaps the
//! backward: a bucket's all-reduce starts once the backward has produced
//! its gradients and the previous bucket's all-reduce is done. What is
//! still running when the backward ends is exposed: the update waits for
//! it. Each bucket takes the faster of a ring and a tree all-reduce, as
//! NCCL's tuner picks per message size; past one node the all-reduce is
//! hierarchical (see [`all_reduce`]). [`assumptions`] lists everything the
//! projection takes for granted.

use super::interconnect::{nic_assumption, Interconnect, Link};
use anyhow::{bail, Result};
use cnnbench_layers::net::buckets::{self, GradParam};
use serde::{Deserialize, Serialize};

/// The most GPUs `--project-gpus` accepts: beyond any machine built, and
/// small enough that every count stays exact in an f64.
pub const MAX_GPUS: usize = 1_000_000;

/// Bytes per gradient element: gradients are all-reduced in fp32.
pub const GRAD_BYTES: usize = 4;

/// One GPU's measured step (medians), the input of a projection.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    /// Images per GPU per step (kept on every GPU: weak scaling).
    pub batch: usize,
    pub forward_ms: f64,
    /// The whole backward pass, as measured.
    pub backward_ms: f64,
    /// The optimizer step; 0 when the run had none.
    pub update_ms: f64,
    /// Each node's backward in graph order (node 0, the input, has none;
    /// the backward runs from the last node to node 1). Scaled to sum to
    /// `backward_ms`, which also holds what no node is charged with
    /// (gradient sums where a tensor has several readers, ...).
    pub node_backward_ms: Vec<f64>,
    /// The parameters' gradients in graph order, in bytes
    /// (`buckets::graph_params(g, GRAD_BYTES)`).
    pub grads: Vec<GradParam>,
}

/// The machine projected to.
#[derive(Clone, Debug, PartialEq)]
pub struct Topology {
    /// N: GPUs in all.
    pub gpus: usize,
    /// G: GPUs per node; past one node, N must be a multiple of it.
    pub gpus_per_node: usize,
    pub links: Interconnect,
}

/// A projected step on `gpus` GPUs.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Projection {
    pub gpus: usize,
    pub nodes: usize,
    /// How the buckets are all-reduced: `none` (one GPU), `ring`, `tree`,
    /// `ring for 3 buckets, tree for 2`, or past one node
    /// `hierarchical: ring in node, tree between nodes`.
    pub algorithm: String,
    /// Buckets all-reduced per step (0 on one GPU).
    pub buckets: usize,
    /// The all-reduces' time, hidden or not.
    pub comm_ms: f64,
    /// The part of `comm_ms` the backward does not hide.
    pub exposed_ms: f64,
    /// forward + backward + exposed + update.
    pub step_ms: f64,
    /// Images a second over all GPUs.
    pub images_per_sec: f64,
    /// N times the measured one-GPU step over the projected step.
    pub speedup: f64,
    /// `speedup / N`.
    pub efficiency: f64,
}

/// The all-reduce of one bucket over a flat group of ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Algo {
    Ring,
    Tree,
}

/// One bucket's all-reduce: the algorithm of its flat part (the whole on
/// one node; between nodes past one) and its time.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Exchange {
    algo: Algo,
    us: f64,
}

/// Microseconds to move `bytes` over `link` (GB/s = 1e3 bytes per us).
fn transfer_us(link: &Link, bytes: f64) -> f64 {
    bytes / (link.gbytes_per_s * 1e3)
}

/// `ceil(log2 n)` for `n >= 1`: a binary tree's depth over `n` ranks.
fn ceil_log2(n: usize) -> u32 {
    usize::BITS - n.saturating_sub(1).leading_zeros()
}

/// Ring all-reduce of `bytes` among `n` ranks: a reduce-scatter and an
/// all-gather of `n - 1` steps each, every step one latency and `1/n` of
/// the data: `2(n-1)·alpha + 2(n-1)/n · S/B`.
fn ring_us(link: &Link, n: usize, bytes: f64) -> f64 {
    if n <= 1 {
        return 0.0;
    }
    let steps = 2.0 * (n - 1) as f64;
    steps * link.latency_us + steps / n as f64 * transfer_us(link, bytes)
}

/// NCCL's double binary tree all-reduce of `bytes` among `n` ranks:
/// `2·ceil(log2 n)·alpha_tree + 2·S/B`. Each of the two trees carries half
/// the data, reduced up and broadcast down; a rank is inner in one tree
/// and a leaf in the other, so it sends (and receives) S on the way up and
/// S on the way down: 2·S/B, which is NCCL's own tree bandwidth model
/// (algorithm bandwidth = half the bus bandwidth). Pipelined in chunks,
/// the latency is that of the tree's depth, up and down. `alpha_tree` is
/// the link's tree hop latency.
fn tree_us(link: &Link, n: usize, bytes: f64) -> f64 {
    if n <= 1 {
        return 0.0;
    }
    2.0 * f64::from(ceil_log2(n)) * link.tree_latency_us + 2.0 * transfer_us(link, bytes)
}

/// Ring reduce-scatter (or all-gather) of `bytes` among `n` ranks:
/// `(n-1)·alpha + (n-1)/n · S/B`.
fn ring_half_us(link: &Link, n: usize, bytes: f64) -> f64 {
    ring_us(link, n, bytes) / 2.0
}

/// The faster of ring and tree (ring on a tie), as NCCL's tuner picks the
/// algorithm of least modelled time for each message size.
fn flat(link: &Link, n: usize, bytes: f64) -> Exchange {
    let (ring, tree) = (ring_us(link, n, bytes), tree_us(link, n, bytes));
    if tree < ring {
        Exchange {
            algo: Algo::Tree,
            us: tree,
        }
    } else {
        Exchange {
            algo: Algo::Ring,
            us: ring,
        }
    }
}

/// All-reduce of one bucket of `bytes` on `t` (N GPUs, G per node):
/// - N <= G: one all-reduce over the link inside the node.
/// - N > G (M = N/G nodes): a ring reduce-scatter inside each node (each
///   GPU then holds S/G of the sum), an all-reduce of those S/G bytes
///   among the M nodes, every GPU over its own NIC with the G rails in
///   parallel (ring or tree, the faster), then a ring all-gather inside
///   the node: `2·[(G-1)·alpha_i + (G-1)/G · S/B_i] + allreduce_M(S/G)`.
fn all_reduce(t: &Topology, bytes: f64) -> Exchange {
    let (n, g) = (t.gpus, t.gpus_per_node);
    if n <= g {
        return flat(&t.links.intra, n, bytes);
    }
    let between = flat(&t.links.inter, n / g, bytes / g as f64);
    Exchange {
        algo: between.algo,
        us: 2.0 * ring_half_us(&t.links.intra, g, bytes) + between.us,
    }
}

/// The nodes N GPUs fill, or why they do not fill whole nodes.
fn nodes(t: &Topology) -> Result<usize> {
    let (n, g) = (t.gpus, t.gpus_per_node);
    if n == 0 || g == 0 {
        bail!("a projection needs at least one GPU and one GPU per node, not {n} and {g}");
    }
    if n > g && n % g != 0 {
        bail!("{n} GPUs do not fill whole nodes of {g} GPUs: give a multiple of {g}");
    }
    Ok(n.div_ceil(g))
}

/// That the measured run can be projected to `gpus` GPUs.
fn check(m: &Measured, gpus: usize) -> Result<()> {
    if m.batch == 0 {
        bail!("the measured run has a batch of 0");
    }
    for (what, v) in [
        ("forward", m.forward_ms),
        ("backward", m.backward_ms),
        ("update", m.update_ms),
    ] {
        if !(v.is_finite() && v >= 0.0) {
            bail!("the measured {what} time {v} ms is not a finite, non-negative time");
        }
    }
    if m.forward_ms + m.backward_ms + m.update_ms <= 0.0 {
        bail!("the measured step takes no time: nothing to project");
    }
    if let Some((i, v)) = m
        .node_backward_ms
        .iter()
        .enumerate()
        .find(|(_, v)| !(v.is_finite() && **v >= 0.0))
    {
        bail!("node {i}'s measured backward time {v} ms is not a finite, non-negative time");
    }
    let nodes = m.node_backward_ms.len();
    if let Some(p) = m.grads.iter().find(|p| p.node >= nodes) {
        bail!(
            "a gradient belongs to node {}, but backward times were measured for {nodes} nodes",
            p.node
        );
    }
    // One GPU sends nothing, so it needs no ready times.
    let sends = gpus > 1 && !m.grads.is_empty();
    if sends && m.backward_ms > 0.0 && m.node_backward_ms.iter().sum::<f64>() <= 0.0 {
        bail!("the per-node backward times are all 0: cannot tell when gradients are ready");
    }
    Ok(())
}

/// When each node's gradients are ready, in ms from the backward's start:
/// the (scaled) backward of every node from the last down to it.
fn ready_ms(m: &Measured) -> Vec<f64> {
    let sum: f64 = m.node_backward_ms.iter().sum();
    // The measured backward also holds work no node is charged with; the
    // nodes' times are stretched proportionally to cover it.
    let scale = if sum > 0.0 { m.backward_ms / sum } else { 0.0 };
    let mut ready = vec![0.0; m.node_backward_ms.len()];
    let mut done = 0.0;
    for (i, t) in m.node_backward_ms.iter().enumerate().rev() {
        done += t * scale;
        ready[i] = done;
    }
    ready
}

/// How the buckets went, in words (see [`Projection::algorithm`]).
fn describe(hierarchical: bool, exchanges: &[Exchange]) -> String {
    if exchanges.is_empty() {
        return "none".to_string();
    }
    let trees = exchanges.iter().filter(|e| e.algo == Algo::Tree).count();
    let rings = exchanges.len() - trees;
    let bucket = |n: usize| if n == 1 { "bucket" } else { "buckets" };
    let flat = match (rings, trees) {
        (_, 0) => "ring".to_string(),
        (0, _) => "tree".to_string(),
        _ => format!("ring for {rings} {}, tree for {trees}", bucket(rings)),
    };
    if hierarchical {
        format!("hierarchical: ring in node, {flat} between nodes")
    } else {
        flat
    }
}

/// The largest gradient [`finite_links`] checks a link with: a terabyte,
/// past any model's gradients.
const LARGEST_CHECKED_BYTES: f64 = 1e12;

/// Buckets a step may send: far past a model's (a 25 MB bucket of a
/// terabyte of gradients is 40,000).
const MOST_BUCKETS: f64 = 1e6;

/// That the links of `t` give finite times: an all-reduce of one byte and
/// of a terabyte, a million times over, must take a finite time. A
/// `GBps:us` link such as `1e-308:1e308` parses (both are positive and
/// finite) but would project steps of infinite length, written as `null`
/// and `inf`; it is refused up front in one line instead.
pub fn finite_links(t: &Topology) -> Result<()> {
    nodes(t)?;
    for bytes in [1.0, LARGEST_CHECKED_BYTES] {
        let us = all_reduce(t, bytes).us;
        if !(us * MOST_BUCKETS).is_finite() {
            bail!(
                "--interconnect {}{}: an all-reduce of {bytes} bytes among {} GPUs would take \
                 {us} us, and projected steps would not be finite; give a bandwidth and a \
                 latency a link could have",
                t.links.intra.name,
                if t.links.inter == t.links.intra {
                    String::new()
                } else {
                    format!(",{}", t.links.inter.name)
                },
                t.gpus
            );
        }
    }
    Ok(())
}

/// The projected step of `m` on `t` (see the module's doc and
/// [`assumptions`]).
pub fn project(m: &Measured, t: &Topology) -> Result<Projection> {
    let nodes = nodes(t)?;
    check(m, t.gpus)?;
    let n = t.gpus;
    let step_1 = m.forward_ms + m.backward_ms + m.update_ms;
    let buckets = if n > 1 {
        buckets::assign(&m.grads, buckets::FIRST_BUCKET_BYTES, buckets::BUCKET_BYTES)
    } else {
        Vec::new()
    };
    let exchanges: Vec<Exchange> = buckets
        .iter()
        .map(|b| all_reduce(t, b.bytes as f64))
        .collect();
    let ready = ready_ms(m);
    // One communication stream: a bucket starts when its gradients are
    // ready and the bucket before it is done.
    let mut end = 0.0f64;
    for (b, e) in buckets.iter().zip(&exchanges) {
        end = end.max(ready[b.ready_after]) + e.us / 1e3;
    }
    // A fold from +0.0: an empty f64 sum is -0.0.
    let comm_ms = exchanges.iter().fold(0.0, |sum, e| sum + e.us / 1e3);
    let exposed_ms = (end - m.backward_ms).max(0.0);
    // One GPU's step exactly, plus what the backward does not hide.
    let step_ms = step_1 + exposed_ms;
    let speedup = n as f64 * step_1 / step_ms;
    // Links are checked up front (finite_links); measured times that still
    // overflow are refused rather than written as null.
    if !(comm_ms.is_finite() && step_ms.is_finite() && speedup.is_finite() && speedup > 0.0) {
        bail!(
            "projecting {n} GPUs gives a step of {step_ms} ms with {comm_ms} ms of all-reduce: \
             not a finite projection"
        );
    }
    Ok(Projection {
        gpus: n,
        nodes,
        algorithm: describe(n > t.gpus_per_node, &exchanges),
        buckets: buckets.len(),
        comm_ms,
        exposed_ms,
        step_ms,
        images_per_sec: (n * m.batch) as f64 / (step_ms / 1e3),
        speedup,
        efficiency: speedup / n as f64,
    })
}

/// Everything a projection assumes, one per line, with the links' figures
/// and where they come from.
pub fn assumptions(links: &Interconnect, gpus_per_node: usize) -> Vec<String> {
    let g = gpus_per_node;
    let link = |role: &str, l: &Link| {
        format!(
            "{role}: {} at {} GB/s per GPU per direction (GB = 1e9 bytes), {} us per ring \
             step, {} us per tree hop ({})",
            l.name, l.gbytes_per_s, l.latency_us, l.tree_latency_us, l.cite
        )
    };
    vec![
        format!("{g} GPUs per node; more GPUs than that fill whole nodes (N a multiple of {g})"),
        link("link inside a node", &links.intra),
        link("link between nodes", &links.inter),
        format!(
            "between nodes, {}: each GPU sends over its own NIC, the {g} rails of a node in \
             parallel",
            nic_assumption()
        ),
        "links run at their nominal bandwidth, with no protocol overhead, congestion or \
         contention: communication times are lower bounds"
            .to_string(),
        format!(
            "gradients are fp32 ({GRAD_BYTES} bytes per parameter), all-reduced in PyTorch \
             DDP's buckets: {} MiB (bucket_cap_mb=25), the first {} MiB, filled in reverse \
             layer order; a parameter is never split",
            buckets::BUCKET_BYTES >> 20,
            buckets::FIRST_BUCKET_BYTES >> 20
        ),
        "one communication stream: a bucket's all-reduce starts when the backward has \
         produced all its gradients and the previous bucket's all-reduce has finished; the \
         update waits for the last, and what runs past the backward is exposed"
            .to_string(),
        "the measured per-layer backward times are scaled proportionally to sum to the \
         measured backward, which also holds work no layer is charged with (gradient sums)"
            .to_string(),
        "ring all-reduce of S bytes among n GPUs: 2(n-1)·alpha + 2(n-1)/n·S/B".to_string(),
        "tree all-reduce (NCCL's double binary tree, pipelined): 2·ceil(log2 n)·alpha_tree + \
         2·S/B"
            .to_string(),
        "each bucket takes the faster of ring and tree, as NCCL's tuner picks per message \
         size; NCCL's per-call base latency and its other protocols (LL, LL128) and \
         algorithms (NVLS, CollNet) are left out"
            .to_string(),
        format!(
            "past one node (M nodes): ring reduce-scatter over the {g} GPUs of a node \
             ((G-1)·alpha + (G-1)/G·S/B inside), all-reduce of S/{g} among the M nodes between \
             them (ring or tree, the faster), ring all-gather inside the node"
        ),
        "weak scaling: the per-GPU batch stays as measured, the global batch grows with N \
         (images/s counted as tf_cnn_benchmarks does)"
            .to_string(),
        "compute is unchanged by N: forward, backward and update take what they took on one \
         GPU, and communication does not slow them"
            .to_string(),
        "no stragglers: every GPU finishes its backward at the same time, with no data \
         loading or host stalls"
            .to_string(),
    ]
}

/// `--project-gpus 2,4,8,64,512`: positive GPU counts up to [`MAX_GPUS`],
/// duplicates dropped, in the order given.
pub fn parse_gpu_list(s: &str) -> Result<Vec<usize>> {
    let mut out = Vec::new();
    for item in s.split(',') {
        let item = item.trim();
        if item.is_empty() {
            bail!("--project-gpus {s:?}: an empty entry; give GPU counts like 2,4,8,64");
        }
        let n = match item.parse::<usize>() {
            Ok(n) if (1..=MAX_GPUS).contains(&n) => n,
            _ => bail!("--project-gpus {s:?}: {item:?} is not a GPU count from 1 to {MAX_GPUS}"),
        };
        if !out.contains(&n) {
            out.push(n);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
