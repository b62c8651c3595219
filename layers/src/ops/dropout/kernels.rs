//! Launch wrappers of `dropout.cu` (the CPU's mask), on the compiled
//! [`Kernels`].

use crate::backend::cuda::nvrtc::{
    blocks_for, invalid, pick, to_i32, to_u64, Arg, Kernels, Program,
};
use crate::backend::cuda::GpuResult;
use crate::core::dtype::Storage;
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::CudaStream;

/// Per storage, in the order of `Storage`: F32, F16, Bf16.
pub(crate) const DROPOUT_FWD: [&str; 3] =
    ["dropout_fwd_f32", "dropout_fwd_f16", "dropout_fwd_bf16"];
pub(crate) const DROPOUT_BWD: [&str; 3] =
    ["dropout_bwd_f32", "dropout_bwd_f16", "dropout_bwd_bf16"];

/// `dropout.cu` and its kernels.
pub const PROGRAM: Program = Program {
    file: "dropout.cu",
    source: include_str!("dropout.cu"),
    kernels: &[
        DROPOUT_FWD[0],
        DROPOUT_FWD[1],
        DROPOUT_FWD[2],
        DROPOUT_BWD[0],
        DROPOUT_BWD[1],
        DROPOUT_BWD[2],
    ],
};

impl Kernels {
    /// Dropout forward on a tensor of `[n, c, h, w]` elements in storage
    /// `st`, NCHW when `nchw` else NHWC: `mask` gets the keep bits (one
    /// byte each, in the tensor's memory order) and `y = x·mask/(1 − p)`.
    /// The mask is the CPU's (`cnnbench_kernels::eltwise::dropout_keep`
    /// over NHWC indices) for either layout.
    ///
    /// # Safety
    ///
    /// `x` and `y` must hold `n·c·h·w` elements of `st` and `mask` as many
    /// bytes, live until the work completes on `stream`; `y` and `mask`
    /// must not overlap anything (`y` may equal `x`).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn dropout_fwd(
        &self,
        stream: &CudaStream,
        st: Storage,
        x: CUdeviceptr,
        y: CUdeviceptr,
        mask: CUdeviceptr,
        [n, c, h, w]: [usize; 4],
        nchw: bool,
        p: f32,
        seed: u64,
    ) -> GpuResult<()> {
        let name = pick(st, DROPOUT_FWD);
        let len = [n, c, h, w]
            .into_iter()
            .try_fold(1usize, usize::checked_mul)
            .ok_or_else(|| invalid(name, format!("{n}·{c}·{h}·{w} elements")))?;
        if len == 0 {
            return Ok(());
        }
        let len = to_u64(name, len)?;
        let args = [
            Arg::Ptr(x),
            Arg::Ptr(y),
            Arg::Ptr(mask),
            Arg::U64(len),
            Arg::F32(p),
            Arg::U64(seed),
            Arg::I32(to_i32(name, "c", c)?),
            Arg::I32(to_i32(name, "h", h)?),
            Arg::I32(to_i32(name, "w", w)?),
            Arg::I32(nchw as i32),
        ];
        // SAFETY: (const T* x, T* y, u8* mask, u64 n, float p, u64 seed,
        // int c, int h, int w, int nchw) with the caller's sizes.
        unsafe { self.launch(stream, name, blocks_for(len), &args) }
    }

    /// Dropout backward: `dx = dy·mask/(1 − p)` over `len` elements of
    /// storage `st` (any layout: the mask is in the same memory order).
    ///
    /// # Safety
    ///
    /// `dy` and `dx` must hold `len` elements of `st` and `mask` `len`
    /// bytes, live until the work completes on `stream`; `dx` may equal
    /// `dy` but must not overlap `mask`.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn dropout_bwd(
        &self,
        stream: &CudaStream,
        st: Storage,
        dy: CUdeviceptr,
        mask: CUdeviceptr,
        dx: CUdeviceptr,
        len: usize,
        p: f32,
    ) -> GpuResult<()> {
        let name = pick(st, DROPOUT_BWD);
        if len == 0 {
            return Ok(());
        }
        let len = to_u64(name, len)?;
        let args = [
            Arg::Ptr(dy),
            Arg::Ptr(mask),
            Arg::Ptr(dx),
            Arg::U64(len),
            Arg::F32(p),
        ];
        // SAFETY: (const T* dy, const u8* mask, T* dx, u64 n, float p) with
        // the caller's sizes.
        unsafe { self.launch(stream, name, blocks_for(len), &args) }
    }
}
