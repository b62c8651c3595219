//! The one place where measurements read the clock: [`Stopwatch`], a
//! monotonic stopwatch under every timing in the workspace (the loader's
//! stages and batches, the kernels' calibrations, the CPU backend's timing
//! events, the benchmark's wall-clock timer and runner). It sits at the
//! bottom so that every crate can use it. Deadlines (how long to wait for a
//! child or a peer) measure nothing that is reported and may read
//! `std::time::Instant` themselves.

use std::time::{Duration, Instant};

/// A start on the host's monotonic clock (`std::time::Instant`).
#[derive(Clone, Copy, Debug)]
pub struct Stopwatch(Instant);

impl Stopwatch {
    /// Started now.
    pub fn start() -> Stopwatch {
        Stopwatch(Instant::now())
    }

    /// The time since the start.
    pub fn elapsed(&self) -> Duration {
        self.0.elapsed()
    }

    /// [`elapsed`](Self::elapsed) in seconds.
    pub fn elapsed_s(&self) -> f64 {
        self.elapsed().as_secs_f64()
    }

    /// [`elapsed`](Self::elapsed) in milliseconds.
    pub fn elapsed_ms(&self) -> f64 {
        self.elapsed_s() * 1e3
    }

    /// The time since the start (or the last lap), and a new start at that
    /// same reading: consecutive stages timed with one clock read each.
    pub fn lap(&mut self) -> Duration {
        let now = Instant::now();
        let d = now.duration_since(self.0);
        self.0 = now;
        d
    }

    /// From this start to `later`'s (zero if `later` started first).
    pub fn until(&self, later: &Stopwatch) -> Duration {
        later.0.duration_since(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn laps_add_up_to_the_whole() {
        let whole = Stopwatch::start();
        let mut sw = whole;
        let a = sw.lap();
        std::thread::sleep(Duration::from_millis(2));
        let b = sw.lap();
        assert!(b >= Duration::from_millis(2));
        assert_eq!(whole.until(&sw), a + b);
        assert!(whole.elapsed() >= a + b);
        assert_eq!(sw.until(&whole), Duration::ZERO, "an earlier start is zero");
    }
}
