//! Timers. The CPU path is synchronous, so a monotonic wall clock around the
//! call measures exactly the work; the GPU path will time with CUDA events.

use std::time::Instant;

/// Measures one call of a closure, in milliseconds.
pub trait Timer {
    fn time_ms(&mut self, f: &mut dyn FnMut()) -> f64;
    /// What this timer measures, for the results' metadata.
    fn describe(&self) -> &'static str;
}

/// `std::time::Instant` around a synchronous call.
pub struct WallClock;

impl Timer for WallClock {
    fn time_ms(&mut self, f: &mut dyn FnMut()) -> f64 {
        let t0 = Instant::now();
        f();
        t0.elapsed().as_secs_f64() * 1e3
    }
    fn describe(&self) -> &'static str {
        "wall clock (std::time::Instant) around each synchronous call"
    }
}
