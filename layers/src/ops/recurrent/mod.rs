//! Recurrent layers: one layer of vanilla RNN (ReLU or tanh), LSTM or GRU
//! cells over a sequence (`1 x t x c`, time along `w`), left to right or
//! bidirectional (the two directions' features concatenated), returning
//! every step's output (`1 x t x dirs·h`) or the last step's (`1 x 1 x
//! dirs·h`: each direction's final state, as Keras's
//! `Bidirectional(LSTM(h))` concatenates them).
//!
//! Biases are those of Keras's LSTM: one per gate. PyTorch and cuDNN add
//! a second, on the recurrent side; it is held at zero and is not a
//! parameter, so an LSTM's parameter count is Keras's,
//! `dirs·gates·h·(c + h + 1)`. (The GRU is cuDNN's and PyTorch's, with the
//! reset gate applied after the recurrent product and that product's bias
//! held at zero; Keras's GRU keeps that bias (`reset_after=True`, TF 2)
//! or applies the reset gate first (Keras 2.x), so its counts differ.)

pub mod cpu;
pub mod cuda;
pub mod cudnn_descs;
pub mod cudnn_problem;
pub mod cudnn_space;
pub mod cudnn_weights;

use crate::backend::cpu::Cpu;
use crate::backend::cuda::backend::Cuda;
use crate::backend::cuda::GpuResult;
use crate::core::backend::Layer;
use crate::core::error::Result;
use crate::core::init::fan_in_uniform;
use crate::core::shape::Dims;
use crate::ops::spec::{one_input, weighted, NodeCx, OpSpec, Traffic};
pub use cnnbench_kernels::rnn::Cell;
use cnnbench_kernels::rnn::{Direction, RnnShape, Workspace};
pub use cpu::RecurrentLayer;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecurrentSpec {
    pub cell: Cell,
    pub hidden: usize,
    pub bidirectional: bool,
    /// Every step's output (Keras's `return_sequences=True`), or the last.
    pub sequences: bool,
}

/// The parameter names of one direction, PyTorch's (`bias_ih`: the one
/// bias kept), and of the reverse direction.
const NAMES: [&str; 6] = [
    "weight_ih_l0",
    "weight_hh_l0",
    "bias_ih_l0",
    "weight_ih_l0_reverse",
    "weight_hh_l0_reverse",
    "bias_ih_l0_reverse",
];

impl RecurrentSpec {
    pub fn directions(&self) -> usize {
        if self.bidirectional {
            2
        } else {
            1
        }
    }

    /// The kernels' problem for a `1 x t x c` input at batch `mb`.
    pub fn shape(&self, x: Dims, mb: usize) -> RnnShape {
        RnnShape {
            cell: self.cell,
            direction: if self.bidirectional {
                Direction::Concat
            } else {
                Direction::Left2Right
            },
            layers: 1,
            t: x.w,
            mb,
            input: x.c,
            hidden: self.hidden,
        }
    }

    /// Element counts of one direction's `weight_ih`, `weight_hh`, `bias`.
    pub fn direction_sizes(&self, input: usize) -> [usize; 3] {
        let gh = self.cell.gates() * self.hidden;
        [gh * input, gh * self.hidden, gh]
    }

    /// Every parameter's element count, in the layers' order.
    pub fn param_sizes(&self, input: usize) -> Vec<usize> {
        let one = self.direction_sizes(input);
        (0..self.directions()).flat_map(|_| one).collect()
    }
}

impl OpSpec for RecurrentSpec {
    fn kind(&self) -> &'static str {
        match self.cell {
            Cell::Lstm => "lstm",
            Cell::Gru => "gru",
            Cell::RnnTanh => "rnn-tanh",
            Cell::RnnRelu => "rnn-relu",
        }
    }

    fn out(&self, x: &[Dims]) -> std::result::Result<Dims, String> {
        let d = one_input(x)?;
        if d.h != 1 {
            return Err(format!(
                "reads a sequence (1 x t x features), not {}x{}x{}",
                d.h, d.w, d.c
            ));
        }
        if self.hidden == 0 {
            return Err("has 0 hidden features".into());
        }
        let f = self.directions() * self.hidden;
        Ok(if self.sequences {
            Dims::new(1, d.w, f)
        } else {
            Dims::new(1, 1, f)
        })
    }

    fn param_sizes(&self, x: &[Dims]) -> Vec<usize> {
        // The inherent `param_sizes`, of the input's features.
        RecurrentSpec::param_sizes(self, x[0].c)
    }

    fn nhwc_only(&self) -> bool {
        true
    }

    /// Every step's gates, kept for the backward pass.
    fn cpu_scratch_bytes(&self, x: &[Dims], batch: usize) -> u128 {
        let shape = self.shape(x[0], batch);
        Workspace::bytes_for(&shape).map_or(u128::MAX / 2, |b| b as u128)
    }

    /// The GEMMs: per step and direction, `gates·h·(c + h)`.
    fn macs(&self, x: &[Dims], _y: Dims) -> u64 {
        let gh = (self.cell.gates() * self.hidden) as u64;
        (self.directions() * x[0].w) as u64 * gh * (x[0].c + self.hidden) as u64
    }

    fn param_name(&self, k: usize) -> &'static str {
        NAMES[k % NAMES.len()]
    }

    /// PyTorch's: every tensor uniform in ±1/√h.
    fn init(&self, cx: &NodeCx) -> Vec<Vec<f32>> {
        let s = cx.layer_seed();
        self.param_sizes(cx.x[0].c)
            .into_iter()
            .enumerate()
            .map(|(k, len)| fan_in_uniform(len, self.hidden, s ^ k as u64))
            .collect()
    }

    /// As a convolution's ([`weighted`]): the sequence in, the outputs,
    /// the weights and their gradients. The gates and states kept for the
    /// backward pass (cuDNN's reserve space) are not counted.
    fn traffic(&self, x: &[Dims], y: Dims, input_grad: bool) -> Traffic {
        let p = OpSpec::param_sizes(self, x);
        let all = p.iter().sum();
        weighted(x[0], y, all, all, input_grad)
    }

    fn cpu(&self, cx: &NodeCx) -> Result<Box<dyn Layer<Cpu>>> {
        let shape = self.shape(cx.x[0], cx.batch);
        RecurrentLayer::new(shape, self.sequences, self.init(cx), cx.input_grad)
            .map(|l| Box::new(l) as Box<dyn Layer<Cpu>>)
    }

    fn cuda<'g>(&self, cx: &NodeCx, b: &Cuda<'g>) -> GpuResult<Option<Box<dyn Layer<Cuda<'g>>>>> {
        cuda::layer(self, cx, b)
    }
}
