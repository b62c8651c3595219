//! What `cnnbench info` found: the machine, the build, the FP32 peak per
//! ISA and, on a GPU machine, the GPU, its libraries as loaded and its peak
//! per precision.

use super::environment::BuildInfo;
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
    /// Each NVIDIA library as loaded (file and version), or why not: told
    /// with or without a GPU or driver.
    pub libraries: Vec<LibraryInfo>,
}
