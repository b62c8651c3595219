//! Plain against non-temporal stores ([`stream::rows_out`]) for passes
//! over tensors larger than the caches: ResNet-50's largest batch-16
//! tensors (12.8 M floats, 51 MB), median ms of 21 runs, the two variants
//! alternating.
//!
//!     cargo run --release -p cnnbench-kernels --example stream_stores

use cnnbench_kernels::simd::CHUNK;
use cnnbench_kernels::{on_isa, stream, Isa};
use rayon::prelude::*;
use std::time::Instant;

/// Rows of this many floats (one channel vector of a 256-channel layer).
const C: usize = 256;

fn median_ms(mut f: impl FnMut()) -> f64 {
    let mut ms: Vec<f64> = (0..21)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    ms[ms.len() / 2]
}

/// `y = max(x, 0)`.
fn relu(isa: Isa, stream: bool, x: &[f32], y: &mut [f32]) {
    y.par_chunks_mut(CHUNK)
        .zip(x.par_chunks(CHUNK))
        .for_each(|(y, x)| {
            on_isa!(
                isa,
                stream::rows_out(
                    isa,
                    C,
                    y,
                    stream,
                    #[inline(always)]
                    |r0, y| {
                        for (y, x) in y.iter_mut().zip(&x[r0 * C..]) {
                            *y = x.max(0.0);
                        }
                    }
                )
            )
        });
}

/// `y = 0.5·d + 2·x`: two tensors read, one written.
fn axpby(isa: Isa, stream: bool, x: &[f32], d: &[f32], y: &mut [f32]) {
    y.par_chunks_mut(CHUNK)
        .zip(x.par_chunks(CHUNK).zip(d.par_chunks(CHUNK)))
        .for_each(|(y, (x, d))| {
            on_isa!(
                isa,
                stream::rows_out(
                    isa,
                    C,
                    y,
                    stream,
                    #[inline(always)]
                    |r0, y| {
                        let (x, d) = (&x[r0 * C..], &d[r0 * C..]);
                        for ((y, x), d) in y.iter_mut().zip(x).zip(d) {
                            *y = 0.5 * d + 2.0 * x;
                        }
                    }
                )
            )
        });
}

fn main() {
    let isa = Isa::detect();
    let n = 16 * 256 * 56 * 56;
    let mb = (n * 4) as f64 / 1e6;
    println!(
        "ISA {isa:?}, {} threads, tensors of {mb:.0} MB",
        rayon::current_num_threads()
    );
    let x: Vec<f32> = (0..n).map(|i| (i % 7) as f32 - 3.0).collect();
    let d: Vec<f32> = (0..n).map(|i| (i % 5) as f32 - 3.0).collect();
    let mut y = vec![1.0f32; n];
    let mut times = [[Vec::new(), Vec::new()], [Vec::new(), Vec::new()]];
    for round in 0..4 {
        // Rounds alternate which goes first: ABBA ABBA.
        let order = if round % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for stream in order {
            let s = stream as usize;
            times[0][s].push(median_ms(|| relu(isa, stream, &x, &mut y)));
            times[1][s].push(median_ms(|| axpby(isa, stream, &x, &d, &mut y)));
        }
    }
    for (name, t, tensors) in [
        ("relu", &times[0], 2.0),
        ("read 2, write 1", &times[1], 3.0),
    ] {
        let med = |v: &Vec<f64>| {
            let mut v = v.clone();
            v.sort_by(f64::total_cmp);
            (v[(v.len() - 1) / 2] + v[v.len() / 2]) / 2.0
        };
        let (plain, nt) = (med(&t[0]), med(&t[1]));
        println!(
            "{name:16} plain {plain:6.2} ms ({:5.1} GB/s)  non-temporal {nt:6.2} ms ({:5.1} GB/s)  plain/non-temporal {:.2}",
            tensors * mb / plain,
            tensors * mb / nt,
            plain / nt
        );
    }
}
