//! One measured model: a training step's forward and backward times with
//! their statistics, throughput, size and memory, and optionally the
//! per-layer breakdown. The JSON and CSV contract of `cnnbench model`.

use super::kinds::{dtype_name, Device};
use super::roofline::{LayerRoofline, RooflineBasis};
use crate::bench::Stats;
use cnnbench_layers::DType;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelRecord {
    pub model: String,
    pub batch: usize,
    pub device: Device,
    #[serde(with = "dtype_name")]
    pub dtype: DType,
    pub layout: String,
    pub params: usize,
    /// Forward multiply-accumulates per image (convolutions and fully
    /// connected layers).
    pub macs: u64,
    /// `ok`, or `OOM` (then no times).
    pub status: String,
    pub forward_ms: Option<Stats>,
    pub backward_ms: Option<Stats>,
    /// The SGD step, with `--update sgd`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_ms: Option<Stats>,
    /// Per step: forward + backward (+ update).
    pub total_ms: Option<Stats>,
    pub images_per_sec: Option<f64>,
    /// Training FLOPs of the step (forward 2·MACs; backward 2·MACs for the
    /// weights and 2·MACs for the data gradient, except where the input is
    /// the image) over the median step.
    pub gflops: Option<f64>,
    pub runs: usize,
    /// The loss of the last timed step (finite, or the numbers are suspect).
    pub loss: Option<f32>,
    pub memory: Option<MemoryBytes>,
    /// Layers run inside others' passes: `relu` when each ReLU that alone
    /// reads a batch norm's or residual add's output ran inside it (CPU,
    /// unless `--no-fuse`; GPU batch norms with `--fuse-bn`), `add+relu`
    /// when residual adds ran with their ReLUs inside the batch norm before
    /// them (GPU, `--fuse-bn`), comma-separated; absent when every layer
    /// ran on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fused: Option<String>,
    /// The optional GPU paths the run took, `+`-joined
    /// (`own-kernels+fuse-bn+cuda-graph+api-graph`); absent on the default
    /// path and on the CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_paths: Option<String>,
    /// With `--cuda-graph`: the eager step's total, timed first under the
    /// same policy; the main numbers are then the CUDA graph's step (its
    /// `total_ms`, forward and backward not observable apart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eager_total_ms: Option<Stats>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<LayerTime>,
    /// With `--per-layer`: the bandwidth and peak each layer's passes are
    /// placed against (`layers[].roofline`), measured once before the
    /// timed steps; absent otherwise and in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roofline: Option<RooflineBasis>,
    /// A data-parallel run over several GPUs (then `batch` is per GPU, as
    /// tf_cnn_benchmarks counts it, and `images_per_sec` is the total).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_parallel: Option<DataParallel>,
    /// `--project-gpus`: this run's step projected on more GPUs, from its
    /// per-layer backward times (a model, not a measurement).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub projection: Option<ProjectionSet>,
    /// Where the images came from (records from before `--data` existed
    /// read as synthetic).
    #[serde(default)]
    pub input: Input,
}

/// Where a step's images came from, and whether the loader kept up.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Input {
    /// Seeded random tensors set once (`synthetic`), or files read,
    /// decoded and transformed for every step (`folder`).
    pub source: InputSource,
    /// The rest is about a folder; absent for synthetic input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folder: Option<FolderInput>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InputSource {
    #[default]
    Synthetic,
    Folder,
}

impl InputSource {
    pub fn name(self) -> &'static str {
        match self {
            InputSource::Synthetic => "synthetic",
            InputSource::Folder => "folder",
        }
    }
}

/// A real-data run: the ImageFolder tree, the loader, and how long each
/// step waited for it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FolderInput {
    /// The tree as given on the command line.
    pub path: String,
    /// Readable-looking image files found, and their classes.
    pub images: usize,
    pub classes: usize,
    /// Files that would not decode, so far (each replaced by the next).
    pub skipped: usize,
    /// `train` (RandomResizedCrop + flip) or `eval` (resize + center crop).
    pub transform: String,
    /// The decoder that read the JPEGs.
    pub decoder: String,
    pub loader_threads: usize,
    /// Batches the loader may hold, the one the step is using included.
    pub prefetch: usize,
    /// What the loader can deliver: images per second of its threads' busy
    /// time, times its threads (while the steps ran beside it).
    pub loader_images_per_sec: f64,
    /// Per step: waiting for the next batch, copying it in and setting its
    /// labels (part of the step's total).
    pub wait_ms: Stats,
    /// The step waited for the loader for more than 5% of its median.
    pub input_bound: bool,
}

/// Projections of one measured record and what they assume.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProjectionSet {
    pub interconnect: crate::dist::interconnect::Interconnect,
    pub gpus_per_node: usize,
    pub assumptions: Vec<String>,
    pub rows: Vec<crate::dist::project::Projection>,
}

