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

pub(crate) const EMBEDDING_SEG_SUM: PerStorage = per_storage!("embedding_seg_sum");
pub(crate) const SORT_HIST: &str = "embedding_sort_hist";
pub(crate) const SORT_SCAN: &str = "embedding_sort_scan";
pub(crate) const SORT_SCATTER: &str = "embedding_sort_scatter";
pub(crate) const SEG_CARRY: &str = "embedding_seg_carry";

/// `embedding.cu` and its kernels.
pub const PROGRAM: Program = Program {
    file: "embedding.cu",
    source: include_str!("embedding.cu"),
    per_storage: &[EMBEDDING_FWD, EMBEDDING_BWD, EMBEDDING_SEG_SUM],
    single: &[SORT_HIST, SORT_SCAN, SORT_SCATTER, SEG_CARRY],
};

/// Tokens per tile of the radix sort (`SORT_TILE` in embedding.cu).
const SORT_TILE: usize = 1024;
/// Sorted tokens per chunk of the segmented sum (`SEG_CHUNK`).
const SEG_CHUNK: usize = 32;
/// The most blocks a sort pass launches (one per tile).
const MAX_TILES: usize = 65535;

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

/// The buffers of the sorted gradient ([`Kernels::embedding_bwd_sorted`]):
/// the ids, the output gradient, the table gradient, and the scratch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SortBuf {
    Ids,
    Dy,
    Grad,
    /// Sort keys (rows) and payloads (token indices), u32, ping-pong.
    Keys(usize),
    Vals(usize),
    /// Per (digit, tile) counts, then their prefix sums, u32.
    Hist,
    /// Partial sums of rows that cross chunks, f32.
    Head,
    Tail,
    /// No buffer (a first pass reads no keys).
    Null,
}

/// One launch of the sorted gradient: a kernel, its blocks, its arguments.
#[derive(Clone, Debug)]
pub(crate) struct SortLaunch {
    pub name: &'static str,
    pub grid: u32,
    pub args: Vec<SortArg>,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum SortArg {
    Buf(SortBuf),
    Val(Arg),
}

/// Elements of the sorted gradient's scratch buffers: `tokens` u32 for
/// each key and payload buffer (two of each), `hist` u32, `partials` f32
/// for each of head and tail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SortScratchLen {
    pub tokens: usize,
    pub hist: usize,
    pub partials: usize,
}

impl SortScratchLen {
    pub fn bytes(&self) -> usize {
        4 * (4 * self.tokens + self.hist + 2 * self.partials)
    }
}

/// The sorted gradient's scratch on the device, as [`SortScratchLen`]
/// sizes it.
#[derive(Clone, Copy, Debug)]
pub struct SortScratch {
    pub keys: [CUdeviceptr; 2],
    pub vals: [CUdeviceptr; 2],
    pub hist: CUdeviceptr,
    pub head: CUdeviceptr,
    pub tail: CUdeviceptr,
}

impl EmbeddingDims {
    /// The scratch the sorted gradient needs, or why it cannot run.
    pub fn sort_scratch(&self) -> GpuResult<SortScratchLen> {
        let name = SORT_SCATTER;
        let tokens = self
            .n
            .checked_mul(self.t)
            .ok_or_else(|| invalid(name, format!("{}·{} tokens", self.n, self.t)))?;
        // Token indices travel as u32; one block per tile.
        let tiles = tokens.div_ceil(SORT_TILE);
        if u32::try_from(tokens).is_err() || tiles > MAX_TILES {
            let most = SORT_TILE * MAX_TILES;
            return Err(invalid(
                name,
                format!("{tokens} tokens: the sorted gradient takes at most {most}"),
            ));
        }
        let partials = tokens
            .div_ceil(SEG_CHUNK)
            .checked_mul(self.dim)
            .ok_or_else(|| invalid(name, format!("{tokens} tokens of {}", self.dim)))?;
        Ok(SortScratchLen {
            tokens,
            hist: 256 * tiles,
            partials,
        })
    }

