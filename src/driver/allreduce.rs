//! `cnnbench allreduce`'s measurement: NCCL's all-reduce over message
//! sizes, f32/f16/bf16, in place and out of place, on every replica
//! ([`Replicas`]). Bandwidths follow nccl-tests' definitions at every
//! world size: algorithm bandwidth = bytes / time, bus bandwidth = algbw x
//! 2(n-1)/n (0 on one rank, as nccl-tests prints it: nothing crosses a
//! link).
//!
//! Each rank times every all-reduce with CUDA events on its stream; a
//! run's time is the slowest rank's (they finish together or not at all).
//! The reduction is the mean, as data-parallel training averages
//! gradients (on one rank NCCL is asked for the sum, the same values: see
//! `nccl::Comm::all_reduce`): rank r sends r+1 everywhere, so every element
//! of the result must be (n+1)/2, checked after the timed runs, and
//! in-place runs never grow their values. Before the check an out-of-place
//! output is set to NaN, so an element the all-reduce never wrote cannot
//! pass for one it did.

use super::replicas::{CommFrom, Meet, OtherReplicaFailed, Replicas};
use crate::bench::Stats;
use crate::results::allreduce_record::AllreduceRecord;
use crate::results::store::{RunFile, FORMAT_VERSION};
use crate::results::Environment;
use anyhow::{anyhow, Context, Result};
use cnnbench_kernels::Isa;
use cnnbench_layers::cuda::nccl::{Elem, Reduce};
use cnnbench_layers::cuda::{DeviceBuffer, Gpu};
use cnnbench_layers::DType;
use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};

/// DeepBench's all-reduce sizes, in floats (`code/kernels/all_reduce_problems.h`
/// of baidu-research/DeepBench at 0121d4b).
pub const DEEPBENCH_SIZES: [usize; 7] = [
    100_000, 3_097_600, 4_194_304, 6_553_600, 16_777_217, 38_360_000, 64_500_000,
];

/// Timed all-reduces per size and placement with `--iters` unset; and
/// untimed ones first with `--warmup` unset. A fixed count: every rank must
/// run every all-reduce.
pub const DEFAULT_RUNS: usize = 50;
pub const DEFAULT_WARMUP: usize = 5;

/// nccl-tests' bus bandwidth of an all-reduce among `ranks`
/// (`AllReduceGetBw` in its `src/all_reduce.cu`): algbw x 2(n-1)/n at every
/// world size, so 0 on one rank, where nccl-tests prints 0.00 too.
fn bus_bandwidth(algbw: f64, ranks: usize) -> f64 {
    if ranks == 0 {
        return 0.0;
    }
    algbw * (2 * (ranks - 1)) as f64 / ranks as f64
}

/// What rank `rank` sends: `elements` values of rank + 1, in `dtype`'s
/// storage.
fn fill(dtype: DType, rank: usize, elements: usize) -> Vec<u8> {
    dtype.encode(&vec![(rank + 1) as f32; elements])
}

/// The mean over `ranks` ranks of what [`fill`] sends: (n+1)/2, exact in
/// every dtype while n+1 fits its significand.
fn mean_of_ranks(ranks: usize) -> f32 {
    (ranks as f64 + 1.0) as f32 / 2.0
}

/// How far a correct element may be from the mean, relative to it: the
/// bound of n pre-multiplied terms summed in the element type, (n+1)
/// units of roundoff, and never below 1e-6 (f32) or 1e-2 (f16, bf16);
/// capped at a quarter, so an element left at 0 is always wrong.
fn tolerance(dtype: DType, ranks: usize) -> f32 {
    let (unit, floor) = match dtype {
        DType::F16 => (2f64.powi(-11), 1e-2),
        DType::Bf16 => (2f64.powi(-8), 1e-2),
        _ => (2f64.powi(-24), 1e-6),
    };
    (unit * (ranks as f64 + 1.0)).clamp(floor, 0.25) as f32
}

/// `None` when every element of `got` is the mean over `ranks`; else what
/// is wrong: how many elements, and the first of them.
fn check_result(got: &[f32], dtype: DType, ranks: usize) -> Option<String> {
    let want = mean_of_ranks(ranks);
    let tol = tolerance(dtype, ranks) * want;
    let bad = |v: &f32| v.is_nan() || (v - want).abs() > tol;
    let first = got.iter().position(bad)?;
    let count = got[first..].iter().filter(|v| bad(v)).count();
    let others = match count {
        1 => String::new(),
        n => format!(" (and {} more of {})", n - 1, got.len()),
    };
    Some(format!(
        "wrong: element {first} is {} where the mean is {want}{others}",
        got[first]
    ))
}

