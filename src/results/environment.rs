//! Where and how the numbers were measured.

use serde::{Deserialize, Serialize};

/// Build metadata stamped by `build.rs`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
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

/// Every field has a default when read, so files written by older
/// versions (with fewer fields) still load.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
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
    /// A name for this run (`CNNBENCH_LABEL`, set by `cnnbench compare`
    /// for each variant).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// What the machine costs, when given (`--price-per-hour`, `--instance`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub price: Option<super::price::Price>,
}

impl Environment {
    /// This machine and process, now; the caller fills in the rest.
    pub fn here(threads: usize, isa: String, peak_gflops: Option<f64>, timer: &str) -> Environment {
        Environment {
            host: host_name(),
            os: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
            cpu: cpu_model(),
            cores: logical_cores(),
            threads,
            isa,
            isa_detected: cnnbench_kernels::Isa::detect().name().into(),
            peak_gflops,
            timer: timer.into(),
            gpu: None,
            cnnbench: BuildInfo::current(),
            command: command_line(),
            timestamp: timestamp(),
            label: std::env::var("CNNBENCH_LABEL")
                .ok()
                .filter(|l| !l.is_empty()),
            price: None,
        }
    }
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

pub fn command_line() -> String {
    std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn timestamp() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}