    /// The launches of the sorted gradient, in order (see embedding.cu):
    /// per radix pass a histogram, a scan and a scatter, then the
    /// segmented sums and the carries; none without tokens or features.
    pub(crate) fn sorted_bwd_launches(&self, st: Storage) -> GpuResult<Vec<SortLaunch>> {
        let len = self.sort_scratch()?;
        let (rest, elems) = self.args(SORT_SCATTER)?;
        if elems == 0 {
            return Ok(Vec::new());
        }
        let tiles = len.tokens.div_ceil(SORT_TILE) as u32;
        // Keys run up to `vocab` (the key of an id that selects no row).
        let bits = 32 - (self.vocab as u32).leading_zeros();
        let passes = bits.div_ceil(8).max(1) as usize;
        let tokens = SortArg::Val(rest[0]);
        let vocab = SortArg::Val(Arg::I32(to_i32(SORT_HIST, "vocab", self.vocab)?));
        let (buf, val) = (SortArg::Buf, SortArg::Val);
        let mut launches = Vec::new();
        for p in 0..passes {
            let first = p == 0;
            let (from, to) = ((p + 1) % 2, p % 2);
            let (keys_in, vals_in) = if first {
                (SortBuf::Null, SortBuf::Null)
            } else {
                (SortBuf::Keys(from), SortBuf::Vals(from))
            };
            let pass = [val(Arg::I32(8 * p as i32)), val(Arg::I32(first as i32))];
            let mut hist = vec![
                buf(SortBuf::Ids),
                buf(keys_in),
                buf(vals_in),
                buf(SortBuf::Hist),
            ];
            hist.extend([tokens, vocab]);
            hist.extend(pass);
            launches.push(SortLaunch {
                name: SORT_HIST,
                grid: tiles,
                args: hist,
            });
            launches.push(SortLaunch {
                name: SORT_SCAN,
                grid: 1,
                args: vec![buf(SortBuf::Hist), val(Arg::U64(len.hist as u64))],
            });
            let mut scatter = vec![
                buf(SortBuf::Ids),
                buf(keys_in),
                buf(vals_in),
                buf(SortBuf::Hist),
                buf(SortBuf::Keys(to)),
                buf(SortBuf::Vals(to)),
            ];
            scatter.extend([tokens, vocab]);
            scatter.extend(pass);
            launches.push(SortLaunch {
                name: SORT_SCATTER,
                grid: tiles,
                args: scatter,
            });
        }
        let sorted = (passes - 1) % 2;
        let blocks = blocks_for(len.partials as u64);
        let mut seg = vec![
            buf(SortBuf::Keys(sorted)),
            buf(SortBuf::Vals(sorted)),
            buf(SortBuf::Dy),
            buf(SortBuf::Grad),
            buf(SortBuf::Head),
            buf(SortBuf::Tail),
        ];
        seg.extend(rest.iter().map(|&a| val(a)));
        launches.push(SortLaunch {
            name: EMBEDDING_SEG_SUM.name(st),
            grid: blocks,
            args: seg,
        });
        let mut carry = vec![
            buf(SortBuf::Keys(sorted)),
            buf(SortBuf::Head),
            buf(SortBuf::Tail),
            buf(SortBuf::Grad),
        ];
        carry.extend(rest[..3].iter().map(|&a| val(a)));
        launches.push(SortLaunch {
            name: SEG_CARRY,
            grid: blocks,
            args: carry,
        });
        Ok(launches)
    }
}

impl Kernels {
    /// The table's gradient as [`Kernels::embedding_bwd`] computes it, but
    /// without atomics: the tokens sorted by row, each row summed in token
    /// order (deterministic; see embedding.cu). `grad` must be zeroed first
    /// (rows no token selects are not written).
    ///
    /// # Safety
    ///
    /// As [`Kernels::embedding_bwd`]; `scratch` must hold the sizes
    /// [`EmbeddingDims::sort_scratch`] gives, not overlap the others, and
    /// not be used by other work until this completes on `stream`.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn embedding_bwd_sorted(
        &self,
        stream: &CudaStream,
        st: Storage,
        ids: CUdeviceptr,
        dy: CUdeviceptr,
        grad: CUdeviceptr,
        scratch: &SortScratch,
        d: EmbeddingDims,
    ) -> GpuResult<()> {
        let ptr = |b: SortBuf| match b {
            SortBuf::Ids => ids,
            SortBuf::Dy => dy,
            SortBuf::Grad => grad,
            SortBuf::Keys(k) => scratch.keys[k],
            SortBuf::Vals(k) => scratch.vals[k],
            SortBuf::Hist => scratch.hist,
            SortBuf::Head => scratch.head,
            SortBuf::Tail => scratch.tail,
            SortBuf::Null => 0,
        };
        for l in d.sorted_bwd_launches(st)? {
            let args: Vec<Arg> = l
                .args
                .iter()
                .map(|a| match *a {
                    SortArg::Buf(b) => Arg::Ptr(ptr(b)),
                    SortArg::Val(v) => v,
                })
                .collect();
            // SAFETY: each kernel's parameters in order (embedding.cu),
            // with the caller's sizes; the launches run in stream order.
            unsafe { self.launch(stream, l.name, l.grid, &args)? };
        }
        Ok(())
    }

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
