//! Recurrent layers on the CPU: vanilla RNN (ReLU or tanh), LSTM and GRU,
//! stacked and uni- or bidirectional, forward and backward through time,
//! in PyTorch's `nn.RNN`/`nn.LSTM`/`nn.GRU` weight layout.
//!
//! The work is split as cuDNN splits it, so the two can be timed alike:
//! - [`forward`]: per layer and direction, the input's product for every
//!   time step as one GEMM (`[t·mb, in] x [in, gates·h]`), or, where
//!   `W_ih` stays in cache ([`input_product_per_step`]) or the weights
//!   pack (`matrix::pack_for_steps`), per step; then per step the biases,
//!   the hidden state's product (a GEMM accumulated onto it, or beside it
//!   for the GRU) and one fused pass over the gates ([`gates`]); where the
//!   weights pack, a team of threads runs the whole time loop
//!   (`team_steps`), each member the same hidden units at every step;
//! - [`backward_data`]: back through time, per step the fused backward
//!   pass and the recurrent GEMM giving the previous state's gradient,
//!   then the input's gradient for every step as one GEMM;
//! - [`backward_weights`]: the weight gradients as two GEMMs over all
//!   time steps and the bias gradients as column sums.
//!
//! Tensors are time-major (`[t][mb][features]`, PyTorch's default and
//! cuDNN's packed layout); states are `[layers·directions][mb][h]`.

mod backward;
mod forward;
pub mod gates;
mod matrix;
pub mod reference;
mod shape;
mod team;
mod team_steps;
#[cfg(test)]
mod tests;
mod workspace;

pub use backward::{backward_data, backward_weights, OutputGrads};
pub use forward::forward;
pub use matrix::input_product_per_step;
pub use shape::{Cell, Direction, Outputs, RnnShape, Weights};
pub use workspace::{Inputs, Workspace};
