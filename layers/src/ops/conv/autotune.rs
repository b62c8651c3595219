//! The one rule that picks a CPU convolution algorithm, for `conv --algo
//! auto` and for every convolution layer of a model alike: short timed
//! trials of every candidate, interleaved over a few rounds so that a slow
//! spell of a shared machine hits them alike. The lowest time wins, since
//! noise only ever adds time. The trials run untimed by the benchmark (the
//! model's first step, `conv`'s set-up).

use crate::backend::cpu::time_ms;

/// Rounds over all the candidates.
pub const ROUNDS: usize = 3;
/// In each round a candidate runs until it has used this many
/// milliseconds (at least once, at most [`MAX_RUNS`] times).
pub const ROUND_MS: f64 = 30.0;
pub const MAX_RUNS: usize = 10;

/// The index of the fastest of `n` candidates, where `run(k)` runs
/// candidate `k` once; `stop()` ends the trials early (Ctrl-C), with the
/// fastest so far.
pub fn fastest(n: usize, run: &mut dyn FnMut(usize), stop: &dyn Fn() -> bool) -> usize {
    if n <= 1 {
        return 0;
    }
    let mut best = vec![f64::INFINITY; n];
    'rounds: for _ in 0..ROUNDS {
        for (k, best) in best.iter_mut().enumerate() {
            let mut spent = 0.0;
            for _ in 0..MAX_RUNS {
                if stop() {
                    break 'rounds;
                }
                let ms = time_ms(|| run(k));
                *best = best.min(ms);
                spent += ms;
                if spent >= ROUND_MS {
                    break;
                }
            }
        }
    }
    (0..n)
        .min_by(|&a, &b| best[a].total_cmp(&best[b]))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn the_lowest_time_wins_and_every_candidate_runs_each_round() {
        let runs = Cell::new([0usize; 3]);
        let mut run = |k: usize| {
            let mut r = runs.get();
            r[k] += 1;
            runs.set(r);
            // Candidate 1 is the slow one.
            std::thread::sleep(std::time::Duration::from_millis(if k == 1 { 4 } else { 1 }));
        };
        let won = fastest(3, &mut run, &|| false);
        assert_ne!(won, 1);
        assert!(runs.get().iter().all(|&r| r >= ROUNDS), "{:?}", runs.get());
        assert_eq!(fastest(1, &mut |_| panic!("nothing to try"), &|| false), 0);
        // Stopped before the first trial: the first candidate.
        assert_eq!(fastest(3, &mut |_| {}, &|| true), 0);
    }
}
