//! Launch wrappers of `bias_grad.cu`, the bias gradient cuDNN lacks for
//! bf16, and the choice of who computes a bias gradient.

use crate::backend::cuda::backend::void;
use crate::backend::cuda::cudnn::{CudnnHandle, TensorDesc};
use crate::backend::cuda::cudnn_ops::SCALARS;
use crate::backend::cuda::device::compute_capability;
use crate::backend::cuda::kernel_name::{per_storage, PerStorage};
use crate::backend::cuda::loader::cudnn_sys as sys;
use crate::backend::cuda::nvrtc::{blocks_for, invalid, to_i32, to_u64, Arg, Kernels, Program};
use crate::backend::cuda::{check_cudnn, DeviceBuffer, Gpu, GpuResult};
use crate::core::dtype::Storage;
use crate::core::{DType, Layout};
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::CudaStream;
use std::sync::Arc;

/// One instance per storage ([`per_storage!`]).
pub(crate) const BIAS_GRAD_ROWS: PerStorage = per_storage!("bias_grad_rows");
pub(crate) const BIAS_GRAD_PLANES: PerStorage = per_storage!("bias_grad_planes");
pub(crate) const BIAS_GRAD_FINISH: PerStorage = per_storage!("bias_grad_finish");

/// `bias_grad.cu` and its kernels.
pub const PROGRAM: Program = Program {
    file: "bias_grad.cu",
    source: include_str!("bias_grad.cu"),
    per_storage: &[BIAS_GRAD_ROWS, BIAS_GRAD_PLANES, BIAS_GRAD_FINISH],
    single: &[],
};

/// Who reduces a bias gradient.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BiasGradBy {
    /// `cudnnConvolutionBackwardBias`.
    Cudnn,
    /// cnnbench's `bias_grad.cu`: cuDNN 9 refuses bf16 there (its checks
    /// allow half, float and double, and it has no bf16 kernel).
    Nvrtc,
}

impl BiasGradBy {
    pub fn for_dtype(d: DType) -> BiasGradBy {
        match d.storage() {
            Storage::Bf16 => BiasGradBy::Nvrtc,
            Storage::F32 | Storage::F16 => BiasGradBy::Cudnn,
        }
    }
}

/// `bias_grad.cu` compiled for `gpu`, when `dtype`'s bias gradient is
/// cnnbench's (bf16); `None` when cuDNN computes it. For runs that have no
/// network's compiled [`Kernels`] (the single-layer benchmark).
pub fn bias_grad_kernels(gpu: &Gpu, dtype: DType) -> GpuResult<Option<Kernels>> {
    match BiasGradBy::for_dtype(dtype) {
        BiasGradBy::Cudnn => Ok(None),
        BiasGradBy::Nvrtc => {
            let cc = compute_capability(&gpu.info.compute_capability);
            Kernels::compile(&gpu.ctx, cc, &[PROGRAM]).map(Some)
        }
    }
}

/// Blocks the first pass aims for: enough to fill any current GPU a few
/// times over.
const TARGET_BLOCKS: usize = 1024;
/// The most chunks (partials per channel): bounds the scratch buffer.
const MAX_CHUNKS: usize = 64;
/// Rows of an NHWC chunk at least: 8 per row group of the block.
const MIN_CHUNK_ROWS: usize = 64;
/// Channels per block of `bias_grad_rows` (`BIAS_LANES`).
const LANES: usize = 32;

/// The bias gradient of a `[n, c, h, w]` tensor `dy`, as the kernels cut
/// it: `dy` seen as `[outer][c][inner]`, `outer` cut into `chunks` of
/// `per_chunk`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BiasGradPlan {
    pub outer: usize,
    pub c: usize,
    pub inner: usize,
    pub per_chunk: usize,
    pub chunks: usize,
}

impl BiasGradPlan {
    /// `dy` of `n` images of `c` channels and `hw` pixels in `layout` (a
    /// fully connected layer: `hw` = 1, either layout); `None` when its
    /// element count overflows.
    pub fn new(n: usize, c: usize, hw: usize, layout: Layout) -> Option<BiasGradPlan> {
        n.checked_mul(hw)?.checked_mul(c)?;
        let (outer, inner) = match layout {
            Layout::Nchw if hw > 1 => (n, hw),
            _ => (n * hw, 1),
        };
        // Blocks per chunk, and the fewest rows per chunk worth a block.
        let (per_block, min_rows) = if inner > 1 {
            (c.max(1), 1)
        } else {
            (c.div_ceil(LANES).max(1), MIN_CHUNK_ROWS)
        };
        let chunks = (TARGET_BLOCKS / per_block)
            .clamp(1, MAX_CHUNKS)
            .min(outer.div_ceil(min_rows).max(1));
        let per_chunk = outer.div_ceil(chunks).max(1);
        Some(BiasGradPlan {
            outer,
            c,
            inner,
            per_chunk,
            // No empty chunk: every partial is written.
            chunks: outer.div_ceil(per_chunk).max(1),
        })
    }

