//! Launch wrappers of `embedding.cu` (row gather, atomic scatter-add
//! gradient), on the compiled [`Kernels`].

use crate::backend::cuda::kernel_name::{per_storage, PerStorage};
use crate::backend::cuda::nvrtc::{blocks_for, invalid, to_i32, to_u64, Arg, Kernels, Program};
use crate::backend::cuda::GpuResult;
use crate::core::dtype::Storage;
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::CudaStream;

/// One instance per storage of the output (and its gradient)
/// ([`per_storage!`]).
pub(crate) const EMBEDDING_FWD: PerStorage = per_storage!("embedding_fwd");
pub(crate) const EMBEDDING_BWD: PerStorage = per_storage!("embedding_bwd");

/// `embedding.cu` and its kernels.
pub const PROGRAM: Program = Program {
    file: "embedding.cu",
    source: include_str!("embedding.cu"),
    per_storage: &[EMBEDDING_FWD, EMBEDDING_BWD],
    single: &[],
};

/// An embedding's sizes: `n` sequences of `t` tokens, rows of `dim`
/// features out of `vocab`, the output NCHW (`[n][dim][1][t]`) when
/// `nchw`, else NHWC (`[n][t][dim]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmbeddingDims {
    pub n: usize,
    pub t: usize,
    pub dim: usize,
    pub vocab: usize,
    pub nchw: bool,
}

impl EmbeddingDims {
    /// The kernels' arguments after their pointers, and the output's
    /// element count (0: nothing to launch).
    fn args(&self, name: &'static str) -> GpuResult<(Vec<Arg>, u64)> {
        let tokens = self
            .n
            .checked_mul(self.t)
            .ok_or_else(|| invalid(name, format!("{}·{} tokens", self.n, self.t)))?;
        let len = tokens
            .checked_mul(self.dim)
            .ok_or_else(|| invalid(name, format!("{tokens}·{} elements", self.dim)))?;
        let args = vec![
            Arg::U64(to_u64(name, tokens)?),
            Arg::I32(to_i32(name, "dim", self.dim)?),
            Arg::I32(to_i32(name, "vocab", self.vocab)?),
            Arg::I32(to_i32(name, "t", self.t)?),
            Arg::I32(self.nchw as i32),
        ];
        Ok((args, to_u64(name, len)?))
    }
}

impl Kernels {
    /// `y = table[ids]`: each token's row of the f32 `table`
    /// (`[vocab][dim]`) into `y` in storage `st`. An id that is not a
    /// whole number below `vocab` gets a row of zeros (the CPU refuses it).
    ///
    /// # Safety
    ///
    /// `ids` must hold `n·t` f32s, `table` `vocab·dim` f32s and `y`
    /// `n·t·dim` elements of `st`, live until the work completes on
    /// `stream`; `y` must not overlap the others.
    pub unsafe fn embedding_fwd(
        &self,
        stream: &CudaStream,
        st: Storage,
        ids: CUdeviceptr,
        table: CUdeviceptr,
        y: CUdeviceptr,
        d: EmbeddingDims,
    ) -> GpuResult<()> {
        let name = EMBEDDING_FWD.name(st);
        let (rest, len) = d.args(name)?;
        if len == 0 {
            return Ok(());
        }
        let mut args = vec![Arg::Ptr(ids), Arg::Ptr(table), Arg::Ptr(y)];
        args.extend(rest);
        // SAFETY: (const float* ids, const float* table, T* y, u64 tokens,
        // int dim, int vocab, int t, int nchw) with the caller's sizes.
        unsafe { self.launch(stream, name, blocks_for(len), &args) }
    }

    /// The table's gradient: `grad[ids[k]] += dy[k]` for every token `k`,
    /// `dy` in storage `st` and layout as `y`. `grad` (f32, `[vocab][dim]`)
    /// must be zeroed first, on the same stream. Ids out of range add
    /// nothing.
    ///
    /// # Safety
    ///
    /// `ids` must hold `n·t` f32s, `dy` `n·t·dim` elements of `st` and
    /// `grad` `vocab·dim` f32s, live until the work completes on `stream`;
    /// `grad` must not overlap the others.
    pub unsafe fn embedding_bwd(
        &self,
        stream: &CudaStream,
        st: Storage,
        ids: CUdeviceptr,
        dy: CUdeviceptr,
        grad: CUdeviceptr,
        d: EmbeddingDims,
    ) -> GpuResult<()> {
        let name = EMBEDDING_BWD.name(st);
        let (rest, len) = d.args(name)?;
        if len == 0 {
            return Ok(());
        }
        let mut args = vec![Arg::Ptr(ids), Arg::Ptr(dy), Arg::Ptr(grad)];
        args.extend(rest);
        // SAFETY: (const float* ids, const T* dy, float* grad, u64 tokens,
        // int dim, int vocab, int t, int nchw) with the caller's sizes.
        unsafe { self.launch(stream, name, blocks_for(len), &args) }
    }
}

#[cfg(test)]
mod tests;
