//! The milliseconds of a model's timed training steps, phase by phase and
//! layer by layer, and the record made from them: what the steps, the
//! input feed and the data-parallel replicas share (it uses none of them).

use super::options::StepOptions;
use super::record::step_flops;
use crate::bench::Stats;
use crate::note::note;
use crate::results::roofline::{LayerRoofline, PassRoofline};
use crate::results::{LayerTime, MemoryBytes, ModelRecord};
use cnnbench_layers::net::traffic::node_flops;
use cnnbench_layers::net::Graph;
use cnnbench_layers::ops::spec::Traffic;

/// One step's milliseconds per phase.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Phases {
    /// Making the batch staged during the step before the input, then
    /// waiting for the loader's next batch and staging it (host clock; 0
    /// with synthetic input, which is set once).
    pub input: f64,
    pub forward: f64,
    pub backward: f64,
    /// The exposed gradient exchange of a data-parallel step (else 0).
    pub exchange: f64,
    pub update: f64,
    /// A step replayed from a CUDA graph (`--cuda-graph`): the whole step
    /// (forward, backward and update are then 0: not observable apart
    /// inside a graph); 0 for an eager step.
    pub whole: f64,
}

impl Phases {
    pub fn total(&self) -> f64 {
        self.input + self.forward + self.backward + self.exchange + self.update + self.whole
    }
}

/// The timed steps' milliseconds, per phase and per layer.
#[derive(Default, Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Timed {
    inp: Vec<f64>,
    fwd: Vec<f64>,
    bwd: Vec<f64>,
    xchg: Vec<f64>,
    upd: Vec<f64>,
    total: Vec<f64>,
    layer_f: Vec<Vec<f64>>,
    layer_b: Vec<Vec<f64>>,
}

impl Timed {
    pub fn empty(nodes: usize) -> Timed {
        Timed {
            layer_f: vec![Vec::new(); nodes],
            layer_b: vec![Vec::new(); nodes],
            ..Timed::default()
        }
    }

    /// Keeps one step's phases and its layers' times (node `i`'s forward
    /// and backward milliseconds from `layer_ms(i)`).
    pub fn push(&mut self, t: Phases, layer_ms: impl Fn(usize) -> (f64, f64)) {
        self.inp.push(t.input);
        self.fwd.push(t.forward);
        self.bwd.push(t.backward);
        self.xchg.push(t.exchange);
        self.upd.push(t.update);
        self.total.push(t.total());
        for i in 0..self.layer_f.len() {
            let (lf, lb) = layer_ms(i);
            self.layer_f[i].push(lf);
            self.layer_b[i].push(lb);
        }
    }

    /// How many timed steps.
    pub fn runs(&self) -> usize {
        self.total.len()
    }

    /// The median step (forward, backward, exchange and update).
    pub fn median_step(&self) -> f64 {
        median(&self.total)
    }

    /// Each step's total.
    pub fn totals(&self) -> &[f64] {
        &self.total
    }

    /// Each step's wait for its input batch.
    pub fn input(&self) -> &[f64] {
        &self.inp
    }

    /// The exposed gradient exchange per step.
    pub fn exchange(&self) -> &[f64] {
        &self.xchg
    }

    /// A data-parallel step as the replicas ran it: each step takes as
    /// long as its slowest replica (they meet in every all-reduce); the
    /// phases and layers are the first replica's.
    pub fn slowest_of(mut replicas: Vec<Timed>) -> Option<Timed> {
        let mut out = replicas.first()?.clone();
        for r in replicas.drain(1..) {
            for (t, rt) in out.total.iter_mut().zip(&r.total) {
                *t = t.max(*rt);
            }
            for (x, rx) in out.xchg.iter_mut().zip(&r.xchg) {
                *x = x.max(*rx);
            }
        }
        Some(out)
    }

    /// The last `k` steps.
    pub fn last(self, k: usize) -> Timed {
        let tail = |v: Vec<f64>| v[v.len().saturating_sub(k)..].to_vec();
        Timed {
            inp: tail(self.inp),
            fwd: tail(self.fwd),
            bwd: tail(self.bwd),
            xchg: tail(self.xchg),
            upd: tail(self.upd),
            total: tail(self.total),
            layer_f: self.layer_f.into_iter().map(tail).collect(),
            layer_b: self.layer_b.into_iter().map(tail).collect(),
        }
    }

    /// The record: statistics, throughput (of `replicas` GPUs, each on
    /// its own batch), the loss, memory and (with `--per-layer`) the layer
    /// table, with each row's bytes, FLOPs and rates where `traffic` is
    /// given (placed on the roofline later, against the run's basis).
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &self,
        g: &Graph,
        opts: &StepOptions,
        mut rec: ModelRecord,
        loss: f32,
        memory: MemoryBytes,
        kernels: impl Fn(usize) -> String,
        traffic: Option<&RowTraffic>,
        replicas: usize,
    ) -> ModelRecord {
        if !loss.is_finite() {
            note!("cnnbench: warning: {}: the loss is {loss}", g.name);
        }
        let stats = |v: &[f64]| Stats::of(v).expect("at least one timed step");
        let total_s = stats(&self.total);
        rec.forward_ms = Some(stats(&self.fwd));
        rec.backward_ms = Some(stats(&self.bwd));
        rec.update_ms = opts.update.then(|| stats(&self.upd));
        rec.total_ms = Some(total_s);
        let images = (replicas * opts.batch) as f64;
        rec.images_per_sec = Some(images / (total_s.median / 1e3));
        rec.gflops =
            Some(replicas as f64 * step_flops(g, opts.batch) as f64 / (total_s.median * 1e6));
        rec.runs = self.fwd.len();
        rec.loss = Some(loss);
        rec.memory = Some(memory);
        if opts.per_layer {
            for (i, node) in g.nodes.iter().enumerate().skip(1) {
                let (f, b) = (median(&self.layer_f[i]), median(&self.layer_b[i]));
                rec.layers.push(LayerTime {
                    name: node.name.clone(),
                    kind: node.op.kind().into(),
                    output: node.out.to_string(),
                    forward_ms: f,
                    backward_ms: b,
                    percent: 100.0 * (f + b) / total_s.median,
                    kernels: kernels(i),
                    roofline: traffic.map(|t| layer_roofline(g, i, t, opts.batch, f, b)),
                });
            }
        }
        rec
    }
}

/// Each row's least traffic (`net::traffic::row_traffic`, in elements)
/// and the bytes an element takes in the run.
pub struct RowTraffic {
    pub rows: Vec<Traffic>,
    pub element_bytes: usize,
}

/// Row `i`'s passes: bytes at `batch`, FLOPs, and their rates over the
/// median forward (`f`) and backward (`b`) milliseconds.
fn layer_roofline(
    g: &Graph,
    i: usize,
    t: &RowTraffic,
    batch: usize,
    f: f64,
    b: f64,
) -> LayerRoofline {
    let row = t.rows.get(i).copied().unwrap_or_default();
    let (ff, bf) = node_flops(g, i);
    let n = batch as u64;
    LayerRoofline {
        forward: PassRoofline::timed(row.forward.bytes(batch, t.element_bytes), ff * n, f),
        backward: PassRoofline::timed(row.backward.bytes(batch, t.element_bytes), bf * n, b),
    }
}

pub fn median(v: &[f64]) -> f64 {
    Stats::of(v).map_or(0.0, |s| s.median)
}
