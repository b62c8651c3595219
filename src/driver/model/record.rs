//! What a model's record holds before it runs, and its training FLOPs:
//! shared by the CPU, GPU and data-parallel paths.

use crate::results::{self, ModelRecord};
use cnnbench_layers::net::Graph;
use cnnbench_layers::DType;

/// Where and in which precision and layout a model ran.
pub type RunKind = (results::Device, DType, &'static str);

/// The CPU path's only precision and layout.
pub const CPU: RunKind = (results::Device::Cpu, DType::F32, "nhwc");

/// Training FLOPs of one step at `batch`: forward 2·MACs; backward 2·MACs
/// for the weights, and 2·MACs for the data gradient except where the
/// layer's input is the image.
pub fn step_flops(g: &Graph, batch: usize) -> u64 {
    let mut f = 0;
    for (i, n) in g.nodes.iter().enumerate() {
        let m = g.node_macs(i);
        let data = if n.inputs.first() == Some(&0) {
            0
        } else {
            2 * m
        };
        f += 4 * m + data;
    }
    f * batch as u64
}

/// A record with what is known before running: `device` is `cpu` or
/// `gpu`, the dtype and layout those of the run.
pub fn base_record(
    g: &Graph,
    batch: usize,
    status: &str,
    (device, dtype, layout): RunKind,
) -> ModelRecord {
    ModelRecord {
        model: g.name.clone(),
        batch,
        device,
        dtype,
        layout: layout.into(),
        params: g.params(),
        macs: g.macs(),
        status: status.into(),
        forward_ms: None,
        backward_ms: None,
        update_ms: None,
        total_ms: None,
        images_per_sec: None,
        gflops: None,
        runs: 0,
        loss: None,
        memory: None,
        fused: None,
        gpu_paths: None,
        eager_total_ms: None,
        layers: Vec::new(),
        roofline: None,
        data_parallel: None,
        projection: None,
        input: results::Input::default(),
    }
}
