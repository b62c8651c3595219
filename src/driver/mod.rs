//! The one loop every timed case goes through, whatever the subcommand
//! (`conv` on the CPU or a GPU, `gemm`, `model`): the case is prepared
//! before (plans made, algorithms chosen, buffers allocated: nothing of it
//! timed), then timed by the one runner ([`Runner`]) on the case's clock,
//! then its outputs (those of the timed runs, poisoned before them) are
//! checked against the reference where asked, and the record is made,
//! complete, from the samples.

pub mod allreduce;
pub mod check;
pub mod compare;
pub mod context;
pub mod conv;
pub mod data;
pub mod gemm;
pub mod gpu;
pub mod info;
pub mod model;
pub mod replicas;
pub mod rnn;
pub mod roofline;

use crate::bench::timer::Timer;
use crate::bench::{Runner, Samples};
use crate::results::Check;
use anyhow::Result;

pub trait Case {
    type Record;

    /// One run of the timed work.
    fn run(&mut self) -> Result<()>;

    /// After the timed runs: their outputs against the reference (`None`
    /// when not asked).
    fn check(&mut self) -> Result<Option<Check>> {
        Ok(None)
    }

    /// The record of the timed runs (`samples` holds at least one).
    fn record(&mut self, samples: &Samples, check: Option<Check>) -> Result<Self::Record>;
}

/// Times `case` on `timer`, checks it and makes its record; `None` when
/// Ctrl-C cut the timed runs short (nothing half-measured is recorded).
pub fn drive<C: Case + ?Sized>(
    case: &mut C,
    runner: &Runner,
    timer: &mut dyn Timer,
) -> Result<Option<C::Record>> {
    let samples = runner.run(timer, &mut || case.run())?;
    if samples.interrupted || samples.ms.is_empty() {
        return Ok(None);
    }
    let check = case.check()?;
    case.record(&samples, check).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::timer::WallClock;
    use crate::bench::RunPolicy;
    use std::sync::atomic::AtomicBool;

    struct Counting {
        runs: usize,
        checked_after: Option<usize>,
    }

    impl Case for Counting {
        type Record = (usize, usize);

        fn run(&mut self) -> Result<()> {
            self.runs += 1;
            Ok(())
        }

        fn check(&mut self) -> Result<Option<Check>> {
            self.checked_after = Some(self.runs);
            Ok(None)
        }

        fn record(&mut self, s: &Samples, _: Option<Check>) -> Result<(usize, usize)> {
            Ok((s.ms.len(), self.runs))
        }
    }

    #[test]
    fn warm_up_then_timed_runs_then_the_check_then_the_record() {
        let flag = AtomicBool::new(false);
        let runner = Runner {
            policy: RunPolicy::from_options(Some(2), Some(5), None),
            interrupted: &flag,
        };
        let mut c = Counting {
            runs: 0,
            checked_after: None,
        };
        let rec = drive(&mut c, &runner, &mut WallClock).unwrap();
        assert_eq!(rec, Some((5, 7)));
        assert_eq!(
            c.checked_after,
            Some(7),
            "the check reads the timed runs' outputs"
        );
        flag.store(true, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(drive(&mut c, &runner, &mut WallClock).unwrap(), None);
    }
}
