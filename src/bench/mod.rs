//! Timing: timers, the runner (warm-up, iterations, time budget) and
//! statistics over the samples.

pub mod runner;
pub mod stats;
pub mod timer;

pub use runner::{RunPolicy, Runner, Samples};
pub use stats::Stats;
