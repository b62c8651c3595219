//! `cnnbench info`'s measurements: the FP32 peak per ISA (a register-only
//! FMA loop timed by bench's wall clock), the host's memory bandwidth (a
//! STREAM-like copy), the GPU as loaded, its peak per precision measured
//! with cuBLAS and its bandwidth (a device-to-device copy), or why there is
//! no GPU.

use super::roofline;
use crate::results::environment::{self, BuildInfo};
use crate::results::machine_info::{CacheInfo, GpuSection, Info, IsaPeak};
use anyhow::Result;
use cnnbench_kernels::{bandwidth, peak, Isa};
use cnnbench_layers::cuda::device::supports_dtype;
use cnnbench_layers::cuda::loader;
use cnnbench_layers::cuda::Gpu;
use cnnbench_layers::gemm::cuda::measure_peak;
use cnnbench_layers::DType;

/// Everything `info` reports, the CPU peaks measured on `threads` threads.
pub fn gather(threads: usize) -> Result<Info> {
    let mut peak = Vec::new();
    for isa in Isa::supported() {
        let measure = |t| crate::bench::timer::cpu_peak_gflops(isa, t, peak::DEFAULT_REPS);
        peak.push(IsaPeak {
            isa: isa.name().into(),
            gflops_1_thread: measure(1)?,
            gflops_all_threads: measure(threads)?,
        });
    }
    Ok(Info {
        cpu: environment::cpu_model(),
        host: environment::host_name(),
        os: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
        cores: environment::logical_cores(),
        threads,
        isa_detected: Isa::detect().name().into(),
        isa_used: Isa::detect().name().into(),
        isa_supported: Isa::supported().iter().map(|i| i.name().into()).collect(),
        peak,
        cache: CacheInfo {
            largest_bytes: bandwidth::largest_cache_bytes(),
            counted_bytes: bandwidth::cache_bytes(),
        },
        memory_bandwidth: roofline::cpu_bandwidth(threads)?,
        gpu: gpu_section()?,
        cnnbench: BuildInfo::current(),
    })
}

fn gpu_section() -> Result<GpuSection> {
    match Gpu::open() {
        Err(why) => Ok(GpuSection {
            usable: false,
            reason: Some(why),
            device: None,
            measured: vec![],
            bandwidth: None,
            libraries: loader::libraries(),
        }),
        Ok(gpu) => {
            let mut measured = Vec::new();
            for d in DType::ALL {
                if !supports_dtype(&gpu.info.compute_capability, d) {
                    continue;
                }
                measured.push(measure_peak(&gpu, d)?);
            }
            let bandwidth = Some(roofline::gpu_bandwidth(&gpu)?);
            Ok(GpuSection {
                usable: true,
                reason: None,
                libraries: gpu.info.libraries.clone(),
                device: Some(gpu.info.clone()),
                measured,
                bandwidth,
            })
        }
    }
}
