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
use crate::ops::spec::{one_input, NodeCx, OpSpec};
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

    fn cpu(&self, cx: &NodeCx) -> Result<Box<dyn Layer<Cpu>>> {
        let table = self.init(cx).pop().unwrap_or_default();
        Ok(Box::new(EmbeddingLayer::new(self.dim, table)))
    }

    fn cuda<'g>(&self, cx: &NodeCx, b: &Cuda<'g>) -> GpuResult<Option<Box<dyn Layer<Cuda<'g>>>>> {
        cuda::layer(self, cx, b)
    }
}
