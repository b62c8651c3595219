//! Launch wrappers of `lrn.cu` (LRN across channels where cuDNN has none),
//! and the choice of who runs an LRN.

use crate::backend::cuda::kernel_name::{per_storage, PerStorage};
use crate::backend::cuda::nvrtc::{blocks_for, invalid, to_i32, to_u64, Arg, Kernels, Program};
use crate::backend::cuda::GpuResult;
use crate::core::dtype::Storage;
use crate::core::DType;
use cnnbench_kernels::norm::lrn::LrnParams;
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::CudaStream;

/// One instance per storage ([`per_storage!`]).
pub(crate) const LRN_FWD: PerStorage = per_storage!("lrn_fwd");
pub(crate) const LRN_BWD: PerStorage = per_storage!("lrn_bwd");

/// `lrn.cu` and its kernels.
pub const PROGRAM: Program = Program {
    file: "lrn.cu",
    source: include_str!("lrn.cu"),
    per_storage: &[LRN_FWD, LRN_BWD],
    single: &[],
};

/// Who runs an LRN, forward and backward.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LrnBy {
    /// `cudnnLRNCrossChannel{Forward,Backward}`.
    Cudnn,
    /// cnnbench's `lrn.cu`: cuDNN 9 refuses bf16 LRN (its checks allow
    /// half, float, double and int8, and it has no bf16 kernel).
    Nvrtc,
}

impl LrnBy {
    pub fn for_dtype(d: DType) -> LrnBy {
        match d.storage() {
            Storage::Bf16 => LrnBy::Nvrtc,
            Storage::F32 | Storage::F16 => LrnBy::Cudnn,
        }
    }
}

/// A tensor of `[n, c, h, w]` in NCHW (`nchw`) or NHWC order, for `lrn.cu`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LrnShape {
    pub n: usize,
    pub c: usize,
    pub hw: usize,
    pub nchw: bool,
}

impl Kernels {
    /// LRN forward: `y = x·s^-β` (see `lrn.cu`), in storage `st`.
    ///
    /// # Safety
    ///
    /// `x` and `y` must hold `n·c·hw` elements of `st`, live until the
    /// work completes on `stream`, and not overlap.
    pub unsafe fn lrn_fwd(
        &self,
        stream: &CudaStream,
        st: Storage,
        shape: &LrnShape,
        p: &LrnParams,
        x: CUdeviceptr,
        y: CUdeviceptr,
    ) -> GpuResult<()> {
        let name = LRN_FWD.name(st);
        let Some((len, tail)) = lrn_args(name, shape, p)? else {
            return Ok(());
        };
        let mut args = vec![Arg::Ptr(x), Arg::Ptr(y)];
        args.extend(tail);
        // SAFETY: (const T* x, T* y, LRN_ARGS) with the caller's sizes.
        unsafe { self.launch(stream, name, blocks_for(len), &args) }
    }

    /// LRN backward: `dx` from `x`, the forward's `y` and `dy` (see
    /// `lrn.cu`), in storage `st`.
    ///
    /// # Safety
    ///
    /// `x`, `y`, `dy` and `dx` must hold `n·c·hw` elements of `st`, live
    /// until the work completes on `stream`; `dx` must not overlap the
    /// others.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn lrn_bwd(
        &self,
        stream: &CudaStream,
        st: Storage,
        shape: &LrnShape,
        p: &LrnParams,
        x: CUdeviceptr,
        y: CUdeviceptr,
        dy: CUdeviceptr,
        dx: CUdeviceptr,
    ) -> GpuResult<()> {
        let name = LRN_BWD.name(st);
        let Some((len, tail)) = lrn_args(name, shape, p)? else {
            return Ok(());
        };
        let mut args = vec![Arg::Ptr(x), Arg::Ptr(y), Arg::Ptr(dy), Arg::Ptr(dx)];
        args.extend(tail);
        // SAFETY: (const T* x, const T* y, const T* dy, T* dx, LRN_ARGS)
        // with the caller's sizes.
        unsafe { self.launch(stream, name, blocks_for(len), &args) }
    }
}

