//! The machine's FP32 peak, measured with a register-only FMA loop per ISA.
//!
//! Each loop keeps enough independent accumulators in flight to cover the FMA
//! latency on both FMA ports, touches no memory, and reports FLOP/s
//! (an FMA counts as two FLOPs).

use crate::Isa;

/// Repetitions whose best is reported: a peak is a best case, and on a
/// shared machine a short loop is easily slowed down, never sped up.
pub const DEFAULT_REPS: usize = 20;

/// FMAs per accumulator per call of [`fma_loop`].
const ITERS: u64 = 1 << 20;
/// Independent accumulators: latency (4) x ports (2), with headroom.
const ACCS: u64 = 12;

/// FLOPs done by one call of the loop for `isa`.
fn flops_per_call(isa: Isa) -> f64 {
    (ITERS * ACCS * 2 * isa.f32_lanes() as u64) as f64
}

/// Run the FMA loop once on the calling thread; returns a value that depends
/// on every accumulator so the work can't be optimised away.
pub fn fma_loop(isa: Isa) -> f32 {
    assert!(isa.is_supported(), "{isa} is not supported on this CPU");
    match isa {
        Isa::Scalar => scalar_fma_loop(),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { x86::avx2_fma_loop() },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { x86::avx512_fma_loop() },
        #[cfg(not(target_arch = "x86_64"))]
        _ => unreachable!(),
    }
}

fn scalar_fma_loop() -> f32 {
    let mut acc = [0f32; ACCS as usize];
    let (a, b) = (
        std::hint::black_box(0.999_999f32),
        std::hint::black_box(1e-7f32),
    );
    for _ in 0..ITERS {
        // Multiply then add: `mul_add` without the FMA target feature is a
        // slow libm call, and the scalar kernels don't use it either.
        for x in acc.iter_mut() {
            *x = *x * a + b;
        }
    }
    acc.iter().sum()
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{ACCS, ITERS};
    use std::arch::x86_64::*;

    macro_rules! fma_loop_body {
        ($set1:ident, $fma:ident, $add:ident, $zero:ident, $reduce:expr) => {{
            let a = $set1(std::hint::black_box(0.999_999f32));
            let b = $set1(std::hint::black_box(1e-7f32));
            let mut acc = [$zero(); ACCS as usize];
            for _ in 0..ITERS {
                // Unrolled by the compiler: ACCS independent chains.
                for x in acc.iter_mut() {
                    *x = $fma(*x, a, b);
                }
            }
            let mut sum = $zero();
            for x in acc {
                sum = $add(sum, x);
            }
            $reduce(sum)
        }};
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn avx2_fma_loop() -> f32 {
        fma_loop_body!(
            _mm256_set1_ps,
            _mm256_fmadd_ps,
            _mm256_add_ps,
            _mm256_setzero_ps,
            |v: __m256| {
                let mut out = [0f32; 8];
                _mm256_storeu_ps(out.as_mut_ptr(), v);
                out.iter().sum::<f32>()
            }
        )
    }

    #[target_feature(enable = "avx512f")]
    pub unsafe fn avx512_fma_loop() -> f32 {
        fma_loop_body!(
            _mm512_set1_ps,
            _mm512_fmadd_ps,
            _mm512_add_ps,
            _mm512_setzero_ps,
            |v| { _mm512_reduce_add_ps(v) }
        )
    }
}

/// Measured FP32 peak of `threads` threads running the loop at once, in
/// GFLOP/s: the best of `reps` repetitions (peak means best case), each
/// timed by `seconds` (the caller's clock: the binary's one timer).
///
/// Runs on rayon's global pool when it has exactly `threads` threads (as
/// after `--threads N`), on the calling thread for 1, and otherwise on a
/// short-lived pool of its own, never nested in another.
pub fn measure_gflops(
    isa: Isa,
    threads: usize,
    reps: usize,
    seconds: &dyn Fn(&mut dyn FnMut()) -> f64,
) -> Result<f64, String> {
    let run_once = |pool: Option<&rayon::ThreadPool>| -> f64 {
        let mut sink = 0f32;
        let secs = seconds(&mut || {
            sink = match (threads, pool) {
                (1, _) => fma_loop(isa),
                (_, Some(pool)) => pool.broadcast(|_| fma_loop(isa)).iter().sum(),
                (_, None) => rayon::broadcast(|_| fma_loop(isa)).iter().sum(),
            };
        });
        std::hint::black_box(sink);
        flops_per_call(isa) * threads as f64 / secs / 1e9
    };
    let own_pool = if threads > 1 && threads != rayon::current_num_threads() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .map_err(|e| format!("cannot start {threads} threads for the peak measurement: {e}"))?;
        Some(pool)
    } else {
        None
    };
    run_once(own_pool.as_ref()); // warm up clocks and page in code
    Ok((0..reps.max(1))
        .map(|_| run_once(own_pool.as_ref()))
        .fold(0.0, f64::max))
}
