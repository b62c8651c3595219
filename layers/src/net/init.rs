//! Parameter initialisation: PyTorch's default for convolutions and fully
//! connected layers (`kaiming_uniform_(a=√5)`, which is uniform in
//! ±1/√fan_in, and the same bound for biases), seeded.

use super::graph::Graph;
pub use crate::core::init::{fan_in_uniform, layer_seed};
use cnnbench_kernels::rng::{fill_uniform, SplitMix64};

/// The image batch (NHWC), uniform in ±1; or, for a network that reads
/// token ids, ids drawn uniformly from its vocabulary.
pub fn input(graph: &Graph, batch: usize, seed: u64) -> Vec<f32> {
    let len = batch * graph.nodes[0].out.len();
    if let Some(vocab) = graph.input_vocab() {
        let mut rng = SplitMix64::new(seed ^ 0x70c3);
        return (0..len)
            .map(|_| (rng.next_u64() % vocab.max(1) as u64) as f32)
            .collect();
    }
    let mut x = vec![0.0; len];
    fill_uniform(&mut x, seed, 1.0);
    x
}

/// One seeded class per image.
pub fn labels(graph: &Graph, batch: usize, seed: u64) -> Vec<u32> {
    let mut rng = SplitMix64::new(seed ^ 0x1abe1);
    let classes = graph.label_classes() as u64;
    (0..batch)
        .map(|_| (rng.next_u64() % classes) as u32)
        .collect()
}

/// Node `i`'s initial parameters in the CPU layers' order (weight, then
/// bias): what every backend starts from ([`crate::ops::spec::OpSpec::init`]).
pub fn layer_params(graph: &Graph, i: usize, seed: u64) -> Vec<Vec<f32>> {
    let x = graph.input_dims(i);
    let cx = graph.node_cx(i, 1, seed, &x, &[]);
    graph.nodes[i].op.spec().init(&cx)
}
