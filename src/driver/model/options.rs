//! What every step of a model run is taken with, decided once by the
//! command line: the bottom of the model pipeline (it uses none of it).

/// The options of a model run's training steps.
#[derive(Clone, Copy, Debug)]
pub struct StepOptions {
    /// Images per step (per GPU in a data-parallel run).
    pub batch: usize,
    /// Include a weight update in every step (SGD, momentum 0.9, lr 0.01).
    pub update: bool,
    /// Also time each layer's forward and backward pass.
    pub per_layer: bool,
    /// The seed of the parameters and the synthetic input.
    pub seed: u64,
    /// CPU: run each ReLU inside the batch norm or residual add before it,
    /// and each residual add with its ReLU inside the batch norm before it.
    pub fuse_relu: bool,
    /// GPU: the optional paths the steps take (all off by default).
    pub paths: cnnbench_layers::cuda::GpuPaths,
}
