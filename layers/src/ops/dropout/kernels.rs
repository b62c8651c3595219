//! Launch wrappers of `dropout.cu` (the CPU's mask), on the compiled
//! [`Kernels`].

use crate::backend::cuda::kernel_name::{per_storage, PerStorage};
use crate::backend::cuda::nvrtc::{blocks_for, invalid, to_i32, to_u64, Arg, Kernels, Program};
use crate::backend::cuda::GpuResult;
use crate::core::dtype::Storage;
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::CudaStream;

/// One instance per storage ([`per_storage!`]).
pub(crate) const DROPOUT_FWD: PerStorage = per_storage!("dropout_fwd");
pub(crate) const DROPOUT_BWD: PerStorage = per_storage!("dropout_bwd");

/// `dropout.cu` and its kernels.
pub const PROGRAM: Program = Program {
    file: "dropout.cu",
    source: include_str!("dropout.cu"),
    per_storage: &[DROPOUT_FWD, DROPOUT_BWD],
    single: &[],
};

impl Kernels {
    /// Dropout forward on a tensor of `[n, c, h, w]` elements in storage
    /// `st`, NCHW when `nchw` else NHWC: `mask` gets the keep bits (one
    /// byte each, in the tensor's memory order) and `y = x·mask/(1 − p)`.
    /// The mask is the CPU's (`cnnbench_kernels::eltwise::dropout_keep`
    /// over NHWC indices) for either layout, drawn with `seed`, or, where
    /// `seed_at` is not 0, with `seed` XOR the u64 at `seed_at` (a step
    /// replayed from a CUDA graph reads its seed there).
    ///
    /// # Safety
    ///
    /// `x` and `y` must hold `n·c·h·w` elements of `st` and `mask` as many
    /// bytes, live until the work completes on `stream`; `y` and `mask`
    /// must not overlap anything (`y` may equal `x`); `seed_at`, where not
    /// 0, must hold a u64 on the device.
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
        seed_at: CUdeviceptr,
    ) -> GpuResult<()> {
        let name = DROPOUT_FWD.name(st);
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
            Arg::Ptr(seed_at),
            Arg::I32(to_i32(name, "c", c)?),
            Arg::I32(to_i32(name, "h", h)?),
            Arg::I32(to_i32(name, "w", w)?),
            Arg::I32(nchw as i32),
        ];
        // SAFETY: (const T* x, T* y, u8* mask, u64 n, float p, u64 seed,
        // const u64* seed_at, int c, int h, int w, int nchw) with the
        // caller's sizes.
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
        let name = DROPOUT_BWD.name(st);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `dropout.cu` run on the host (`backend::cuda::emu`): the same mask
    /// and outputs as the CPU's, bit for bit, in both layouts.
    #[test]
    fn emulated_dropout_matches_the_cpu_bit_for_bit() {
        use crate::backend::cuda::emu::{self, EmuRun};
        use crate::core::layout::{nchw_to_nhwc, nhwc_to_nchw};
        use cnnbench_kernels::eltwise::{dropout_bwd, dropout_fwd};
        use cnnbench_kernels::rng::fill_uniform;
        use cnnbench_kernels::Isa;
        if !emu::available() {
            return;
        }
        let (n, c, h, w, p, seed) = (2, 3, 4, 5, 0.3f32, 1234u64);
        let salt = 0x9E37_79B9_7F4A_7C15u64;
        let len = n * c * h * w;
        let (mut x, mut dy) = (vec![0.0f32; len], vec![0.0f32; len]);
        fill_uniform(&mut x, 1, 1.0);
        fill_uniform(&mut dy, 2, 1.0);
        let (mut y, mut mask, mut dx) = (vec![0.0; len], vec![0u8; len], vec![0.0; len]);
        dropout_fwd(Isa::Scalar, &x, p, seed, &mut mask, &mut y);
        dropout_bwd(Isa::Scalar, &dy, p, &mask, &mut dx);
        let (mut main, mut inputs, mut outputs) = (String::new(), Vec::new(), Vec::new());
        for nchw in [false, true] {
            let order = |v: &[f32]| {
                if nchw {
                    nhwc_to_nchw(v, n, h, w, c)
                } else {
                    v.to_vec()
                }
            };
            inputs.push((format!("x{nchw}.bin"), order(&x)));
            inputs.push((format!("dy{nchw}.bin"), order(&dy)));
            main += &format!(
                "{{ auto x = emu_load<F32>(\"x{nchw}.bin\", {len});
                 auto dy = emu_load<F32>(\"dy{nchw}.bin\", {len});
                 std::vector<float> y({len}), dx({len}), m({len});
                 std::vector<u8> mask({len}, 7);
                 // NCHW reads the seed as a replayed CUDA graph does: a
                 // salt in the argument, the step's seed in memory.
                 const u64 step_seed = {seed}ull ^ {salt}ull;
                 const u64* seed_at = {nchw} ? &step_seed : nullptr;
                 const u64 seed = {nchw} ? {salt}ull : {seed}ull;
                 emu_launch(1, [&] {{ dropout_fwd_f32(x.data(), y.data(), mask.data(), {len}ull,
                     {p:?}f, seed, seed_at, {c}, {h}, {w}, {}); }});
                 emu_launch(1, [&] {{ dropout_bwd_f32(dy.data(), mask.data(), dx.data(), {len}ull, {p:?}f); }});
                 for (int i = 0; i < {len}; ++i) m[i] = mask[i];
                 emu_save<F32>(\"y{nchw}.bin\", y);
                 emu_save<F32>(\"m{nchw}.bin\", m);
                 emu_save<F32>(\"dx{nchw}.bin\", dx); }}\n",
                nchw as i32
            );
            for name in ["y", "m", "dx"] {
                outputs.push((format!("{name}{nchw}.bin"), len));
            }
        }
        let got = EmuRun {
            program: &PROGRAM,
            main,
            inputs,
            outputs,
        }
        .run();
        let mask: Vec<f32> = mask.iter().map(|&m| m as f32).collect();
        for (got, nchw) in got.chunks(3).zip([false, true]) {
            let back = |v: &[f32]| {
                if nchw {
                    nchw_to_nhwc(v, n, h, w, c)
                } else {
                    v.to_vec()
                }
            };
            assert_eq!(back(&got[1]), mask, "mask, nchw={nchw}");
            assert_eq!(back(&got[0]), y, "y, nchw={nchw}");
            assert_eq!(back(&got[2]), dx, "dx, nchw={nchw}");
        }
    }
}
