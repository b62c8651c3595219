//! Embedding on cnnbench's NVRTC kernels (`embedding.cu`): a row gather
//! into the run's dtype and layout, and a dense table gradient (zeroed,
//! then every token's output gradient added with f32 atomics). The table
//! stays f32 in every precision, with no half copy: the gather reads the
//! master values directly, so there is nothing to refresh after an update.
//!
//! Ids come from the network's input, f32 in every precision. An id that
//! is not a whole number below the vocabulary selects no row (zeros out,
//! no gradient): the CPU refuses it, which the GPU cannot do without a
//! host round trip per step.
//!
//! A gradient without atomics (the tokens radix-sorted by row, each row
//! summed in token order) ran under `--own-kernels` until the H200 run of
//! 56f71b5 measured it at 0.150 ms against the atomics' 0.015 ms on
//! imdb-fasttext (51,200 tokens into 20,000 rows), and was removed.

use super::kernels::EmbeddingDims;
use crate::backend::cuda::backend::{Cuda, DevPtr, GpuCtx, GpuParam, HostOrder};
use crate::backend::cuda::GpuResult;
use crate::core::backend::Layer;
use crate::core::error::Error;
use crate::core::{DType, Layout};
use crate::ops::spec::{NodeCx, OpSpec};

/// The embedding layer of `spec` for the node `cx` on `b`.
pub fn layer<'g>(
    spec: &super::EmbeddingSpec,
    cx: &NodeCx,
    b: &Cuda<'g>,
) -> GpuResult<Option<Box<dyn Layer<Cuda<'g>>>>> {
    // Only the network's input holds ids as f32 (Graph::input_vocab);
    // another node's output would be in the run's dtype.
    if cx.input_grad {
        return Err(Error::invalid(
            "make layer",
            "an embedding on the GPU reads token ids from the network's input only".into(),
        ));
    }
    let table = spec.init(cx).pop().unwrap_or_default();
    let d = EmbeddingDims {
        n: cx.batch,
        t: cx.x[0].w,
        dim: spec.dim,
        vocab: spec.vocab,
        nchw: b.layout == Layout::Nchw,
    };
    let table = b.param(&table, HostOrder::Plain, None)?;
    Ok(Some(Box::new(EmbeddingGpuLayer::new(d, b.dtype, table))))
}

pub struct EmbeddingGpuLayer {
    d: EmbeddingDims,
    dtype: DType,
    /// `[vocab][dim]`, f32 master and gradient.
    table: GpuParam,
}

impl EmbeddingGpuLayer {
    pub fn new(d: EmbeddingDims, dtype: DType, table: GpuParam) -> Self {
        EmbeddingGpuLayer { d, dtype, table }
    }
}

impl<'g> Layer<Cuda<'g>> for EmbeddingGpuLayer {
    fn forward(&mut self, cx: &mut GpuCtx<'g>, x: &[DevPtr], y: DevPtr) -> GpuResult<()> {
        // SAFETY: x holds n·t f32 ids, the table vocab·dim f32s and y
        // n·t·dim elements of the dtype, as the executor sized them.
        unsafe {
            cx.kernels.embedding_fwd(
                &cx.gpu.stream,
                self.dtype.storage(),
                x[0],
                self.table.value.ptr(),
                y,
                self.d,
            )
        }
    }

    /// The table's gradient; token ids have none.
    fn backward(
        &mut self,
        cx: &mut GpuCtx<'g>,
        x: &[DevPtr],
        _y: DevPtr,
        dy: &[DevPtr],
        _dx: &mut [Option<DevPtr>],
    ) -> GpuResult<()> {
        self.table.grad.fill_bytes(0)?;
        // SAFETY: as in `forward`; dy is laid out as y and the gradient
        // holds vocab·dim f32s, zeroed above in stream order.
        unsafe {
            cx.kernels.embedding_bwd(
                &cx.gpu.stream,
                self.dtype.storage(),
                x[0],
                dy[0],
                self.table.grad.ptr(),
                self.d,
            )
        }
    }

    fn params(&mut self) -> Vec<&mut GpuParam> {
        vec![&mut self.table]
    }

    fn params_ref(&self) -> Vec<&GpuParam> {
        vec![&self.table]
    }

    fn kernels(&self) -> String {
        "nvrtc embedding gather; zeroed atomicAdd scatter gradient".into()
    }
}