/// One size, type and placement.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Case {
    elements: usize,
    dtype: DType,
    in_place: bool,
}

/// Every size of every type, in every placement: the cases, in the order
/// they run.
pub fn cases(sizes: &[usize], dtypes: &[DType], placements: &[bool]) -> Vec<Case> {
    let mut cases = Vec::new();
    for &d in dtypes {
        for &elements in sizes {
            for &in_place in placements {
                cases.push(Case {
                    elements,
                    dtype: d,
                    in_place,
                });
            }
        }
    }
    cases
}

fn elem(d: DType) -> Elem {
    match d {
        DType::F16 => Elem::F16,
        DType::Bf16 => Elem::Bf16,
        _ => Elem::F32,
    }
}

/// What one rank measured of one case.
#[derive(Serialize, Deserialize)]
struct RankTimes {
    ms: Vec<f64>,
    /// `None` when every element of the checked result was (n+1)/2.
    wrong: Option<String>,
}

/// Every case on every replica, `warmup` then `runs` all-reduces each, then
/// the check: the run file of the slowest rank's times on the reporting
/// process, `None` on the others.
pub fn run(
    replicas: &Replicas,
    cases: &[Case],
    (warmup, runs): (usize, usize),
    threads: usize,
    bar: &ProgressBar,
) -> Result<Option<RunFile<AllreduceRecord>>> {
    let gpu = Gpu::open_ordinal(replicas.first_device()).map_err(|e| anyhow!("{e}"))?;
    let env = Environment {
        gpu: Some(gpu.info.clone()),
        ..Environment::here(
            threads,
            Isa::detect().name().into(),
            None,
            "CUDA events around each all-reduce on each rank's stream; the slowest rank's time",
        )
    };
    drop(gpu);
    // In words, as the rank-mismatch error shows it to a person.
    let shown: Vec<String> = cases
        .iter()
        .map(|c| {
            let place = if c.in_place {
                "in-place"
            } else {
                "out-of-place"
            };
            format!("{} {} {place}", c.elements, c.dtype)
        })
        .collect();
    let fingerprint = format!(
        "cnnbench {} allreduce {} | warmup {warmup} runs {runs}",
        env!("CARGO_PKG_VERSION"),
        shown.join(", ")
    );
    let ran = replicas.run("allreduce", &fingerprint, bar, |dev, from, bar, meet| {
        rank_body(dev, from, cases, (warmup, runs), bar, meet)
    })?;
    let Some((per_rank, launcher)) = ran else {
        return Ok(None);
    };
    bar.finish_and_clear();
    let ranks = per_rank.len();
    let mut records = Vec::new();
    for (k, c) in cases.iter().enumerate() {
        let mut slowest = vec![0.0f64; runs];
        let mut wrong = None;
        for r in &per_rank {
            let t = r.get(k).context("a rank's results are short")?;
            for (s, v) in slowest.iter_mut().zip(&t.ms) {
                *s = s.max(*v);
            }
            wrong = wrong.or(t.wrong.clone());
        }
        let us: Vec<f64> = slowest.iter().map(|ms| ms * 1e3).collect();
        let time_us = Stats::of(&us).context("no timed all-reduce")?;
        let bytes = c.elements * elem(c.dtype).bytes();
        let algbw = bytes as f64 / (time_us.median * 1e-6) / 1e9;
        records.push(AllreduceRecord {
            elements: c.elements,
            bytes,
            dtype: c.dtype.name().into(),
            in_place: c.in_place,
            ranks,
            launcher: launcher.into(),
            time_us,
            algbw_gbps: algbw,
            busbw_gbps: bus_bandwidth(algbw, ranks),
            runs,
            status: wrong.unwrap_or_else(|| "ok".into()),
        });
    }
    Ok(Some(RunFile {
        format_version: FORMAT_VERSION,
        subcommand: "allreduce".into(),
        environment: env,
        records,
        skipped: Vec::new(),
        complete: true,
    }))
}

