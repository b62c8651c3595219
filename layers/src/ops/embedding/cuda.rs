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
//! With `--own-kernels` the gradient is summed without atomics: the tokens
//! sorted by row, each row summed in token order (`embedding.cu`), which is
//! deterministic and has no contention on frequent rows (a padding id).

use super::kernels::{EmbeddingDims, SortScratch};
use crate::backend::cuda::backend::{Cuda, DevPtr, GpuCtx, GpuParam, HostOrder};
use crate::backend::cuda::{DeviceBuffer, GpuResult};
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
    let mut layer = EmbeddingGpuLayer::new(d, b.dtype, table);
    if b.paths.own_kernels {
        layer.sorted = Some(SortBuffers::new(b, d)?);
    }
    Ok(Some(Box::new(layer)))
}

/// The sorted gradient's scratch, allocated once.
struct SortBuffers {
    bufs: Vec<DeviceBuffer>,
    scratch: SortScratch,
}

impl SortBuffers {
    fn new(b: &Cuda, d: EmbeddingDims) -> GpuResult<SortBuffers> {
        let len = d.sort_scratch()?;
        let sizes = [
            len.tokens,
            len.tokens,
            len.tokens,
            len.tokens,
            len.hist,
            len.partials,
            len.partials,
        ];
        let bufs = sizes
            .iter()
            .map(|&n| DeviceBuffer::alloc(&b.gpu.stream, 4 * n))
            .collect::<GpuResult<Vec<_>>>()?;
        let p: Vec<_> = bufs.iter().map(DeviceBuffer::ptr).collect();
        let scratch = SortScratch {
            keys: [p[0], p[1]],
            vals: [p[2], p[3]],
            hist: p[4],
            head: p[5],
            tail: p[6],
        };
        Ok(SortBuffers { bufs, scratch })
    }

    fn bytes(&self) -> usize {
        self.bufs.iter().map(DeviceBuffer::bytes).sum()
    }
}

pub struct EmbeddingGpuLayer {
    d: EmbeddingDims,
    dtype: DType,
    /// `[vocab][dim]`, f32 master and gradient.
    table: GpuParam,
    /// With `--own-kernels`: the sorted gradient's scratch.
    sorted: Option<SortBuffers>,
}

impl EmbeddingGpuLayer {
    pub fn new(d: EmbeddingDims, dtype: DType, table: GpuParam) -> Self {
        EmbeddingGpuLayer {
            d,
            dtype,
            table,
            sorted: None,
        }
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
        if let Some(s) = &self.sorted {
            // SAFETY: as below; the scratch was sized for these dims and
            // only this layer's work uses it, in stream order.
            return unsafe {
                cx.kernels.embedding_bwd_sorted(
                    &cx.gpu.stream,
                    self.dtype.storage(),
                    x[0],
                    dy[0],
                    self.table.grad.ptr(),
                    &s.scratch,
                    self.d,
                )
            };
        }
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

    fn scratch_bytes(&self) -> usize {
        self.sorted.as_ref().map_or(0, SortBuffers::bytes)
    }

    fn kernels(&self) -> String {
        match self.sorted {
            Some(_) => "nvrtc embedding gather; sorted segmented-sum gradient (no atomics)".into(),
            None => "nvrtc embedding gather; zeroed atomicAdd scatter gradient".into(),
        }
    }
}
