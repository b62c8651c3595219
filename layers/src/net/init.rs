//! Parameter initialisation: PyTorch's default for convolutions and fully
//! connected layers (`kaiming_uniform_(a=√5)`, which is uniform in
//! ±1/√fan_in, and the same bound for biases), seeded.

use super::graph::{Graph, Op};
pub use crate::core::init::{fan_in_uniform, layer_seed};
use cnnbench_kernels::rng::{fill_uniform, SplitMix64};

/// The image batch (NHWC), uniform in ±1.
pub fn input(graph: &Graph, batch: usize, seed: u64) -> Vec<f32> {
    let mut x = vec![0.0; batch * graph.nodes[0].out.len()];
    fill_uniform(&mut x, seed, 1.0);
    x
}

/// One seeded class per image.
pub fn labels(graph: &Graph, batch: usize, seed: u64) -> Vec<u32> {
    let mut rng = SplitMix64::new(seed ^ 0x1abe1);
    let classes = graph.classes() as u64;
    (0..batch)
        .map(|_| (rng.next_u64() % classes) as u32)
        .collect()
}

/// Node `i`'s initial parameters in the CPU layers' order (weight, then
/// bias): what every backend starts from, so that they can be compared.
pub fn layer_params(graph: &Graph, i: usize, seed: u64) -> Vec<Vec<f32>> {
    let node = &graph.nodes[i];
    let s = layer_seed(seed, i);
    match node.op {
        Op::Conv(c) => {
            let shape = graph.conv_shape(i, 1);
            let fan_in = shape.icg() * shape.taps();
            let mut p = vec![fan_in_uniform(shape.wei_len(), fan_in, s)];
            if c.bias {
                p.push(fan_in_uniform(c.oc, fan_in, s ^ 1));
            }
            p
        }
        Op::Linear { out } => {
            let inf = graph.nodes[node.inputs[0]].out.len();
            vec![
                fan_in_uniform(inf * out, inf, s),
                fan_in_uniform(out, inf, s ^ 1),
            ]
        }
        Op::BatchNorm { .. } => {
            let c = node.out.c;
            vec![vec![1.0; c], vec![0.0; c]]
        }
        _ => Vec::new(),
    }
}