/// One rank: every case, `warmup` then `runs` timed all-reduces, then the
/// check.
fn rank_body(
    dev: usize,
    from: CommFrom,
    cases: &[Case],
    (warmup, runs): (usize, usize),
    bar: &ProgressBar,
    meet: &Meet,
) -> Result<Vec<RankTimes>> {
    let gpu = Gpu::open_ordinal(dev).map_err(|e| anyhow!("{e}"))?;
    let comm = from.comm(&gpu)?;
    let (rank, n) = (comm.rank, comm.world_size);
    let events = gpu.event_pair().map_err(|e| anyhow!("{e}"))?;
    let gpu_err = |e: cnnbench_layers::cuda::GpuError| anyhow!("{e}");
    // Every rank of this process reaches its first all-reduce, or none.
    if !meet.all_ready(true) {
        return Err(OtherReplicaFailed.into());
    }
    let mut out = Vec::new();
    for c in cases {
        bar.set_message(format!(
            "{} {} {}",
            c.elements,
            c.dtype,
            if c.in_place {
                "in place"
            } else {
                "out of place"
            }
        ));
        let e = elem(c.dtype);
        // Rank r sends r+1: the mean over ranks is (n+1)/2 everywhere.
        let sent = fill(c.dtype, rank, c.elements);
        let mut send = DeviceBuffer::from_bytes(&gpu.stream, &sent).map_err(gpu_err)?;
        let mut recv = if c.in_place {
            None
        } else {
            Some(DeviceBuffer::alloc(&gpu.stream, sent.len()).map_err(gpu_err)?)
        };
        let src = send.as_void();
        let dst = recv.as_ref().map_or(src, |r| r.as_void());
        let mut reduce = || -> Result<()> {
            // SAFETY: both buffers hold `elements` of `e` and live past
            // the wait that follows every call.
            unsafe { comm.all_reduce(src, dst, c.elements, e, Reduce::Avg, &gpu.stream) }
                .map_err(gpu_err)
        };
        let mut ms = Vec::with_capacity(runs);
        for k in 0..warmup + runs {
            let t = events.time(&mut reduce)?;
            if k >= warmup {
                ms.push(t);
            }
        }
        // The check: fresh inputs, an output of NaN (0xFF bytes in every
        // dtype), one more all-reduce, every element read.
        send.upload(&sent).map_err(gpu_err)?;
        if let Some(r) = recv.as_mut() {
            r.fill_bytes(0xFF).map_err(gpu_err)?;
        }
        events.time(&mut reduce)?;
        let got = c
            .dtype
            .decode(&recv.as_ref().unwrap_or(&send).download().map_err(gpu_err)?);
        let wrong = check_result(&got, c.dtype, n);
        out.push(RankTimes { ms, wrong });
        bar.inc(1);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The element types NCCL all-reduces here.
    const NCCL_DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::Bf16];

    #[test]
    fn bus_bandwidth_is_nccl_tests_definition() {
        // 8 ranks: 2·7/8 = 1.75 x algbw; one rank moves nothing between
        // GPUs, and nccl-tests' factor 2(n-1)/n makes that 0.
        assert!((bus_bandwidth(100.0, 8) - 175.0).abs() < 1e-9);
        assert!((bus_bandwidth(100.0, 2) - 100.0).abs() < 1e-9);
        assert!((bus_bandwidth(90.0, 3) - 120.0).abs() < 1e-9);
        assert_eq!(bus_bandwidth(100.0, 1), 0.0);
        assert_eq!(bus_bandwidth(100.0, 0), 0.0);
    }

    /// Every size class: odd, below and past one 16-byte vector, around
    /// NCCL's 16 KiB per block and its 32 blocks, 2^24 - 1 to 2^24 + 3
    /// (where an f32 count would round), and DeepBench's.
    fn size_classes() -> Vec<usize> {
        let mut s: Vec<usize> = (1..=33).collect();
        s.extend([
            63, 64, 65, 4095, 4096, 4097, 8191, 8192, 8193, 131_071, 131_073,
        ]);
        s.extend([(1 << 24) - 1, 1 << 24, (1 << 24) + 1, (1 << 24) + 3]);
        s.extend(DEEPBENCH_SIZES);
        s
    }

    #[test]
    fn every_size_is_filled_and_checked_to_its_last_element() {
        // Past a million elements nothing depends on the size but the
        // time a debug build takes (the check at 2^24 + 1 is below).
        for n in size_classes().into_iter().filter(|&n| n <= 1 << 20) {
            for d in NCCL_DTYPES {
                for (rank, ranks) in [(0, 1), (2, 3)] {
                    let sent = fill(d, rank, n);
                    assert_eq!(sent.len(), n * elem(d).bytes(), "{n} {d}");
                    assert_eq!(elem(d).bytes(), d.size_bytes());
                    let got = d.decode(&sent);
                    assert_eq!(got.len(), n);
                    assert_eq!(got[n - 1], (rank + 1) as f32, "{n} {d}");
                    // One rank's result is its input.
                    if ranks == 1 {
                        assert_eq!(check_result(&got, d, ranks), None, "{n} {d}");
                    }
                    let mut mean = vec![mean_of_ranks(ranks); n];
                    assert_eq!(check_result(&mean, d, ranks), None, "{n} {d}");
                    // The last element left unwritten, as 0 or as NaN.
                    for unwritten in [0.0, f32::NAN] {
                        mean[n - 1] = unwritten;
                        let e = check_result(&mean, d, ranks).expect("caught");
                        assert!(
                            e.starts_with(&format!("wrong: element {} is ", n - 1)),
                            "{e}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_h200_finding_reads_as_it_did() {
        let n = (1 << 24) + 1;
        let sent = fill(DType::F32, 0, n);
        assert_eq!(sent.len(), 4 * n);
        assert_eq!(sent[4 * n - 4..], 1f32.to_le_bytes());
        let mut got = vec![1.0f32; n];
        got[n - 1] = 0.0;
        assert_eq!(
            check_result(&got, DType::F32, 1).as_deref(),
            Some("wrong: element 16777216 is 0 where the mean is 1")
        );
        got[3] = f32::NAN;
        assert_eq!(
            check_result(&got, DType::F32, 1).as_deref(),
            Some("wrong: element 3 is NaN where the mean is 1 (and 1 more of 16777217)")
        );
    }

    #[test]
    fn the_mean_and_its_tolerance_at_every_world_size() {
        assert_eq!(mean_of_ranks(1), 1.0);
        assert_eq!(mean_of_ranks(2), 1.5);
        assert_eq!(mean_of_ranks(8), 4.5);
        for d in NCCL_DTYPES {
            for ranks in [1, 2, 3, 7, 8, 64, 1000] {
                let (want, tol) = (mean_of_ranks(ranks), tolerance(d, ranks));
                assert!(tol > 0.0 && tol <= 0.25, "{d} {ranks}: {tol}");
                // The mean itself, rounded to the dtype, passes.
                let stored = d.decode(&d.encode(&[want]))[0];
                assert_eq!(check_result(&[stored], d, ranks), None, "{d} {ranks}");
                assert!(check_result(&[0.0], d, ranks).is_some());
                assert!(check_result(&[want * 2.0], d, ranks).is_some());
            }
        }
        // f32 at 8 ranks: 1e-6 of the mean, and no more.
        assert!(check_result(&[4.5 * (1.0 + 3e-6)], DType::F32, 8).is_some());
        // bf16 at 3 ranks: one unit in the last place of 2 is within.
        assert_eq!(check_result(&[2.0078125], DType::Bf16, 3), None);
    }

    /// Elements of an `elements`-long result that NCCL's one-rank kernel
    /// (`oneRankReduce`, `src/device/onerank.cu`, which a float mean at one
    /// rank runs) writes: min(32, bytes / 16 KiB) blocks, each a run of
    /// whole 16-byte packs. NCCL 2.19 to 2.29.3 sized the run from
    /// count / blocks rounded down, 2.29.7 rounded up.
    fn nccl_one_rank_writes(elements: usize, elt_bytes: usize, fixed: bool) -> usize {
        let per_pack = 16 / elt_bytes;
        let blocks = (elements * elt_bytes).div_ceil(16 << 10).min(32);
        let share = if fixed {
            elements.div_ceil(blocks)
        } else {
            elements / blocks
        };
        (blocks * share.next_multiple_of(per_pack)).min(elements)
    }

    /// The cause of the H200's one wrong element, modelled: of DeepBench's
    /// sizes, only 2^24+1 (and in every dtype) loses anything to the old
    /// kernel, and exactly its last element, 16777216; the fixed kernel
    /// writes every element of every size. cnnbench no longer runs that
    /// kernel (a mean over one rank goes to NCCL as a sum, a copy).
    #[test]
    fn nccl_before_2_29_7_left_the_tail_of_a_one_rank_mean_unwritten() {
        for d in NCCL_DTYPES {
            let b = elem(d).bytes();
            for n in DEEPBENCH_SIZES {
                let lost = n - nccl_one_rank_writes(n, b, false);
                assert_eq!(lost, usize::from(n == 16_777_217), "{n} {d}");
            }
            for n in size_classes().into_iter().chain(1..20_000) {
                assert_eq!(nccl_one_rank_writes(n, b, true), n, "{n} {d}");
            }
        }
        // The smallest sizes it got wrong: 4097 f32 and 8193 f16/bf16 (two
        // blocks of 2048 and 4096), which the GPU test all-reduces.
        assert_eq!(nccl_one_rank_writes(4097, 4, false), 4096);
        assert_eq!(nccl_one_rank_writes(8193, 2, false), 8192);
        assert!((1..4097).all(|n| nccl_one_rank_writes(n, 4, false) == n));
        assert_eq!(nccl_one_rank_writes((1 << 24) + 3, 4, false), 1 << 24);
    }
}
