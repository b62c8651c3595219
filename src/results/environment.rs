//! Where and how the numbers were measured.

use serde::{Deserialize, Serialize};

/// Build metadata stamped by `build.rs`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BuildInfo {
    pub version: String,
    pub git: String,
    pub profile: String,
    pub target_features: String,
}

impl BuildInfo {
    pub fn current() -> BuildInfo {
        BuildInfo {
            version: env!("CARGO_PKG_VERSION").into(),
            git: env!("CNNBENCH_GIT").into(),
            profile: env!("CNNBENCH_PROFILE").into(),
            target_features: env!("CNNBENCH_TARGET_FEATURES").into(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    pub host: String,
    pub os: String,
    pub cpu: String,
    /// Logical CPUs the OS offers.
    pub cores: usize,
    /// Threads the benchmark ran with.
    pub threads: usize,
    /// The ISA the kernels were told to use.
    pub isa: String,
    /// The best ISA this CPU supports.
    pub isa_detected: String,
    /// The peak "% of peak" refers to, GFLOP/s: on the CPU the measured
    /// FP32 peak (best ISA) for `threads` threads; on a GPU the peak of the
    /// run's dtype (see `gpu.peaks` for its source).
    pub peak_gflops: Option<f64>,
    pub timer: String,
    /// The GPU and its libraries as loaded, for GPU runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<cnnbench_layers::cuda::DeviceInfo>,
    pub cnnbench: BuildInfo,
    pub command: String,
    pub timestamp: String,
}

/// The CPU's model name, from /proc/cpuinfo where there is one.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

pub fn logical_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Memory the OS says is available to a new allocation, in bytes.
pub fn available_memory_bytes() -> Option<u128> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u128 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

pub fn command_line() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

pub fn timestamp() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}
