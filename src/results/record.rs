//! One measured row: problem x direction x algorithm. The JSON and CSV
//! contract (README, "Output contract") is these fields.

use super::kinds::{dtype_name, Device, Dir};
use crate::bench::Stats;
use cnnbench_layers::DType;
use serde::{Deserialize, Serialize};

/// The result of comparing an output with the reference.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// Worst relative L2 error over the direction's outputs (NaN when an
    /// output was not written; serialised as null).
    #[serde(deserialize_with = "crate::bench::stats::f64_or_nan")]
    pub rel_err: f64,
    pub passed: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The canonical benchdnn descriptor, pasteable as a reproducer.
    pub problem: String,
    /// `fwd`, `bwd-data`, `bwd-filter` or `gemm`.
    pub dir: Dir,
    pub device: Device,
    #[serde(with = "dtype_name")]
    pub dtype: DType,
    pub layout: String,
    /// The algorithm that ran (for `--algo auto`, the one it chose).
    pub algo: String,
    pub ms: Stats,
    pub runs: usize,
    /// FLOPs of the direction (2·N·OH·OW·K·(C/g)·R·S) over the median time.
    #[serde(deserialize_with = "crate::bench::stats::f64_or_nan")]
    pub gflops: f64,
    /// `gflops` over the machine's measured FP32 peak for the threads used.
    pub peak_fraction: Option<f64>,
    pub check: Option<Check>,
    /// The kernel that did the work, e.g. `avx512_conv_fwd_f32_6x64`.
    pub kernel: String,
    /// Whether the direction included bias (fwd) or its gradient (bwd-filter).
    pub bias: bool,
    pub workspace_bytes: usize,
    /// cuDNN's own time for the chosen algorithm, from its exhaustive
    /// search (`--algo auto` on a GPU), to compare with `ms.median`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cudnn_find_ms: Option<f64>,
}

/// An algorithm that was asked for but not timed, and why (`--algo all` on
/// a GPU lists every algorithm cuDNN knows).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    pub problem: String,
    pub dir: Dir,
    pub device: Device,
    #[serde(with = "dtype_name")]
    pub dtype: DType,
    pub layout: String,
    pub algo: String,
    /// `not supported`, `out of memory`, `over workspace limit`, ...
    pub status: String,
    pub workspace_bytes: Option<usize>,
}

/// CSV columns, in order: the record flattened. Columns are only ever
/// added at the end (`cudnn_find_ms` last), so a reader that goes by the
/// header's names reads older files too.
pub const CSV_HEADER: [&str; 20] = [
    "problem",
    "dir",
    "device",
    "dtype",
    "layout",
    "algo",
    "ms_min",
    "ms_median",
    "ms_max",
    "ms_mean",
    "ms_stddev",
    "runs",
    "gflops",
    "peak_fraction",
    "check_rel_err",
    "check_passed",
    "kernel",
    "bias",
    "workspace_bytes",
    "cudnn_find_ms",
];

/// What a record measured: the problem, direction, device, dtype, layout
/// and algorithm.
pub struct Subject {
    pub problem: String,
    pub dir: Dir,
    pub device: Device,
    pub dtype: DType,
    pub layout: String,
    pub algo: String,
}

/// How it was timed: the statistics of the timed runs, the FLOPs of one
/// run, and the peak measured before the record is made.
pub struct Timing {
    pub ms: Stats,
    pub runs: usize,
    pub flops: u64,
    pub peak_gflops: Option<f64>,
}

/// What ran, besides the time.
pub struct Ran {
    pub check: Option<Check>,
    pub kernel: String,
    pub bias: bool,
    pub workspace_bytes: usize,
    pub cudnn_find_ms: Option<f64>,
}

impl Record {
    /// The record, complete: GFLOP/s over the median time and the fraction
    /// of the peak are worked out here, once, and never changed after.
    pub fn new(s: Subject, t: Timing, r: Ran) -> Record {
        let gflops = t.flops as f64 / (t.ms.median * 1e-3) / 1e9;
        Record {
            problem: s.problem,
            dir: s.dir,
            device: s.device,
            dtype: s.dtype,
            layout: s.layout,
            algo: s.algo,
            ms: t.ms,
            runs: t.runs,
            gflops,
            peak_fraction: t.peak_gflops.map(|p| gflops / p),
            check: r.check,
            kernel: r.kernel,
            bias: r.bias,
            workspace_bytes: r.workspace_bytes,
            cudnn_find_ms: r.cudnn_find_ms,
        }
    }

    /// The CSV row matching [`CSV_HEADER`].
    pub fn csv_row(&self) -> Vec<String> {
        let opt = |x: Option<f64>| x.map_or(String::new(), |v| format!("{v}"));
        vec![
            self.problem.clone(),
            self.dir.to_string(),
            self.device.to_string(),
            self.dtype.to_string(),
            self.layout.clone(),
            self.algo.clone(),
            format!("{}", self.ms.min),
            format!("{}", self.ms.median),
            format!("{}", self.ms.max),
            format!("{}", self.ms.mean),
            format!("{}", self.ms.stddev),
            self.runs.to_string(),
            format!("{}", self.gflops),
            opt(self.peak_fraction),
            opt(self.check.map(|c| c.rel_err)),
            self.check.map_or(String::new(), |c| c.passed.to_string()),
            self.kernel.clone(),
            self.bias.to_string(),
            self.workspace_bytes.to_string(),
            opt(self.cudnn_find_ms),
        ]
    }
}
