//! What `cnnbench info` found: the machine, the build, the FP32 peak per
//! ISA, the memory bandwidth and, on a GPU machine, the GPU, its libraries
//! as loaded, its peak per precision and its memory bandwidth.

use super::environment::BuildInfo;
use super::roofline::Bandwidth;
use cnnbench_layers::cuda::loader::LibraryInfo;
use cnnbench_layers::cuda::{DeviceInfo, Peak};
use serde::Serialize;

/// One ISA's FP32 peak, on one thread and on all of the run's threads.
#[derive(Serialize)]
pub struct IsaPeak {
    pub isa: String,
    pub gflops_1_thread: f64,
    pub gflops_all_threads: f64,
}

/// The CPU caches: the largest Linux reports, and the part of it the
/// kernels count on (`bandwidth::cache_bytes`: they store around the
/// caches, or block for L2, past it).
#[derive(Serialize)]
pub struct CacheInfo {
    /// 0 where Linux reports none.
    pub largest_bytes: u64,
    pub counted_bytes: u64,
}

/// Everything `info` reports (its JSON form).
#[derive(Serialize)]
pub struct Info {
    pub cpu: String,
    pub host: String,
    pub os: String,
    pub cores: usize,
    pub threads: usize,
    pub isa_detected: String,
    pub isa_used: String,
    pub isa_supported: Vec<String>,
    /// Peak FP32 GFLOP/s per ISA: an FMA = 2 FLOPs, register-only loop,
    /// best of `peak::DEFAULT_REPS`.
    pub peak: Vec<IsaPeak>,
    pub cache: CacheInfo,
    /// The host's memory bandwidth, measured on the run's threads.
    pub memory_bandwidth: Bandwidth,
    pub gpu: GpuSection,
    pub cnnbench: BuildInfo,
}

/// The GPU as loaded, or why there is none.
#[derive(Serialize)]
pub struct GpuSection {
    pub usable: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceInfo>,
    /// Square cuBLAS GEMMs per dtype, beside the nominal peaks
    /// (`device.peaks`: the datasheet's, else SMs x max clock).
    pub measured: Vec<Peak>,
    /// The GPU's memory bandwidth: measured, and nominal from its
    /// attributes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bandwidth: Option<Bandwidth>,
    /// Each NVIDIA library as loaded (file and version), or why not: told
    /// with or without a GPU or driver.
    pub libraries: Vec<LibraryInfo>,
}
