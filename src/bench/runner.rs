//! The runner: warm-up, then timed runs until both the minimum run count and
//! the time budget are met (or exactly N runs when only `--iters` is given).

use super::timer::{Stopwatch, Timer};
use crate::note::note;
use anyhow::Result;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How many times to run, decided from `--warmup`, `--iters`, `--min-time`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunPolicy {
    pub warmup: usize,
    /// At least this many timed runs.
    pub min_runs: usize,
    /// And keep going until this much time was spent in timed runs.
    pub min_time: Duration,
    /// Never more than this many timed runs.
    pub max_runs: usize,
}

impl RunPolicy {
    pub const DEFAULT_WARMUP: usize = 3;
    pub const DEFAULT_RUNS: usize = 10;
    pub const DEFAULT_MIN_TIME: f64 = 1.0;
    /// Caps the sample memory (8 MB) for very fast problems and long
    /// budgets; `--iters` and `--warmup` above it are refused.
    pub const MAX_RUNS: usize = 1_000_000;
    /// The longest `--min-time`: a day per problem and direction.
    pub const MAX_MIN_TIME: f64 = 86_400.0;

    /// Defaults: at least 10 runs and at least 1 s. An explicit `iters` alone
    /// means exactly that many runs; with `min_time` too, both must be met.
    pub fn from_options(
        warmup: Option<usize>,
        iters: Option<usize>,
        min_time: Option<f64>,
    ) -> RunPolicy {
        let warmup = warmup.unwrap_or(Self::DEFAULT_WARMUP);
        match (iters, min_time) {
            (Some(n), None) => RunPolicy {
                warmup,
                min_runs: n,
                min_time: Duration::ZERO,
                max_runs: n,
            },
            (n, t) => RunPolicy {
                warmup,
                min_runs: n.unwrap_or(Self::DEFAULT_RUNS),
                min_time: Duration::from_secs_f64(t.unwrap_or(Self::DEFAULT_MIN_TIME)),
                max_runs: Self::MAX_RUNS,
            },
        }
    }
}

/// Runs closures under a policy, stopping early when interrupted.
pub struct Runner<'a> {
    pub policy: RunPolicy,
    pub interrupted: &'a AtomicBool,
}

impl Runner<'static> {
    /// The one timing loop under `policy`, stopping at a stop signal
    /// (SIGINT, SIGTERM, SIGHUP: [`crate::signals`]).
    pub fn until_signal(policy: RunPolicy) -> Self {
        Runner {
            policy,
            interrupted: crate::signals::stop_flag(),
        }
    }
}

/// Timed samples in milliseconds; `interrupted` when Ctrl-C cut it short.
pub struct Samples {
    pub ms: Vec<f64>,
    pub interrupted: bool,
}

impl Runner<'_> {
    /// Runs `f` under the policy; the first error from `f` or the timer
    /// stops the run.
    pub fn run(&self, timer: &mut dyn Timer, f: &mut dyn FnMut() -> Result<()>) -> Result<Samples> {
        let stop = || self.interrupted.load(Ordering::Relaxed);
        for _ in 0..self.policy.warmup {
            if stop() {
                return Ok(Samples {
                    ms: vec![],
                    interrupted: true,
                });
            }
            f()?;
        }
        let mut ms = Vec::with_capacity(self.policy.min_runs.min(4096));
        let start = Stopwatch::start();
        while ms.len() < self.policy.max_runs
            && (ms.len() < self.policy.min_runs || start.elapsed() < self.policy.min_time)
        {
            if stop() {
                return Ok(Samples {
                    ms,
                    interrupted: true,
                });
            }
            ms.push(timer.time_ms(f)?);
        }
        if ms.len() == RunPolicy::MAX_RUNS && start.elapsed() < self.policy.min_time {
            note_run_cap();
        }
        Ok(Samples {
            ms,
            interrupted: false,
        })
    }
}

/// Says once per process that the run cap, not `--min-time`, ended a
/// problem's timing.
fn note_run_cap() {
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        note!(
            "cnnbench: note: timing stopped at the cap of {} runs before --min-time was spent",
            RunPolicy::MAX_RUNS
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::timer::WallClock;

    #[test]
    fn policy_from_options() {
        let d = RunPolicy::from_options(None, None, None);
        assert_eq!(
            (d.warmup, d.min_runs, d.min_time),
            (3, 10, Duration::from_secs(1))
        );
        let exact = RunPolicy::from_options(Some(0), Some(5), None);
        assert_eq!(
            (exact.warmup, exact.min_runs, exact.max_runs, exact.min_time),
            (0, 5, 5, Duration::ZERO)
        );
        let both = RunPolicy::from_options(None, Some(5), Some(0.5));
        assert_eq!(
            (both.min_runs, both.min_time),
            (5, Duration::from_millis(500))
        );
        assert!(both.max_runs > 5);
    }

    #[test]
    fn exact_runs_and_warmup_are_counted() {
        let flag = AtomicBool::new(false);
        let runner = Runner {
            policy: RunPolicy::from_options(Some(2), Some(7), None),
            interrupted: &flag,
        };
        let mut calls = 0;
        let s = runner
            .run(&mut WallClock, &mut || {
                calls += 1;
                Ok(())
            })
            .unwrap();
        assert_eq!((s.ms.len(), calls, s.interrupted), (7, 9, false));
    }

    #[test]
    fn time_budget_extends_the_run() {
        let flag = AtomicBool::new(false);
        let runner = Runner {
            policy: RunPolicy::from_options(Some(0), Some(2), Some(0.03)),
            interrupted: &flag,
        };
        let s = runner
            .run(&mut WallClock, &mut || {
                std::thread::sleep(Duration::from_millis(5));
                Ok(())
            })
            .unwrap();
        assert!(s.ms.len() >= 5, "{}", s.ms.len());
        assert!(s.ms.iter().all(|&m| m >= 4.0));
    }

    #[test]
    fn interruption_keeps_what_was_timed() {
        let flag = AtomicBool::new(false);
        let runner = Runner {
            policy: RunPolicy::from_options(Some(0), Some(100), None),
            interrupted: &flag,
        };
        let mut n = 0;
        let s = runner
            .run(&mut WallClock, &mut || {
                n += 1;
                if n == 4 {
                    flag.store(true, Ordering::Relaxed);
                }
                Ok(())
            })
            .unwrap();
        assert!(s.interrupted);
        assert_eq!(s.ms.len(), 4);
    }

    #[test]
    fn errors_stop_the_run() {
        let flag = AtomicBool::new(false);
        let runner = Runner {
            policy: RunPolicy::from_options(Some(1), Some(10), None),
            interrupted: &flag,
        };
        let mut n = 0;
        let e = runner.run(&mut WallClock, &mut || {
            n += 1;
            anyhow::ensure!(
                n < 3,
                "cudnnConvolutionForward failed: CUDNN_STATUS_EXECUTION_FAILED"
            );
            Ok(())
        });
        assert!(e.is_err());
        assert_eq!(n, 3);
    }
}