    /// f32 elements of the scratch the partial sums go to.
    pub fn scratch_len(&self) -> usize {
        self.chunks * self.c
    }

    /// The two launches in storage `st`: kernels, grids and the arguments
    /// after the pointers (the first pass's `dy, part`; the finish's
    /// `part, db`).
    pub fn launches(&self, st: Storage) -> GpuResult<BiasGradLaunches> {
        let finish = BIAS_GRAD_FINISH.name(st);
        let c = to_i32(finish, "c", self.c)?;
        let chunks = to_i32(finish, "chunks", self.chunks)?;
        let (kernel, first_grid) = self
            .first_pass()
            .ok_or_else(|| invalid(finish, format!("grid too large: {self:?}")))?;
        let first = kernel.name(st);
        let mut first_args = vec![
            Arg::U64(to_u64(first, self.outer)?),
            Arg::U64(to_u64(first, self.per_chunk)?),
            Arg::I32(c),
        ];
        if self.inner > 1 {
            first_args.push(Arg::U64(to_u64(first, self.inner)?));
        }
        Ok(BiasGradLaunches {
            first,
            first_grid,
            first_args,
            finish,
            finish_grid: blocks_for(self.c as u64),
            finish_args: vec![Arg::I32(chunks), Arg::I32(c)],
        })
    }

    /// The first pass's kernels (per storage) and its grid: `bias_grad_planes`
    /// with a block per (chunk, channel) when each image's channel is a
    /// plane (NCHW), else `bias_grad_rows` with a block per (chunk, tile of
    /// 32 channels). `None` when the grid would not fit a launch.
    fn first_pass(&self) -> Option<(PerStorage, u32)> {
        let (kernel, per_chunk) = if self.inner > 1 {
            (BIAS_GRAD_PLANES, self.c)
        } else {
            (BIAS_GRAD_ROWS, self.c.div_ceil(LANES))
        };
        let grid = per_chunk
            .checked_mul(self.chunks)
            .and_then(|g| u32::try_from(g).ok())
            .filter(|&g| g <= i32::MAX as u32)?;
        Some((kernel, grid))
    }
}

/// A bias gradient made ready to run (its launches worked out and its
/// scratch allocated, outside any timed loop), by cuDNN or by
/// `bias_grad.cu` as [`BiasGradBy::for_dtype`] says.
pub enum BiasGrad {
    Cudnn,
    Nvrtc {
        launches: BiasGradLaunches,
        scratch: DeviceBuffer,
    },
}

impl BiasGrad {
    /// For `dy` of `n` images, `c` channels and `hw` pixels in `layout`.
    pub fn new(
        stream: &Arc<CudaStream>,
        dtype: DType,
        [n, c, hw]: [usize; 3],
        layout: Layout,
    ) -> GpuResult<BiasGrad> {
        Ok(match BiasGradBy::for_dtype(dtype) {
            BiasGradBy::Cudnn => BiasGrad::Cudnn,
            BiasGradBy::Nvrtc => {
                let plan = BiasGradPlan::new(n, c, hw, layout).ok_or_else(|| {
                    invalid("bias_grad", format!("{n}x{c}x{hw} elements overflow"))
                })?;
                BiasGrad::Nvrtc {
                    launches: plan.launches(dtype.storage())?,
                    scratch: DeviceBuffer::alloc(stream, plan.scratch_len() * 4)?,
                }
            }
        })
    }

