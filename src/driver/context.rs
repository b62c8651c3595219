//! What the command line hands a measuring pipeline once its session has
//! started (`conv`, `gemm`, `rnn`): the worker threads, the progress bar
//! and the one timing loop.

use crate::bench::Runner;
use indicatif::ProgressBar;

pub struct Context<'a> {
    /// Worker threads (rayon's global pool has this many).
    pub threads: usize,
    /// Progress on stderr (hidden with `--quiet`, or off a terminal).
    pub bar: &'a ProgressBar,
    /// The one timing loop under the run's policy, stopping at a stop
    /// signal.
    pub runner: Runner<'static>,
}
