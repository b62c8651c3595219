//! Embedding: a sequence of token ids (the network's input, `1 x t x 1`,
//! held as f32 whatever the run's precision) to one learned row of
//! `dim` features per token (`1 x t x dim`), as Keras's `Embedding` and
//! PyTorch's `nn.Embedding` (dense gradient).

pub mod cpu;
pub mod cuda;
pub mod kernels;

use crate::backend::cpu::Cpu;
use crate::backend::cuda::backend::Cuda;
use crate::backend::cuda::GpuResult;
use crate::core::backend::Layer;
use crate::core::error::Result;
use crate::core::shape::Dims;
use crate::ops::spec::{one_input, Elements, NodeCx, OpSpec, Traffic};
use cnnbench_kernels::rng::fill_uniform;
pub use cpu::EmbeddingLayer;

/// A `[vocab][dim]` table looked up by token id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmbeddingSpec {
    pub vocab: usize,
    pub dim: usize,
}

/// Keras's default initializer for `Embedding`: uniform in ±0.05.
const INIT_SCALE: f32 = 0.05;

impl OpSpec for EmbeddingSpec {
    fn kind(&self) -> &'static str {
        "embedding"
    }

    fn out(&self, x: &[Dims]) -> std::result::Result<Dims, String> {
        // f32 holds every whole number up to 2^24 exactly.
        if self.vocab == 0 || self.vocab > 1 << 24 {
            return Err(format!(
                "has a vocabulary of {}: 1 to 2^24 ids fit in the f32 input",
                self.vocab
            ));
        }
        match one_input(x)? {
            d if d.h == 1 && d.c == 1 => Ok(Dims::new(1, d.w, self.dim)),
            d => Err(format!(
                "reads a sequence of token ids (1 x t x 1), not {}x{}x{}",
                d.h, d.w, d.c
            )),
        }
    }

    fn param_sizes(&self, _x: &[Dims]) -> Vec<usize> {
        vec![self.vocab * self.dim]
    }

    fn id_vocab(&self) -> Option<usize> {
        Some(self.vocab)
    }

    fn init(&self, cx: &NodeCx) -> Vec<Vec<f32>> {
        let mut table = vec![0.0; self.vocab * self.dim];
        fill_uniform(&mut table, cx.layer_seed(), INIT_SCALE);
        vec![table]
    }

    /// Forward: the ids read, a table row read and written per id.
    /// Backward: `dy` and the ids read, and the table's whole gradient
    /// written (dense, as the SGD step reads it; rows no id chose are
    /// zeros). The ids count at the run's element size, though they are
    /// held as f32.
    fn traffic(&self, x: &[Dims], y: Dims, _input_grad: bool) -> Traffic {
        let ids = x[0].len();
        Traffic {
            forward: Elements::per_image(ids + 2 * y.len()),
            backward: Elements::per_image(ids + y.len()).plus_fixed(self.vocab * self.dim),
        }
    }

    fn cpu(&self, cx: &NodeCx) -> Result<Box<dyn Layer<Cpu>>> {
        let table = self.init(cx).pop().unwrap_or_default();
        Ok(Box::new(EmbeddingLayer::new(self.dim, table)))
    }

    fn cuda<'g>(&self, cx: &NodeCx, b: &Cuda<'g>) -> GpuResult<Option<Box<dyn Layer<Cuda<'g>>>>> {
        cuda::layer(self, cx, b)
    }
}