    /// What computes it, for kernel names.
    pub fn name(&self) -> &'static str {
        match self {
            BiasGrad::Cudnn => "cudnnConvolutionBackwardBias",
            BiasGrad::Nvrtc { .. } => "bias_grad.cu",
        }
    }

    /// `db = Σ dy` per channel (overwriting `db`). `kernels` must be
    /// given for the NVRTC path; all work goes to `stream`, the stream of
    /// `h`.
    ///
    /// # Safety
    ///
    /// `dy` and `db` must hold the tensors `dy_desc` and `db_desc`
    /// describe (and [`BiasGrad::new`]'s shape), live until the work
    /// completes.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn run(
        &self,
        h: &CudnnHandle,
        kernels: Option<&Kernels>,
        stream: &CudaStream,
        dy_desc: &TensorDesc,
        dy: CUdeviceptr,
        db_desc: &TensorDesc,
        db: CUdeviceptr,
    ) -> GpuResult<()> {
        match self {
            // SAFETY: the caller's contract.
            BiasGrad::Cudnn => check_cudnn("cudnnConvolutionBackwardBias", unsafe {
                sys::cudnnConvolutionBackwardBias(
                    h.0,
                    SCALARS.one(),
                    dy_desc.0,
                    void(dy),
                    SCALARS.zero(),
                    db_desc.0,
                    void(db),
                )
            }),
            BiasGrad::Nvrtc { launches, scratch } => {
                let k = kernels.ok_or_else(|| {
                    invalid(
                        "bias_grad",
                        "the bf16 bias gradient needs NVRTC's kernels".into(),
                    )
                })?;
                // SAFETY: the caller's contract; the scratch holds the
                // plan's scratch_len() floats.
                unsafe { k.bias_grad(stream, launches, dy, scratch.ptr(), db) }
            }
        }
    }
}

/// [`BiasGradPlan::launches`]: what [`Kernels::bias_grad`] launches.
pub struct BiasGradLaunches {
    pub(crate) first: &'static str,
    pub(crate) first_grid: u32,
    pub(crate) first_args: Vec<Arg>,
    pub(crate) finish: &'static str,
    pub(crate) finish_grid: u32,
    pub(crate) finish_args: Vec<Arg>,
}

