//! Whole-model training steps through the one driver loop: each step
//! timed on its backend's clock, phase by phase and layer by layer.

use super::input::Feed;
use super::timed::{Phases, Timed};
use crate::bench::timer::Timer;
use crate::bench::{RunPolicy, Runner, Samples};
use crate::driver::{self, Case};
use crate::results::Check;
use anyhow::Result;
use cnnbench_layers::core::backend::Backend;
use cnnbench_layers::net::{Executor, GradientHook, Graph};
use std::cell::Cell;

/// What the timing loop needs from a backend.
pub trait Steps {
    /// One training step, phase by phase.
    fn step(&mut self) -> Result<Phases>;
    /// Node `i`'s forward and backward milliseconds in the last step.
    fn layer_ms(&self, i: usize) -> (f64, f64);
}

/// A network on any backend, stepped by the one executor: phases and
/// layers timed on the backend's clock (host clock on the CPU, CUDA events
/// on a GPU).
pub struct NetSteps<B: Backend> {
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
            whole: 0.0,
        })
    }

    fn layer_ms(&self, i: usize) -> (f64, f64) {
        (self.net.fwd_ms[i], self.net.bwd_ms[i])
    }
}

/// Times training steps through the one driver loop: at least one
/// warm-up step (the CPU's first step picks each convolution's algorithm),
/// then timed steps under the policy. Each step is timed on the backend's
/// clock (host clock on the CPU, CUDA events on a GPU), phase by phase
/// and, where asked, layer by layer; `None` when interrupted.
pub fn time_steps(
    g: &Graph,
    s: &mut dyn Steps,
    policy: RunPolicy,
    bar: &indicatif::ProgressBar,
) -> Result<Option<Timed>> {
    let warmup = policy.warmup.max(1);
    let runner = Runner::until_signal(RunPolicy { warmup, ..policy });
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
pub fn fixed_steps(
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
        all.push(t, |i| s.layer_ms(i));
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
        let steps = &*self.steps;
        self.all.push(t, |i| steps.layer_ms(i));
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
