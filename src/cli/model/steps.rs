//! Whole-model training steps through the one driver loop: each step
//! timed on its backend's clock, phase by phase and layer by layer.

use super::input::Feed;
use super::{step_flops, ModelArgs};
use crate::bench::timer::Timer;
use crate::bench::{RunPolicy, Samples, Stats};
use crate::cli::session;
use crate::driver::{self, Case};
use crate::note::note;
use crate::results::{Check, LayerTime, MemoryBytes, ModelRecord};
use anyhow::Result;
use cnnbench_layers::core::backend::Backend;
use cnnbench_layers::net::{Executor, GradientHook, Graph};
use std::cell::Cell;

/// One step's milliseconds per phase.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Phases {
    /// Making the batch staged during the step before the input, then
    /// waiting for the loader's next batch and staging it (host clock; 0
    /// with synthetic input, which is set once).
    pub input: f64,
    pub forward: f64,
    pub backward: f64,
    /// The exposed gradient exchange of a data-parallel step (else 0).
    pub exchange: f64,
    pub update: f64,
}

impl Phases {
    fn total(&self) -> f64 {
        self.input + self.forward + self.backward + self.exchange + self.update
    }
}

/// What the timing loop needs from a backend.
pub(crate) trait Steps {
    /// One training step, phase by phase.
    fn step(&mut self) -> Result<Phases>;
    /// Node `i`'s forward and backward milliseconds in the last step.
    fn layer_ms(&self, i: usize) -> (f64, f64);
}

/// A network on any backend, stepped by the one executor: phases and
/// layers timed on the backend's clock (host clock on the CPU, CUDA events
/// on a GPU).
pub(crate) struct NetSteps<B: Backend> {
    pub net: Executor<B>,
    pub update: bool,
    /// The gradient exchange of a data-parallel step.
    pub hook: Option<Box<dyn GradientHook>>,
    /// Real input: each step first takes the loader's next batch.
    pub feed: Option<Feed>,
}

impl<B: Backend> Steps for NetSteps<B> {
    fn step(&mut self) -> Result<Phases> {
        let input = match &mut self.feed {
            Some(feed) => feed.next_into(&mut self.net)?,
            None => 0.0,
        };
        let hook = self.hook.as_deref_mut().map(|h| h as &mut dyn GradientHook);
        let t = self
            .net
            .step_hooked(self.update.then_some((0.01, 0.9)), hook)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(Phases {
            input,
            forward: t.forward,
            backward: t.backward,
            exchange: t.exchange,
            update: t.update,
        })
    }

    fn layer_ms(&self, i: usize) -> (f64, f64) {
        (self.net.fwd_ms[i], self.net.bwd_ms[i])
    }
}

/// The timed steps' milliseconds, per phase and per layer.
#[derive(Default, Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Timed {
    inp: Vec<f64>,
    fwd: Vec<f64>,
    bwd: Vec<f64>,
    xchg: Vec<f64>,
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
        all: Timed::empty(n),
    };
    driver::drive(&mut case, &runner, &mut StepClock(&step_ms))
}

/// Exactly `warmup` then `runs` steps, never cut short: every replica of a
/// data-parallel run must take part in every step's all-reduce, so none
/// may stop on its own (a stop signal takes effect after them).
pub(crate) fn fixed_steps(
    g: &Graph,
    s: &mut dyn Steps,
    warmup: usize,
    runs: usize,
    bar: Option<&indicatif::ProgressBar>,
) -> Result<Timed> {
    let mut all = Timed::empty(g.nodes.len());
    for k in 0..warmup + runs {
        if let Some(bar) = bar {
            bar.set_message(if k < warmup {
                format!("{}: data-parallel warm-up step {}", g.name, k + 1)
            } else {
                format!(
                    "{}: data-parallel step {} of {runs}",
                    g.name,
                    k + 1 - warmup
                )
            });
        }
        let t = s.step()?;
        all.push(t, &*s);
    }
    Ok(all.last(runs))
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
        let t = self.steps.step()?;
        self.all.push(t, &*self.steps);
        self.step_ms.set(t.total());
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
    fn empty(nodes: usize) -> Timed {
        Timed {
            layer_f: vec![Vec::new(); nodes],
            layer_b: vec![Vec::new(); nodes],
            ..Timed::default()
        }
    }

    /// Keeps one step's phases and its layers' times.
    fn push(&mut self, t: Phases, s: &dyn Steps) {
        self.inp.push(t.input);
        self.fwd.push(t.forward);
        self.bwd.push(t.backward);
        self.xchg.push(t.exchange);
        self.upd.push(t.update);
        self.total.push(t.total());
        for i in 0..self.layer_f.len() {
            let (lf, lb) = s.layer_ms(i);
            self.layer_f[i].push(lf);
            self.layer_b[i].push(lb);
        }
    }

    /// How many timed steps.
    pub(crate) fn runs(&self) -> usize {
        self.total.len()
    }

    /// The median step (forward, backward, exchange and update).
    pub(crate) fn median_step(&self) -> f64 {
        median(&self.total)
    }

    /// Each step's wait for its input batch.
    pub(crate) fn input(&self) -> &[f64] {
        &self.inp
    }

    /// The exposed gradient exchange per step.
    pub(crate) fn exchange(&self) -> &[f64] {
        &self.xchg
    }

    /// A data-parallel step as the replicas ran it: each step takes as
    /// long as its slowest replica (they meet in every all-reduce); the
    /// phases and layers are the first replica's.
    pub(crate) fn slowest_of(mut replicas: Vec<Timed>) -> Option<Timed> {
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
    fn last(self, k: usize) -> Timed {
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
    /// table.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn record(
        &self,
        g: &Graph,
        args: &ModelArgs,
        mut rec: ModelRecord,
        loss: f32,
        memory: MemoryBytes,
        kernels: impl Fn(usize) -> String,
        replicas: usize,
    ) -> ModelRecord {
        if !loss.is_finite() {
            note!("cnnbench: warning: {}: the loss is {loss}", g.name);
        }
        let stats = |v: &[f64]| Stats::of(v).expect("at least one timed step");
        let total_s = stats(&self.total);
        rec.forward_ms = Some(stats(&self.fwd));
        rec.backward_ms = Some(stats(&self.bwd));
        rec.update_ms = args.update.is_some().then(|| stats(&self.upd));
        rec.total_ms = Some(total_s);
        let images = (replicas * args.batch) as f64;
        rec.images_per_sec = Some(images / (total_s.median / 1e3));
        rec.gflops =
            Some(replicas as f64 * step_flops(g, args.batch) as f64 / (total_s.median * 1e6));
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