/// How a data-parallel step ran: over how many GPUs, how the gradients
/// travelled, and what the GPUs gained over one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DataParallel {
    /// Replicas, one per GPU (NCCL's world size).
    pub gpus: usize,
    /// `in-process` (`--gpus`), `torchrun` or `slurm`.
    pub launcher: String,
    /// The NCCL that all-reduced the gradients.
    pub nccl: String,
    /// Gradient buckets per step, and the fp32 bytes all-reduced.
    pub buckets: usize,
    pub gradient_bytes: usize,
    /// Per step: from the end of the backward pass until the last bucket's
    /// all-reduce finished (the slowest replica's).
    pub exposed_comm_ms: Stats,
    /// Each replica's median step, rank order.
    pub rank_step_ms: Vec<f64>,
    pub images_per_sec_per_gpu: f64,
    /// The same configuration on one GPU without NCCL, timed in this run
    /// first (rank 0's GPU): its median step.
    pub single_gpu_step_ms: f64,
    /// `gpus` x the single-GPU step over the data-parallel step.
    pub speedup: f64,
    /// `speedup / gpus`.
    pub efficiency: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryBytes {
    /// Parameters, their gradients and momentum buffers.
    pub params: usize,
    /// Layer outputs and their gradients (and, with real input, the next
    /// batch staged during the step).
    pub activations: usize,
    /// Convolution workspaces, masks and saved statistics.
    pub workspace: usize,
    pub total: usize,
}

/// One layer's share of the step: medians over the timed steps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerTime {
    pub name: String,
    pub kind: String,
    /// `CxHxW`, or `C` for a vector.
    pub output: String,
    #[serde(deserialize_with = "crate::bench::stats::f64_or_nan")]
    pub forward_ms: f64,
    #[serde(deserialize_with = "crate::bench::stats::f64_or_nan")]
    pub backward_ms: f64,
    /// (forward + backward) over the median step, in percent.
    #[serde(deserialize_with = "crate::bench::stats::f64_or_nan")]
    pub percent: f64,
    /// Algorithms per direction (convolutions).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kernels: String,
    /// Bytes moved, FLOPs, rates and the roofline per pass; absent in
    /// older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roofline: Option<LayerRoofline>,
}

/// The peer script's columns, then `gpus` (replicas of a data-parallel
/// run; 1 otherwise), `input` (`synthetic`, or `folder`), `gpu_paths` and
/// `eager_total_ms` (the eager step's median in a `--cuda-graph` run),
/// which readers by column name take or pass over.
pub const MODEL_CSV_HEADER: [&str; 25] = [
    "model",
    "batch",
    "device",
    "dtype",
    "layout",
    "params",
    "macs",
    "fwd_ms_min",
    "fwd_ms_median",
    "fwd_ms_max",
    "fwd_ms_mean",
    "fwd_ms_stddev",
    "bwd_ms_min",
    "bwd_ms_median",
    "bwd_ms_max",
    "bwd_ms_mean",
    "bwd_ms_stddev",
    "total_ms_median",
    "images_per_sec",
    "runs",
    "status",
    "gpus",
    "input",
    "gpu_paths",
    "eager_total_ms",
];

impl ModelRecord {
    /// The CSV row, the same columns `scripts/peers/pytorch_model.py` prints.
    pub fn csv_row(&self) -> Vec<String> {
        let stats = |s: &Option<Stats>| -> Vec<String> {
            match s {
                Some(s) => [s.min, s.median, s.max, s.mean, s.stddev]
                    .iter()
                    .map(|v| format!("{v:.3}"))
                    .collect(),
                None => vec![String::new(); 5],
            }
        };
        let mut row = vec![
            self.model.clone(),
            self.batch.to_string(),
            self.device.to_string(),
            self.dtype.to_string(),
            self.layout.clone(),
            self.params.to_string(),
            self.macs.to_string(),
        ];
        row.extend(stats(&self.forward_ms));
        row.extend(stats(&self.backward_ms));
        row.push(
            self.total_ms
                .map_or(String::new(), |s| format!("{:.3}", s.median)),
        );
        row.push(
            self.images_per_sec
                .map_or(String::new(), |v| format!("{v:.1}")),
        );
        row.push(self.runs.to_string());
        row.push(self.status.clone());
        row.push(
            self.data_parallel
                .as_ref()
                .map_or(1, |d| d.gpus)
                .to_string(),
        );
        row.push(self.input.source.name().to_string());
        row.push(self.gpu_paths.clone().unwrap_or_default());
        row.push(
            self.eager_total_ms
                .map_or(String::new(), |s| format!("{:.3}", s.median)),
        );
        row
    }
}
