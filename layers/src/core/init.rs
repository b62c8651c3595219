//! Seeded parameter initialisation shared by every op: PyTorch's default
//! for convolutions and fully connected layers (`kaiming_uniform_(a=√5)`,
//! which is uniform in ±1/√fan_in, and the same bound for biases).

use cnnbench_kernels::rng::fill_uniform;

/// `len` values uniform in `[-1/√fan_in, 1/√fan_in)`.
pub fn fan_in_uniform(len: usize, fan_in: usize, seed: u64) -> Vec<f32> {
    let mut v = vec![0.0; len];
    fill_uniform(&mut v, seed, 1.0 / (fan_in.max(1) as f32).sqrt());
    v
}

/// The seed of node `i`'s parameters.
pub fn layer_seed(seed: u64, i: usize) -> u64 {
    seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}
