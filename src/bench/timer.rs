//! Timers. The CPU path is synchronous, so a monotonic wall clock around the
//! call measures exactly the work; the GPU path times with CUDA events
//! recorded on the benchmark stream around the enqueued work. The wall
//! clock is the workspace's one [`Stopwatch`] (re-exported here for the
//! binary's measurements outside a [`Timer`]).

use anyhow::Result;
pub use cnnbench_kernels::clock::Stopwatch;
use cnnbench_layers::cuda::EventPair;

/// Measures one call of a closure, in milliseconds.
pub trait Timer {
    fn time_ms(&mut self, f: &mut dyn FnMut() -> Result<()>) -> Result<f64>;
    /// What this timer measures, for the results' metadata.
    fn describe(&self) -> &'static str;
}

/// The [`Stopwatch`] (`std::time::Instant`) around a synchronous call.
pub struct WallClock;

impl Timer for WallClock {
    fn time_ms(&mut self, f: &mut dyn FnMut() -> Result<()>) -> Result<f64> {
        let t0 = Stopwatch::start();
        f()?;
        Ok(t0.elapsed_ms())
    }
    fn describe(&self) -> &'static str {
        "wall clock (std::time::Instant) around each synchronous call"
    }
}

/// The CPU's FP32 peak in GFLOP/s (`kernels::peak`'s FMA loop, best of
/// `reps`), timed by [`WallClock`].
pub fn cpu_peak_gflops(isa: cnnbench_kernels::Isa, threads: usize, reps: usize) -> Result<f64> {
    let seconds = |f: &mut dyn FnMut()| {
        let t0 = Stopwatch::start();
        f();
        t0.elapsed_s()
    };
    cnnbench_kernels::peak::measure_gflops(isa, threads, reps, &seconds).map_err(anyhow::Error::msg)
}

/// CUDA events on the benchmark's non-blocking stream, one pair per run:
/// the GPU time of the enqueued work, without host launch gaps before it.
pub struct CudaEvents(pub EventPair);

impl CudaEvents {
    pub const DESCRIPTION: &'static str =
        "CUDA events recorded around each run on one non-blocking stream (GPU time)";
}

impl Timer for CudaEvents {
    fn time_ms(&mut self, f: &mut dyn FnMut() -> Result<()>) -> Result<f64> {
        self.0.time(f)
    }
    fn describe(&self) -> &'static str {
        Self::DESCRIPTION
    }
}
