//! The machine's roofs: its memory bandwidth, measured (`info` reports it,
//! and a `--per-layer` model run measures it once before its timed steps),
//! and the compute peak of the run; and the per-layer roofline placed
//! against them.

use crate::results::memory::available;
use crate::results::roofline::{Bandwidth, RooflineBasis};
use crate::results::ModelRecord;
use anyhow::{anyhow, Result};
use cnnbench_kernels::clock::Stopwatch;
use cnnbench_kernels::{bandwidth, peak, Isa};
use cnnbench_layers::cuda::bandwidth::measure_bandwidth;
use cnnbench_layers::cuda::Gpu;
use cnnbench_layers::gemm::cuda::measure_peak;
use cnnbench_layers::DType;

/// Timed host copies after the untimed first one.
pub const CPU_COPY_REPS: usize = 5;

/// Each host array: at least 256 MiB and 8 times the largest cache, so
/// that the copy streams from memory.
const CPU_ARRAY_MIN: u128 = 256 << 20;

/// The host's bandwidth: a STREAM-like copy on `threads` threads.
pub fn cpu_bandwidth(threads: usize) -> Result<Bandwidth> {
    let cache = cnnbench_kernels::bandwidth::largest_cache_bytes();
    let mut bytes = CPU_ARRAY_MIN.max(8 * cache as u128);
    if let Some(a) = available(threads) {
        // Two arrays, and room to spare.
        bytes = bytes.min(a.bytes / 8).max(16 << 20);
    }
    let bytes = usize::try_from(bytes).unwrap_or(usize::MAX) >> 20 << 20;
    let seconds = |f: &mut dyn FnMut()| {
        let t = Stopwatch::start();
        f();
        t.elapsed_s()
    };
    let gbs = bandwidth::measure_copy_gbs(threads, bytes, CPU_COPY_REPS, &seconds)
        .map_err(|e| anyhow!(e))?;
    Ok(Bandwidth {
        measured_gbs: gbs,
        method: format!(
            "copy of {} MiB into another on {threads} thread(s) (STREAM copy: 2 x bytes / time; largest cache {} MiB), wall clock, best of {CPU_COPY_REPS}",
            bytes >> 20,
            cache >> 20
        ),
        nominal_gbs: None,
    })
}

/// The GPU's bandwidth: a device-to-device copy, and the nominal rate
/// from the device's attributes where it reports them (memory clock x bus
/// width x 2).
pub fn gpu_bandwidth(gpu: &Gpu) -> Result<Bandwidth> {
    let m = measure_bandwidth(gpu).map_err(|e| anyhow!("measuring the GPU's bandwidth: {e}"))?;
    let nominal = gpu.info.memory_gbps();
    Ok(Bandwidth {
        measured_gbs: m.gbs,
        method: m.method,
        nominal_gbs: (nominal > 0.0).then_some(nominal),
    })
}

/// What a per-layer model run's layers are compared with, measured before
/// its first model: on the GPU the copy bandwidth and the dtype's nominal
/// peak (measured with cuBLAS where the GPU's rate is not known); on the
/// CPU the copy bandwidth and the FP32 FMA peak of `isa`, both on the
/// run's `threads`.
pub fn basis(gpu: Option<&Gpu>, dtype: DType, threads: usize, isa: Isa) -> Result<RooflineBasis> {
    match gpu {
        Some(gpu) => {
            let bw = gpu_bandwidth(gpu)?;
            let peak = match gpu.info.peak(dtype) {
                Some(p) => p.clone(),
                None => measure_peak(gpu, dtype)
                    .map_err(|e| anyhow!("measuring the {dtype} peak: {e}"))?,
            };
            Ok(RooflineBasis {
                bandwidth_gbs: bw.measured_gbs,
                bandwidth_from: bw.method,
                bandwidth_nominal_gbs: bw.nominal_gbs,
                peak_gflops: peak.tflops * 1e3,
                peak_from: peak.source,
                peak_label: dtype.name().into(),
                element_bytes: dtype.size_bytes(),
            })
        }
        None => {
            let bw = cpu_bandwidth(threads)?;
            let gflops = crate::bench::timer::cpu_peak_gflops(isa, threads, peak::DEFAULT_REPS)?;
            Ok(RooflineBasis {
                bandwidth_gbs: bw.measured_gbs,
                bandwidth_from: bw.method,
                bandwidth_nominal_gbs: None,
                peak_gflops: gflops,
                peak_from: format!(
                    "FP32 FMA loop ({}, {threads} thread(s), FMA = 2 FLOPs, best of {})",
                    isa.name(),
                    peak::DEFAULT_REPS
                ),
                peak_label: "FMA".into(),
                element_bytes: 4,
            })
        }
    }
}

/// Places every layer's passes of `rec` against `basis`, and names the
/// basis in the record; records without per-layer bytes stay as they are.
pub fn place(rec: &mut ModelRecord, basis: &RooflineBasis) {
    let mut placed = false;
    for l in &mut rec.layers {
        if let Some(r) = &mut l.roofline {
            basis.place(&mut r.forward);
            basis.place(&mut r.backward);
            placed = true;
        }
    }
    if placed {
        rec.roofline = Some(basis.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_bandwidth_is_positive_and_finite() {
        let b = cpu_bandwidth(2).expect("the copy runs");
        assert!(b.measured_gbs.is_finite() && b.measured_gbs > 0.1, "{b:?}");
        assert!(b.method.contains("2 thread(s)"), "{}", b.method);
        assert_eq!(b.nominal_gbs, None);
    }
}
