//! The host's memory bandwidth, measured as STREAM's copy does: every
//! thread copies its own slice of one large array into another, and the
//! rate counts `2 x bytes` (each byte read once and written once; the
//! write-allocate reads some CPUs add are not counted, as STREAM does not).
//! The arrays must be much larger than the last-level cache.

/// Measured copy bandwidth of `threads` threads over two arrays of `bytes`
/// each, in GB/s (1e9 bytes per second): the best of `reps` copies after
/// an untimed one, each timed by `seconds` (the caller's clock, as
/// [`crate::peak::measure_gflops`]).
///
/// Runs on rayon's global pool when it has exactly `threads` threads (as
/// after `--threads N`), on the calling thread for 1, and otherwise on a
/// short-lived pool of its own. The arrays are written by the threads that
/// copy them first, so that each thread's pages sit on its own node.
pub fn measure_copy_gbs(
    threads: usize,
    bytes: usize,
    reps: usize,
    seconds: &dyn Fn(&mut dyn FnMut()) -> f64,
) -> Result<f64, String> {
    let threads = threads.max(1);
    let words = (bytes / 8).max(threads);
    let own_pool = if threads > 1 && threads != rayon::current_num_threads() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .map_err(|e| format!("cannot start {threads} threads for the bandwidth: {e}"))?;
        Some(pool)
    } else {
        None
    };
    let mut src: Vec<u64> = Vec::new();
    let mut dst: Vec<u64> = Vec::new();
    src.try_reserve_exact(words)
        .and_then(|_| dst.try_reserve_exact(words))
        .map_err(|_| format!("cannot allocate 2 x {bytes} bytes for the bandwidth"))?;
    // SAFETY: capacity is `words`; every element is written by `fill`
    // below before anything reads it.
    unsafe {
        src.set_len(words);
        dst.set_len(words);
    }
    let chunk = words.div_ceil(threads);
    let run = |f: &(dyn Fn(&mut [u64], &mut [u64]) + Sync), src: &mut [u64], dst: &mut [u64]| {
        let pairs: Vec<(&mut [u64], &mut [u64])> =
            src.chunks_mut(chunk).zip(dst.chunks_mut(chunk)).collect();
        if threads == 1 {
            for (s, d) in pairs {
                f(s, d);
            }
            return;
        }
        let work = || {
            use rayon::prelude::*;
            pairs.into_par_iter().for_each(|(s, d)| f(s, d));
        };
        match &own_pool {
            Some(pool) => pool.install(work),
            None => work(),
        }
    };
    let fill = |s: &mut [u64], d: &mut [u64]| {
        s.fill(0x3ff0_0000_0000_0001);
        d.fill(0);
    };
    let copy = |s: &mut [u64], d: &mut [u64]| d.copy_from_slice(s);
    run(&fill, &mut src, &mut dst);
    run(&copy, &mut src, &mut dst); // warms clocks and the page tables
    let mut best = 0f64;
    for _ in 0..reps.max(1) {
        let secs = seconds(&mut || run(&copy, &mut src, &mut dst));
        best = best.max(2.0 * (words * 8) as f64 / secs / 1e9);
    }
    std::hint::black_box(&dst);
    Ok(best)
}

/// The largest CPU cache Linux reports (bytes; 0 when unknown), read once.
pub fn largest_cache_bytes() -> u64 {
    static BYTES: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *BYTES.get_or_init(read_largest_cache_bytes)
}

/// Most bytes of cache the kernels count on: past this a tensor is taken
/// to stream from DRAM (they then store around the caches, or split work
/// so that its blocks stay in L2).
pub const CACHE_CAP_BYTES: u64 = 32 << 20;

/// The cache a tensor can stay in between passes: [`largest_cache_bytes`]
/// up to [`CACHE_CAP_BYTES`], which it also is when unknown. The cap is for
/// VMs on many-core parts: a 2-vCPU VM on a Xeon with 480 MiB of L3
/// (family 6, model 167 as it reports itself) sees the socket's whole L3,
/// shared with every other tenant. There, taking 32 MiB ran ResNet-50's
/// 7x7 Winograd layer 2.1x faster (its weight panels, not 37.7 MB of
/// transformed weights re-read per chunk) and the large 1x1 layers and
/// the stem 0.90-1.19x, median 1.04x (outputs stored around the caches;
/// ABBA, 2 rounds, 2 threads). The AMD VMs measured before (Zen 3, 4 and
/// 5) report 32 MiB themselves; the 16-vCPU Xeon host of the H200 runs reported 300
/// MiB, so its CPU kernels count on less since.
pub fn cache_bytes() -> u64 {
    match largest_cache_bytes() {
        0 => CACHE_CAP_BYTES,
        b => b.min(CACHE_CAP_BYTES),
    }
}

fn read_largest_cache_bytes() -> u64 {
    let Ok(dir) = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache") else {
        return 0;
    };
    dir.flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("size")).ok())
        .filter_map(|s| parse_cache_size(s.trim()))
        .max()
        .unwrap_or(0)
}

/// `32768K`, `1M`, `512` (bytes) as sysfs writes cache sizes.
fn parse_cache_size(s: &str) -> Option<u64> {
    let (digits, unit) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => s.split_at(i),
        None => (s, ""),
    };
    let n: u64 = digits.parse().ok()?;
    match unit {
        "" => Some(n),
        "K" => Some(n << 10),
        "M" => Some(n << 20),
        "G" => Some(n << 30),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Stopwatch;

    fn seconds(f: &mut dyn FnMut()) -> f64 {
        let t = Stopwatch::start();
        f();
        t.elapsed_s()
    }

    #[test]
    fn the_cache_counted_on_is_the_largest_up_to_the_cap() {
        let (largest, counted) = (largest_cache_bytes(), cache_bytes());
        assert!(counted > 0 && counted <= CACHE_CAP_BYTES);
        if largest > 0 {
            assert_eq!(counted, largest.min(CACHE_CAP_BYTES));
        }
    }

    #[test]
    fn the_copy_rate_is_positive_and_finite() {
        for threads in [1, 2] {
            let gbs = measure_copy_gbs(threads, 64 << 20, 2, &seconds).expect("64 MiB fit");
            assert!(
                gbs.is_finite() && gbs > 0.1,
                "{threads} threads: {gbs} GB/s"
            );
        }
    }

    #[test]
    fn cache_sizes_parse() {
        assert_eq!(parse_cache_size("32768K"), Some(32 << 20));
        assert_eq!(parse_cache_size("2M"), Some(2 << 20));
        assert_eq!(parse_cache_size("512"), Some(512));
        assert_eq!(parse_cache_size("lots"), None);
        assert_eq!(parse_cache_size(""), None);
    }
}