/// The element count and `LRN_ARGS` (len, hw, c, nchw, size, alpha, beta,
/// k), or `None` for an empty tensor.
fn lrn_args(name: &'static str, s: &LrnShape, p: &LrnParams) -> GpuResult<Option<(u64, [Arg; 8])>> {
    if p.size == 0 {
        return Err(invalid(name, "LRN window of size 0".into()));
    }
    let len = [s.n, s.c, s.hw]
        .into_iter()
        .try_fold(1usize, usize::checked_mul)
        .ok_or_else(|| invalid(name, format!("element count overflows: {s:?}")))?;
    if len == 0 {
        return Ok(None);
    }
    let len = to_u64(name, len)?;
    // The window's ends run to c ± size: they must stay ints.
    to_i32(name, "c + size", s.c.saturating_add(p.size))?;
    Ok(Some((
        len,
        [
            Arg::U64(len),
            Arg::U64(to_u64(name, s.hw)?),
            Arg::I32(to_i32(name, "c", s.c)?),
            Arg::I32(s.nchw as i32),
            Arg::I32(to_i32(name, "size", p.size)?),
            Arg::F32(p.alpha),
            Arg::F32(p.beta),
            Arg::F32(p.k),
        ],
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_lrn_never_goes_to_cudnn() {
        assert_eq!(LrnBy::for_dtype(DType::Bf16), LrnBy::Nvrtc);
        for d in [DType::F32, DType::Tf32, DType::F16] {
            assert_eq!(LrnBy::for_dtype(d), LrnBy::Cudnn, "{d}");
        }
    }

    #[test]
    fn lrn_launch_sizes_are_checked() {
        let p = LrnParams {
            size: 5,
            alpha: 1e-4,
            beta: 0.75,
            k: 2.0,
        };
        let s = LrnShape {
            n: 2,
            c: 96,
            hw: 55 * 55,
            nchw: true,
        };
        let (len, args) = lrn_args("lrn_fwd_bf16", &s, &p).unwrap().unwrap();
        assert_eq!(len, 2 * 96 * 55 * 55);
        assert!(matches!(args[2], Arg::I32(96)) && matches!(args[4], Arg::I32(5)));
        let empty = LrnShape { n: 0, ..s };
        assert!(lrn_args("lrn_fwd_bf16", &empty, &p).unwrap().is_none());
        let huge = LrnShape { c: 1 << 31, ..s };
        assert!(lrn_args("lrn_fwd_bf16", &huge, &p).is_err());
        let no_window = LrnParams { size: 0, ..p };
        assert!(lrn_args("lrn_fwd_bf16", &s, &no_window).is_err());
    }

    /// `lrn.cu` run on the host (`backend::cuda::emu`), forward then
    /// backward on its own output, against the CPU's reference, in both
    /// layouts, for odd, even and unit windows.
    #[test]
    fn emulated_lrn_matches_the_reference() {
        use crate::backend::cuda::emu::{self, render, storage_type, EmuRun};
        use crate::backend::cuda::nvrtc::blocks_for;
        use crate::core::layout::{nchw_to_nhwc, nhwc_to_nchw};
        use cnnbench_kernels::conv::reference::rel_l2_error;
        use cnnbench_kernels::norm::lrn;
        use cnnbench_kernels::rng::fill_uniform;
        if !emu::available() {
            return;
        }
        let p = |size, alpha, k| LrnParams {
            size,
            alpha,
            beta: 0.75,
            k,
        };
        // (n, c, hw, params); a big alpha so that the window matters.
        let cases = [
            (2, 7, 15, p(5, 0.5, 2.0)),
            (3, 6, 4, p(4, 0.3, 1.0)),
            (1, 5, 9, p(1, 0.2, 1.0)),
            (2, 3, 6, p(7, 0.5, 2.0)), // window wider than the channels
        ];
        let storages = [("f32", DType::F32), ("bf16", DType::Bf16)];
        let (mut main, mut inputs, mut outputs) = (String::new(), Vec::new(), Vec::new());
        let mut want = Vec::new();
        for (i, &(n, c, hw, q)) in cases.iter().enumerate() {
            let len = n * c * hw;
            let (mut x, mut dy) = (vec![0.0f32; len], vec![0.0f32; len]);
            fill_uniform(&mut x, 11 + i as u64, 2.0);
            fill_uniform(&mut dy, 31 + i as u64, 1.0);
            for nchw in [false, true] {
                for (suffix, dtype) in storages {
                    let (mut x, mut dy) = (x.clone(), dy.clone());
                    dtype.round_in_place(&mut x);
                    dtype.round_in_place(&mut dy);
                    let (mut y, mut dx) = (vec![0.0; len], vec![0.0; len]);
                    lrn::reference_fwd(&q, c, &x, &mut y);
                    lrn::reference_bwd(&q, c, &x, &dy, &mut dx);
                    want.push((
                        format!("{suffix} {n}x{c}x{hw} nchw={nchw} {q:?}"),
                        dtype,
                        y,
                        dx,
                    ));
                    let tag = format!("{i}_{nchw}_{suffix}");
                    let order = |v: &[f32]| {
                        if nchw {
                            nhwc_to_nchw(v, n, hw, 1, c)
                        } else {
                            v.to_vec()
                        }
                    };
                    inputs.push((format!("x{tag}.bin"), order(&x)));
                    inputs.push((format!("dy{tag}.bin"), order(&dy)));
                    let t = storage_type(suffix);
                    // Exactly what the wrappers pass after the pointers.
                    let shape = LrnShape { n, c, hw, nchw };
                    let args = render(&lrn_args("lrn", &shape, &q).unwrap().unwrap().1);
                    // At most 2 blocks: the grid-stride loops go round.
                    let grid = blocks_for(len as u64).min(2);
                    main += &format!(
                        "{{ auto x = emu_load<{t}>(\"x{tag}.bin\", {len});
                         auto dy = emu_load<{t}>(\"dy{tag}.bin\", {len});
                         std::vector<{t}::T> y({len}), dx({len});
                         emu_launch({grid}, [&] {{ lrn_fwd_{suffix}(x.data(), y.data(), {args}); }});
                         emu_launch({grid}, [&] {{ lrn_bwd_{suffix}(x.data(), y.data(), dy.data(), dx.data(), {args}); }});
                         emu_save<{t}>(\"y{tag}.bin\", y);
                         emu_save<{t}>(\"dx{tag}.bin\", dx); }}\n"
                    );
                    outputs.push((format!("y{tag}.bin"), len));
                    outputs.push((format!("dx{tag}.bin"), len));
                }
            }
        }
        let got = EmuRun {
            program: &PROGRAM,
            main,
            inputs,
            outputs,
        }
        .run();
        let shapes = cases
            .iter()
            .flat_map(|&(n, c, hw, _)| [(n, c, hw, false), (n, c, hw, true)])
            .flat_map(|s| [s, s]);
        for ((got, (what, dtype, y, dx)), (n, c, hw, nchw)) in got.chunks(2).zip(&want).zip(shapes)
        {
            let back = |v: &[f32]| {
                if nchw {
                    nchw_to_nhwc(v, n, hw, 1, c)
                } else {
                    v.to_vec()
                }
            };
            let tol = if *dtype == DType::Bf16 { 1e-2 } else { 1e-5 };
            let (ey, edx) = (
                rel_l2_error(&back(&got[0]), y),
                rel_l2_error(&back(&got[1]), dx),
            );
            assert!(
                ey <= tol && edx <= tol,
                "{what}: y off by {ey:.1e}, dx by {edx:.1e}"
            );
        }
    }
}