impl Kernels {
    /// `db[c] = Σ dy` over every image and pixel, with the partial sums in
    /// `scratch`, as `l` ([`BiasGradPlan::launches`]) says.
    ///
    /// # Safety
    ///
    /// `dy` must hold the plan's `outer·c·inner` elements of its storage,
    /// `db` `c` of them and `scratch` its `scratch_len()` f32s, all live
    /// until the work completes on `stream`; `db` and `scratch` must not
    /// overlap anything.
    pub unsafe fn bias_grad(
        &self,
        stream: &CudaStream,
        l: &BiasGradLaunches,
        dy: CUdeviceptr,
        scratch: CUdeviceptr,
        db: CUdeviceptr,
    ) -> GpuResult<()> {
        // No channels: nothing to reduce.
        if l.first_grid == 0 {
            return Ok(());
        }
        let mut args = vec![Arg::Ptr(dy), Arg::Ptr(scratch)];
        args.extend(&l.first_args);
        // SAFETY: (const T* dy, float* part, u64 outer, u64 per_chunk,
        // int c[, u64 inner]) with the caller's sizes; the grid covers
        // chunks x (channels or channel tiles) exactly.
        unsafe { self.launch(stream, l.first, l.first_grid, &args)? };
        let mut args = vec![Arg::Ptr(scratch), Arg::Ptr(db)];
        args.extend(&l.finish_args);
        // SAFETY: (const float* part, T* db, int chunks, int c).
        unsafe { self.launch(stream, l.finish, l.finish_grid, &args) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_bias_gradients_never_go_to_cudnn() {
        assert_eq!(BiasGradBy::for_dtype(DType::Bf16), BiasGradBy::Nvrtc);
        for d in [DType::F32, DType::Tf32, DType::F16] {
            assert_eq!(BiasGradBy::for_dtype(d), BiasGradBy::Cudnn, "{d}");
        }
    }

    #[test]
    fn chunks_cover_every_row_once() {
        for (n, c, hw, layout) in [
            (256, 64, 112 * 112, Layout::Nhwc),
            (256, 64, 112 * 112, Layout::Nchw),
            (2, 3, 1, Layout::Nchw),
            (1, 4096, 1, Layout::Nhwc),
            (7, 1000, 1, Layout::Nchw),
            (3, 5, 7, Layout::Nchw),
            (0, 5, 7, Layout::Nhwc),
        ] {
            let p = BiasGradPlan::new(n, c, hw, layout).unwrap();
            assert_eq!(p.outer * p.inner, n * hw, "{p:?}");
            assert!(p.chunks >= 1 && p.chunks <= MAX_CHUNKS, "{p:?}");
            // Chunks tile 0..outer with none empty.
            assert!(p.chunks * p.per_chunk >= p.outer, "{p:?}");
            assert!((p.chunks - 1) * p.per_chunk < p.outer.max(1), "{p:?}");
            assert_eq!(p.scratch_len(), p.chunks * c);
        }
        assert!(BiasGradPlan::new(usize::MAX, 2, 2, Layout::Nhwc).is_none());
        // A big NHWC activation gets many blocks, a linear layer's a few.
        let big = BiasGradPlan::new(256, 64, 56 * 56, Layout::Nhwc).unwrap();
        assert_eq!((big.inner, big.chunks), (1, MAX_CHUNKS));
        let fc = BiasGradPlan::new(16, 1000, 1, Layout::Nhwc).unwrap();
        assert_eq!(fc.chunks, 1);
        let nchw = BiasGradPlan::new(256, 64, 56 * 56, Layout::Nchw).unwrap();
        assert_eq!((nchw.inner, nchw.chunks), (56 * 56, 16));
    }

    /// `bias_grad.cu` run on the host (`backend::cuda::emu`) as the
    /// wrapper launches it, against an f64 sum of the same stored values.
    #[test]
    fn emulated_bias_grad_matches_the_sum() {
        use crate::backend::cuda::emu::{self, render, storage_type, EmuRun};
        use cnnbench_kernels::rng::fill_uniform;
        if !emu::available() {
            return;
        }
        let cases = [
            (3, 70, 35, Layout::Nhwc),  // 2 chunks x 3 channel tiles
            (4, 40, 100, Layout::Nhwc), // 7 chunks
            (3, 70, 35, Layout::Nchw),  // planes
            (20, 6, 50, Layout::Nchw),  // 20 chunks of one image
            (5, 10, 1, Layout::Nchw),   // a fully connected layer
            (1, 3, 300, Layout::Nchw),  // planes longer than a block
        ];
        // One program runs every case and storage (one compile).
        let (mut main, mut inputs, mut outputs) = (String::new(), Vec::new(), Vec::new());
        for (i, &(n, c, hw, layout)) in cases.iter().enumerate() {
            let plan = BiasGradPlan::new(n, c, hw, layout).unwrap();
            let mut dy = vec![0.0f32; n * c * hw];
            fill_uniform(&mut dy, 7 + i as u64, 1.0);
            for (suffix, dtype) in [("f32", DType::F32), ("bf16", DType::Bf16)] {
                // Exactly what Kernels::bias_grad launches.
                let l = plan.launches(dtype.storage()).unwrap();
                let t = storage_type(suffix);
                main += &format!(
                    "{{ auto dy = emu_load<{t}>(\"dy{i}.bin\", {len});
                     std::vector<float> part({scratch}, NAN);
                     std::vector<{t}::T> db({c});
                     emu_launch({}, [&] {{ {}(dy.data(), part.data(), {}); }});
                     emu_launch({}, [&] {{ {}(part.data(), db.data(), {}); }});
                     emu_save<{t}>(\"db{i}_{suffix}.bin\", db); }}\n",
                    l.first_grid,
                    l.first,
                    render(&l.first_args),
                    l.finish_grid,
                    l.finish,
                    render(&l.finish_args),
                    len = dy.len(),
                    scratch = plan.scratch_len(),
                );
                outputs.push((format!("db{i}_{suffix}.bin"), c));
            }
            inputs.push((format!("dy{i}.bin"), dy));
        }
        let mut got = EmuRun {
            program: &PROGRAM,
            main,
            inputs,
            outputs,
        }
        .run()
        .into_iter();
        for (i, &(n, c, hw, layout)) in cases.iter().enumerate() {
            let plan = BiasGradPlan::new(n, c, hw, layout).unwrap();
            let mut dy = vec![0.0f32; n * c * hw];
            fill_uniform(&mut dy, 7 + i as u64, 1.0);
            for (suffix, dtype) in [("f32", DType::F32), ("bf16", DType::Bf16)] {
                let got = got.next().expect("an output per case");
                let mut stored = dy.clone();
                dtype.round_in_place(&mut stored);
                let nchw = layout == Layout::Nchw;
                for (ch, &g) in got.iter().enumerate() {
                    let want: f64 = (0..n * hw)
                        .map(|j| {
                            let (b, px) = (j / hw, j % hw);
                            let at = if nchw {
                                (b * c + ch) * hw + px
                            } else {
                                j * c + ch
                            };
                            stored[at] as f64
                        })
                        .sum();
                    // bf16 rounds the result once: half an ulp of 2^-8.
                    let tol = if suffix == "bf16" { 4e-3 } else { 1e-5 } * want.abs().max(1.0);
                    assert!(
                        (g as f64 - want).abs() <= tol,
                        "{suffix} {n}x{c}x{hw} {layout} channel {ch}: {g} vs {want} ({plan:?})"
                    );
                }
            }
        }
    }
}
