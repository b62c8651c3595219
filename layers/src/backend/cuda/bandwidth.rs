//! The GPU's memory bandwidth, measured: a device-to-device copy of a large
//! buffer (`cuMemcpyDtoDAsync` on the benchmark stream), timed with CUDA
//! events, best of a few. A copy reads and writes every byte once, so the
//! rate counts `2 x bytes` over the time, as STREAM's copy does.

use super::error::GpuResult;
use super::memory::DeviceBuffer;
use super::Gpu;

/// The most each of the two buffers takes: 1 GiB, far beyond any L2.
pub const COPY_BYTES: usize = 1 << 30;

/// Timed copies after the untimed first one.
pub const COPY_REPS: usize = 5;

/// A measured bandwidth and how it was measured.
#[derive(Clone, Debug, PartialEq)]
pub struct MeasuredBandwidth {
    pub gbs: f64,
    /// The size of each buffer.
    pub bytes: usize,
    pub method: String,
}

/// Copies `COPY_BYTES` (or a quarter of the free memory, if less) from one
/// device buffer to another `COPY_REPS` times after one untimed copy; the
/// best rate, in GB/s (1e9 bytes per second).
pub fn measure_bandwidth(gpu: &Gpu) -> GpuResult<MeasuredBandwidth> {
    let bytes = copy_bytes(gpu.free_memory()?);
    let mut src = DeviceBuffer::alloc(&gpu.stream, bytes)?;
    let mut dst = DeviceBuffer::alloc(&gpu.stream, bytes)?;
    src.fill_bytes(1)?;
    dst.copy_from(&src)?; // warms clocks and maps the pages
    let events = gpu.event_pair()?;
    let mut best_ms = f64::INFINITY;
    for _ in 0..COPY_REPS {
        best_ms = best_ms.min(events.time(&mut || dst.copy_from(&src))?);
    }
    Ok(MeasuredBandwidth {
        gbs: copy_gbs(bytes, best_ms),
        bytes,
        method: format!(
            "device-to-device copy of {} MiB (cuMemcpyDtoDAsync), CUDA events, best of {COPY_REPS}, 2 x bytes / time",
            bytes >> 20
        ),
    })
}

/// The buffer size for `free` bytes of device memory: `COPY_BYTES`, or a
/// quarter of what is free, in whole MiB (at least 1).
pub fn copy_bytes(free: usize) -> usize {
    (COPY_BYTES.min(free / 4) >> 20).max(1) << 20
}

/// A copy's rate: `2 x bytes` (read and written) over `ms`, in GB/s.
pub fn copy_gbs(bytes: usize, ms: f64) -> f64 {
    2.0 * bytes as f64 / (ms * 1e-3) / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cuda::no_gpu_for_test;

    #[test]
    fn the_copy_size_fits_the_free_memory() {
        assert_eq!(copy_bytes(80 << 30), 1 << 30);
        assert_eq!(copy_bytes(2 << 30), 512 << 20);
        assert_eq!(copy_bytes(0), 1 << 20);
        // 1 GiB each way in 0.5 ms: 4.29 TB/s.
        assert!((copy_gbs(1 << 30, 0.5) - 4_294.967_296).abs() < 1e-6);
    }

    #[test]
    fn a_gpu_copies_at_a_finite_rate() {
        let gpu = match Gpu::open() {
            Ok(g) => g,
            Err(why) => return no_gpu_for_test(&why),
        };
        let b = measure_bandwidth(&gpu).expect("the copy runs");
        assert!(b.gbs.is_finite() && b.gbs > 0.0, "{b:?}");
        eprintln!("{} GB/s: {}", b.gbs, b.method);
    }
}
