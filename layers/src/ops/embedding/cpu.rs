//! The CPU side.

use crate::backend::cpu::{Cpu, Ctx, Param};
use crate::core::backend::Layer;
use crate::core::error::{Error, Result};
use cnnbench_kernels::embedding;

pub struct EmbeddingLayer {
    dim: usize,
    table: Param,
}

impl EmbeddingLayer {
    /// A table of `table.len() / dim` rows of `dim` features.
    pub fn new(dim: usize, table: Vec<f32>) -> EmbeddingLayer {
        EmbeddingLayer {
            dim,
            table: Param::new(table),
        }
    }
}

impl Layer<Cpu> for EmbeddingLayer {
    fn forward(&mut self, _: &mut Ctx, inputs: &[&[f32]], out: &mut [f32]) -> Result<()> {
        embedding::forward(&self.table.value, self.dim, inputs[0], out)
            .map_err(|why| Error::invalid("embedding", why))
    }

    /// The table's gradient; token ids have none.
    fn backward(
        &mut self,
        _: &mut Ctx,
        inputs: &[&[f32]],
        _out: &[f32],
        dys: &[&[f32]],
        _dxs: &mut [Option<&mut [f32]>],
    ) -> Result<()> {
        embedding::backward(&mut self.table.grad, self.dim, inputs[0], dys[0]);
        Ok(())
    }

    fn params(&mut self) -> Vec<&mut Param> {
        vec![&mut self.table]
    }

    fn params_ref(&self) -> Vec<&Param> {
        vec![&self.table]
    }

    fn kernels(&self) -> String {
        "row gather; dense scatter-add gradient".into()
    }
}
