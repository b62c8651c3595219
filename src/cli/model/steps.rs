//! Whole-model training steps through the one driver loop: each step
//! timed on its backend's clock, phase by phase and layer by layer.

use super::{step_flops, ModelArgs};
use crate::bench::timer::Timer;
use crate::bench::{RunPolicy, Samples, Stats};
use crate::cli::session;
use crate::driver::{self, Case};
use crate::results::{Check, LayerTime, MemoryBytes, ModelRecord};
use anyhow::Result;
use cnnbench_layers::core::backend::Backend;
use cnnbench_layers::net::{Executor, Graph};
use std::cell::Cell;

/// What the timing loop needs from a backend.
pub(crate) trait Steps {
    /// One training step: forward, backward and update milliseconds.
    fn step(&mut self) -> Result<[f64; 3]>;
    /// Node `i`'s forward and backward milliseconds in the last step.
    fn layer_ms(&self, i: usize) -> (f64, f64);
}

/// A network on any backend, stepped by the one executor: phases and
/// layers timed on the backend's clock (host clock on the CPU, CUDA events
/// on a GPU).
pub(crate) struct NetSteps<B: Backend> {
    pub net: Executor<B>,
    pub update: bool,
}

impl<B: Backend> Steps for NetSteps<B> {
    fn step(&mut self) -> Result<[f64; 3]> {
        let t = self
            .net
            .step(self.update.then_some((0.01, 0.9)))
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok([t.forward, t.backward, t.update])
    }

    fn layer_ms(&self, i: usize) -> (f64, f64) {
        (self.net.fwd_ms[i], self.net.bwd_ms[i])
    }
}

/// The timed steps' milliseconds, per phase and per layer.
#[derive(Default)]
pub(crate) struct Timed {
    fwd: Vec<f64>,
    bwd: Vec<f64>,
    upd: Vec<f64>,
    total: Vec<f64>,
    layer_f: Vec<Vec<f64>>,
    layer_b: Vec<Vec<f64>>,
}

/// Times training steps through the one driver loop: at least one
/// warm-up step (the CPU's first step picks each convolution's algorithm),
/// then timed steps under the policy. Each step is timed on the backend's
/// clock (host clock on the CPU, CUDA events on a GPU), phase by phase
/// and, where asked, layer by layer; `None` when interrupted.
pub(crate) fn time_steps(
    g: &Graph,
    s: &mut dyn Steps,
    policy: RunPolicy,
    bar: &indicatif::ProgressBar,
) -> Result<Option<Timed>> {
    let warmup = policy.warmup.max(1);
    let runner = session::runner(RunPolicy { warmup, ..policy });
    let step_ms = Cell::new(0.0);
    let n = g.nodes.len();
    let mut case = StepsCase {
        name: &g.name,
        steps: s,
        bar,
        warmup,
        calls: 0,
        step_ms: &step_ms,
        all: Timed {
            fwd: vec![],
            bwd: vec![],
            upd: vec![],
            total: vec![],
            layer_f: vec![Vec::new(); n],
            layer_b: vec![Vec::new(); n],
        },
    };
    driver::drive(&mut case, &runner, &mut StepClock(&step_ms))
}

/// Training steps of one network, every phase and layer kept.
struct StepsCase<'a> {
    name: &'a str,
    steps: &'a mut dyn Steps,
    bar: &'a indicatif::ProgressBar,
    warmup: usize,
    calls: usize,
    /// The last step's time, for [`StepClock`].
    step_ms: &'a Cell<f64>,
    all: Timed,
}

impl Case for StepsCase<'_> {
    type Record = Timed;

    fn run(&mut self) -> Result<()> {
        self.calls += 1;
        let (calls, warmup) = (self.calls, self.warmup);
        self.bar.set_message(if calls <= warmup {
            format!("{}: warm-up step {calls}", self.name)
        } else {
            format!("{}: step {}", self.name, calls - warmup)
        });
        let [f, b, u] = self.steps.step()?;
        let all = &mut self.all;
        all.fwd.push(f);
        all.bwd.push(b);
        all.upd.push(u);
        all.total.push(f + b + u);
        self.step_ms.set(f + b + u);
        for i in 0..all.layer_f.len() {
            let (lf, lb) = self.steps.layer_ms(i);
            all.layer_f[i].push(lf);
            all.layer_b[i].push(lb);
        }
        Ok(())
    }

    /// The warm-up steps came first; the record keeps the timed ones.
    fn record(&mut self, samples: &Samples, _check: Option<Check>) -> Result<Timed> {
        Ok(std::mem::take(&mut self.all).last(samples.ms.len()))
    }
}

/// A step's time as the step measured it on its backend's clock (the sum
/// of its phases, which the step leaves in the cell): the runner's timer
/// for whole models.
struct StepClock<'a>(&'a Cell<f64>);

impl Timer for StepClock<'_> {
    fn time_ms(&mut self, f: &mut dyn FnMut() -> Result<()>) -> Result<f64> {
        f()?;
        Ok(self.0.get())
    }

    fn describe(&self) -> &'static str {
        "each phase of a step on the backend's clock"
    }
}

impl Timed {
    /// The last `k` steps.
    fn last(self, k: usize) -> Timed {
        let tail = |v: Vec<f64>| v[v.len().saturating_sub(k)..].to_vec();
        Timed {
            fwd: tail(self.fwd),
            bwd: tail(self.bwd),
            upd: tail(self.upd),
            total: tail(self.total),
            layer_f: self.layer_f.into_iter().map(tail).collect(),
            layer_b: self.layer_b.into_iter().map(tail).collect(),
        }
    }

    /// The record: statistics, throughput, the loss, memory and (with
    /// `--per-layer`) the layer table.
    pub(crate) fn record(
        &self,
        g: &Graph,
        args: &ModelArgs,
        mut rec: ModelRecord,
        loss: f32,
        memory: MemoryBytes,
        kernels: impl Fn(usize) -> String,
    ) -> ModelRecord {
        if !loss.is_finite() {
            crate::note!("cnnbench: warning: {}: the loss is {loss}", g.name);
        }
        let stats = |v: &[f64]| Stats::of(v).expect("at least one timed step");
        let total_s = stats(&self.total);
        rec.forward_ms = Some(stats(&self.fwd));
        rec.backward_ms = Some(stats(&self.bwd));
        rec.update_ms = args.update.is_some().then(|| stats(&self.upd));
        rec.total_ms = Some(total_s);
        rec.images_per_sec = Some(args.batch as f64 / (total_s.median / 1e3));
        rec.gflops = Some(step_flops(g, args.batch) as f64 / (total_s.median * 1e6));
        rec.runs = self.fwd.len();
        rec.loss = Some(loss);
        rec.memory = Some(memory);
        if args.per_layer {
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
                });
            }
        }
        rec
    }
}

pub(crate) fn median(v: &[f64]) -> f64 {
    Stats::of(v).map_or(0.0, |s| s.median)
}
