//! Launch wrappers of `pool.cu` (ceil-mode pooling), on the compiled
//! [`Kernels`].

use crate::backend::cuda::kernel_name::{per_storage, PerStorage};
use crate::backend::cuda::nvrtc::{
    blocks_for, invalid, to_i32, vector_width, Arg, Kernels, Program,
};
use crate::backend::cuda::GpuResult;
use crate::core::dtype::Storage;
use cnnbench_kernels::pool::PoolShape;
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::CudaStream;

/// One instance per storage ([`per_storage!`]).
pub(crate) const POOL_FWD: PerStorage = per_storage!("pool_fwd");
pub(crate) const POOL_BWD: PerStorage = per_storage!("pool_bwd");

/// NHWC max pooling with a saved argmax (`--own-kernels`), one channel
/// per thread or one 16-byte vector of channels (`_vec`).
pub(crate) const MAXPOOL_NHWC_FWD: PerStorage = per_storage!("maxpool_nhwc_fwd");
pub(crate) const MAXPOOL_NHWC_FWD_VEC: PerStorage = per_storage!("maxpool_nhwc_fwd_vec");
pub(crate) const MAXPOOL_NHWC_BWD: PerStorage = per_storage!("maxpool_nhwc_bwd");
pub(crate) const MAXPOOL_NHWC_BWD_VEC: PerStorage = per_storage!("maxpool_nhwc_bwd_vec");

/// `pool.cu` and its kernels.
pub const PROGRAM: Program = Program {
    file: "pool.cu",
    source: include_str!("pool.cu"),
    per_storage: &[
        POOL_FWD,
        POOL_BWD,
        MAXPOOL_NHWC_FWD,
        MAXPOOL_NHWC_FWD_VEC,
        MAXPOOL_NHWC_BWD,
        MAXPOOL_NHWC_BWD_VEC,
    ],
    single: &[],
};

/// Whether the NHWC max-pool kernels with a saved argmax take `shape`: a
/// window's position fits in the argmax byte.
pub fn maxpool_nhwc_fits(shape: &PoolShape) -> bool {
    shape.kh.checked_mul(shape.kw).is_some_and(|k| k <= 256)
}

impl Kernels {
    /// Max (`max`) or average pooling forward, with the semantics of
    /// `cnnbench_kernels::pool` (see pool.cu), in storage `st`, NCHW when
    /// `nchw` else NHWC.
    ///
    /// # Safety
    ///
    /// `x` must hold `shape.src_len()` and `y` `shape.dst_len()` elements
    /// of `st`, live until the work completes on `stream`, and not overlap.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn pool_fwd(
        &self,
        stream: &CudaStream,
        st: Storage,
        shape: &PoolShape,
        max: bool,
        nchw: bool,
        x: CUdeviceptr,
        y: CUdeviceptr,
    ) -> GpuResult<()> {
        let name = POOL_FWD.name(st);
        let (ints, n_out, _) = pool_ints(name, shape, max, nchw)?;
        if n_out == 0 {
            return Ok(());
        }
        let mut args = vec![Arg::Ptr(x), Arg::Ptr(y)];
        args.extend(ints.map(Arg::I32));
        // SAFETY: (const T* x, T* y, 15 ints) with the caller's sizes.
        unsafe { self.launch(stream, name, blocks_for(n_out), &args) }
    }

    /// Pooling backward: `dx` gets, per input cell, the sum of the
    /// gradients of the windows it wins (max: the window's first maximum,
    /// recomputed from `x`) or the windows' `dy / divisor` (average). Every
    /// element of `dx` is written.
    ///
    /// # Safety
    ///
    /// `x` and `dx` must hold `shape.src_len()` and `dy` `shape.dst_len()`
    /// elements of `st`, live until the work completes on `stream`; `dx`
    /// must not overlap the others.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn pool_bwd(
        &self,
        stream: &CudaStream,
        st: Storage,
        shape: &PoolShape,
        max: bool,
        nchw: bool,
        x: CUdeviceptr,
        dy: CUdeviceptr,
        dx: CUdeviceptr,
    ) -> GpuResult<()> {
        let name = POOL_BWD.name(st);
        let (ints, _, n_in) = pool_ints(name, shape, max, nchw)?;
        if n_in == 0 {
            return Ok(());
        }
        let mut args = vec![Arg::Ptr(x), Arg::Ptr(dy), Arg::Ptr(dx)];
        args.extend(ints.map(Arg::I32));
        // SAFETY: (const T* x, const T* dy, T* dx, 15 ints) with the
        // caller's sizes.
        unsafe { self.launch(stream, name, blocks_for(n_in), &args) }
    }
}

impl Kernels {
    /// NHWC max pooling forward (semantics as [`Kernels::pool_fwd`]), also
    /// writing `arg`: per output element, the position of its maximum
    /// within its window (see pool.cu), for [`Kernels::maxpool_nhwc_bwd`].
    ///
    /// # Safety
    ///
    /// `x` must hold `shape.src_len()` and `y` `shape.dst_len()` elements
    /// of `st`, `arg` `shape.dst_len()` bytes, live until the work
    /// completes on `stream`, and not overlap.
    pub unsafe fn maxpool_nhwc_fwd(
        &self,
        stream: &CudaStream,
        st: Storage,
        shape: &PoolShape,
        x: CUdeviceptr,
        y: CUdeviceptr,
        arg: CUdeviceptr,
    ) -> GpuResult<()> {
        // Channels per thread: a vector where every buffer allows it (the
        // argmax bytes too: the vector kernels move a group's 4 or 8 of
        // them in one access).
        let g = vector_width(st, shape.c, &[x, y, arg]);
        let k = if g > 1 {
            MAXPOOL_NHWC_FWD_VEC
        } else {
            MAXPOOL_NHWC_FWD
        };
        let name = k.name(st);
        if !maxpool_nhwc_fits(shape) {
            return Err(invalid(name, format!("window over 256 cells: {shape:?}")));
        }
        let (ints, n_out, _) = pool_ints(name, shape, true, false)?;
        if n_out == 0 {
            return Ok(());
        }
        let mut args = vec![Arg::Ptr(x), Arg::Ptr(y), Arg::Ptr(arg)];
        args.extend(ints.map(Arg::I32));
        // SAFETY: (const T* x, T* y, u8* arg, 15 ints) with the caller's
        // sizes.
        unsafe { self.launch(stream, name, blocks_for(n_out / g as u64), &args) }
    }

    /// NHWC max pooling backward from the forward's `arg` and `dy` alone:
    /// every element of `dx` gets the sum of the gradients of the windows
    /// it won, in ascending window order.
    ///
    /// # Safety
    ///
    /// `arg` must hold `shape.dst_len()` bytes written by
    /// [`Kernels::maxpool_nhwc_fwd`] for this shape, `dy`
    /// `shape.dst_len()` and `dx` `shape.src_len()` elements of `st`, live
    /// until the work completes on `stream`; `dx` must not overlap the
    /// others.
    pub unsafe fn maxpool_nhwc_bwd(
        &self,
        stream: &CudaStream,
        st: Storage,
        shape: &PoolShape,
        arg: CUdeviceptr,
        dy: CUdeviceptr,
        dx: CUdeviceptr,
    ) -> GpuResult<()> {
        let g = vector_width(st, shape.c, &[arg, dy, dx]);
        let k = if g > 1 {
            MAXPOOL_NHWC_BWD_VEC
        } else {
            MAXPOOL_NHWC_BWD
        };
        let name = k.name(st);
        let (ints, _, n_in) = pool_ints(name, shape, true, false)?;
        if n_in == 0 {
            return Ok(());
        }
        let mut args = vec![Arg::Ptr(arg), Arg::Ptr(dy), Arg::Ptr(dx)];
        args.extend(ints.map(Arg::I32));
        // SAFETY: (const u8* arg, const T* dy, T* dx, 15 ints) with the
        // caller's sizes.
        unsafe { self.launch(stream, name, blocks_for(n_in / g as u64), &args) }
    }
}

/// The pool kernels' int parameters (mb, c, ih, iw, oh, ow, kh, kw, sh, sw,
/// ph, pw, is_max, count_pad, nchw), checked so that the kernels' int
/// arithmetic within an image cannot overflow, and the element counts of
/// the output and the input.
fn pool_ints(
    name: &'static str,
    s: &PoolShape,
    max: bool,
    nchw: bool,
) -> GpuResult<([i32; 15], u64, u64)> {
    if s.kh == 0 || s.kw == 0 || s.sh == 0 || s.sw == 0 {
        return Err(invalid(name, format!("empty window or zero stride: {s:?}")));
    }
    // window() computes o·s − p + k and n + p; covering() i + p; the
    // divisor at most kh·kw. All stay below these bounds.
    let fits = |o: usize, st: usize, k: usize, n: usize, p: usize| {
        o.checked_mul(st)
            .and_then(|v| v.checked_add(k + n + p))
            .is_some_and(|v| v <= i32::MAX as usize)
    };
    if !fits(s.oh, s.sh, s.kh, s.ih, s.ph)
        || !fits(s.ow, s.sw, s.kw, s.iw, s.pw)
        || s.kh.checked_mul(s.kw).is_none_or(|v| v > i32::MAX as usize)
    {
        return Err(invalid(
            name,
            format!("pool shape too large for int: {s:?}"),
        ));
    }
    let count = |dims: [usize; 4]| {
        dims.into_iter()
            .try_fold(1usize, usize::checked_mul)
            .and_then(|v| u64::try_from(v).ok())
            .ok_or_else(|| invalid(name, format!("element count overflows: {s:?}")))
    };
    let n_out = count([s.mb, s.c, s.oh, s.ow])?;
    let n_in = count([s.mb, s.c, s.ih, s.iw])?;
    let mut ints = [0i32; 15];
    let dims = [
        ("mb", s.mb),
        ("c", s.c),
        ("ih", s.ih),
        ("iw", s.iw),
        ("oh", s.oh),
        ("ow", s.ow),
        ("kh", s.kh),
        ("kw", s.kw),
        ("sh", s.sh),
        ("sw", s.sw),
        ("ph", s.ph),
        ("pw", s.pw),
    ];
    for (slot, (what, v)) in ints.iter_mut().zip(dims) {
        *slot = to_i32(name, what, v)?;
    }
    ints[12] = max as i32;
    ints[13] = s.count_pad as i32;
    ints[14] = nchw as i32;
    Ok((ints, n_out, n_in))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_launch_sizes_are_checked() {
        let shape = PoolShape {
            mb: 2,
            c: 3,
            ih: 13,
            iw: 13,
            oh: 6,
            ow: 6,
            kh: 3,
            kw: 3,
            sh: 2,
            sw: 2,
            ph: 0,
            pw: 0,
            count_pad: true,
        };
        let (ints, n_out, n_in) = pool_ints("pool_fwd_f32", &shape, true, false).unwrap();
        assert_eq!(ints, [2, 3, 13, 13, 6, 6, 3, 3, 2, 2, 0, 0, 1, 1, 0]);
        assert_eq!((n_out, n_in), (2 * 3 * 36, 2 * 3 * 169));
        let huge = PoolShape {
            ih: 1 << 31,
            ..shape
        };
        let e = pool_ints("pool_fwd_f32", &huge, true, false).unwrap_err();
        assert_eq!(e.call, "pool_fwd_f32");
        let zero_stride = PoolShape { sh: 0, ..shape };
        assert!(pool_ints("pool_fwd_f32", &zero_stride, false, true).is_err());
    }

    /// The NHWC max-pool kernels with a saved argmax on the host against
    /// the CPU's f64 reference, in every storage, both the channel-vector
    /// and the one-channel variants (channels that do not divide into
    /// vectors take the latter only): ResNet's 3x3/2 window with padding,
    /// a ceil-mode window into the far padding, and ties (a third of the
    /// inputs zero, as after a ReLU: the first zero in scan order wins).
    #[test]
    fn emulated_nhwc_max_pool_matches_the_reference() {
        use crate::backend::cuda::emu::{self, render, EmuRun};
        use cnnbench_kernels::conv::reference::rel_l2_error;
        use cnnbench_kernels::pool::reference;
        use cnnbench_kernels::rng::fill_uniform;
        if !emu::available() {
            return;
        }
        let resnet = PoolShape {
            mb: 2,
            c: 16,
            ih: 9,
            iw: 9,
            oh: 5,
            ow: 5,
            kh: 3,
            kw: 3,
            sh: 2,
            sw: 2,
            ph: 1,
            pw: 1,
            count_pad: false,
        };
        let ceil = PoolShape {
            c: 6,
            ih: 14,
            iw: 13,
            oh: 7,
            ow: 7,
            ph: 0,
            pw: 1,
            ..resnet
        };
        for (storage, dtype, tol) in [
            ("f32", crate::core::DType::F32, 1e-6),
            ("f16", crate::core::DType::F16, 1e-3),
            ("bf16", crate::core::DType::Bf16, 1e-2),
        ] {
            let ty = emu::storage_type(storage);
            let per = if storage == "f32" { 4 } else { 8 };
            let (mut main, mut inputs, mut outputs, mut want) =
                (String::new(), Vec::new(), Vec::new(), Vec::new());
            for (i, p) in [resnet, ceil].into_iter().enumerate() {
                let (mut x, mut dy) = (vec![0.0f32; p.src_len()], vec![0.0f32; p.dst_len()]);
                fill_uniform(&mut x, 7 + i as u64, 1.0);
                fill_uniform(&mut dy, 8 + i as u64, 1.0);
                x.iter_mut().step_by(3).for_each(|v| *v = 0.0);
                dtype.round_in_place(&mut x);
                dtype.round_in_place(&mut dy);
                let (mut y, mut dx) = (vec![0.0; p.dst_len()], vec![0.0; p.src_len()]);
                reference::fwd(&p, true, &x, &mut y);
                reference::bwd(&p, true, &x, &dy, &mut dx);
                inputs.push((format!("x{i}.bin"), x));
                inputs.push((format!("dy{i}.bin"), dy));
                let (ints, n_out, n_in) = pool_ints("maxpool_nhwc_fwd", &p, true, false).unwrap();
                let ints = render(&ints.map(Arg::I32));
                let variants: &[&str] = if p.c % per == 0 { &["_vec", ""] } else { &[""] };
                for v in variants {
                    let tag = format!("{i}{v}");
                    main += &format!(
                        "{{ auto x = emu_load<{ty}>(\"x{i}.bin\", {n_in});
                         auto dy = emu_load<{ty}>(\"dy{i}.bin\", {n_out});
                         if ((uintptr_t)x.data() % 16 || (uintptr_t)dy.data() % 16) return 3;
                         std::vector<{ty}::T> y({n_out}), dx({n_in});
                         std::vector<u8> arg({n_out}, 255);
                         emu_launch(2, [&] {{ maxpool_nhwc_fwd{v}_{storage}(x.data(), y.data(),
                             arg.data(), {ints}); }});
                         emu_launch(2, [&] {{ maxpool_nhwc_bwd{v}_{storage}(arg.data(), dy.data(),
                             dx.data(), {ints}); }});
                         emu_save<{ty}>(\"y{tag}.bin\", y);
                         emu_save<{ty}>(\"dx{tag}.bin\", dx); }}\n"
                    );
                    outputs.push((format!("y{tag}.bin"), n_out as usize));
                    outputs.push((format!("dx{tag}.bin"), n_in as usize));
                    want.push((format!("{storage} {p:?} {v}"), y.clone(), dx.clone()));
                }
            }
            let got = EmuRun {
                program: &PROGRAM,
                main,
                inputs,
                outputs,
            }
            .run();
            for (got, (what, y, dx)) in got.chunks(2).zip(&want) {
                assert_eq!(&got[0], y, "{what}: y");
                let e = rel_l2_error(&got[1], dx);
                assert!(e <= tol, "{what}: dx off by {e:.1e}");
            }
        }
    }

    /// `pool.cu` run on the host (`backend::cuda::emu`) with the wrapper's
    /// arguments, against the CPU's f64 reference: max and average
    /// (with and without the padding in the divisor), ceil-mode windows
    /// that run into the far padding, both layouts.
    #[test]
    fn emulated_pool_matches_the_reference() {
        use crate::backend::cuda::emu::{self, render, EmuRun};
        use crate::core::layout::{nchw_to_nhwc, nhwc_to_nchw};
        use cnnbench_kernels::conv::reference::rel_l2_error;
        use cnnbench_kernels::pool::reference;
        use cnnbench_kernels::rng::fill_uniform;
        if !emu::available() {
            return;
        }
        let base = PoolShape {
            mb: 2,
            c: 3,
            ih: 14,
            iw: 13,
            // ceil((14 - 3) / 2) + 1 = 7, ceil((13 + 2 - 3) / 2) + 1 = 7:
            // the last windows run past the input.
            oh: 7,
            ow: 7,
            kh: 3,
            kw: 3,
            sh: 2,
            sw: 2,
            ph: 0,
            pw: 1,
            count_pad: true,
        };
        let global = |ih, iw| PoolShape {
            ih,
            iw,
            oh: 1,
            ow: 1,
            kh: ih,
            kw: iw,
            sh: 1,
            sw: 1,
            ph: 0,
            pw: 0,
            count_pad: false,
            ..base
        };
        let cases = [
            (base, true),
            (base, false),
            (
                PoolShape {
                    count_pad: false,
                    ..base
                },
                false,
            ),
            (
                PoolShape {
                    oh: 6,
                    ow: 6,
                    pw: 0,
                    ..base
                },
                true,
            ),
            // Global averages (`--own-kernels`): imdb-fasttext's shape (one
            // row of steps) and ResNet's (a square), shrunk.
            (global(1, 40), false),
            (global(7, 7), false),
        ];
        for (p, max) in &cases[4..] {
            assert!(!max && crate::ops::pool::cuda::is_global_avg(p), "{p:?}");
        }
        assert!(!crate::ops::pool::cuda::is_global_avg(&base));
        let (mut main, mut inputs, mut outputs, mut want) =
            (String::new(), Vec::new(), Vec::new(), Vec::new());
        for (i, &(p, max)) in cases.iter().enumerate() {
            let (mut x, mut dy) = (vec![0.0f32; p.src_len()], vec![0.0f32; p.dst_len()]);
            fill_uniform(&mut x, 3 + i as u64, 1.0);
            fill_uniform(&mut dy, 5 + i as u64, 1.0);
            let (mut y, mut dx) = (vec![0.0; p.dst_len()], vec![0.0; p.src_len()]);
            reference::fwd(&p, max, &x, &mut y);
            reference::bwd(&p, max, &x, &dy, &mut dx);
            for nchw in [false, true] {
                let tag = format!("{i}_{nchw}");
                let (ints, n_out, n_in) = pool_ints("pool_fwd_f32", &p, max, nchw).unwrap();
                let ints = render(&ints.map(Arg::I32));
                let (src, dst) = (p.ih * p.iw, p.oh * p.ow);
                let order = |v: &[f32], hw| {
                    if nchw {
                        nhwc_to_nchw(v, p.mb, hw, 1, p.c)
                    } else {
                        v.to_vec()
                    }
                };
                inputs.push((format!("x{tag}.bin"), order(&x, src)));
                inputs.push((format!("dy{tag}.bin"), order(&dy, dst)));
                main += &format!(
                    "{{ auto x = emu_load<F32>(\"x{tag}.bin\", {n_in});
                     auto dy = emu_load<F32>(\"dy{tag}.bin\", {n_out});
                     std::vector<float> y({n_out}, NAN), dx({n_in}, NAN);
                     emu_launch(2, [&] {{ pool_fwd_f32(x.data(), y.data(), {ints}); }});
                     emu_launch(2, [&] {{ pool_bwd_f32(x.data(), dy.data(), dx.data(), {ints}); }});
                     emu_save<F32>(\"y{tag}.bin\", y);
                     emu_save<F32>(\"dx{tag}.bin\", dx); }}\n"
                );
                outputs.push((format!("y{tag}.bin"), n_out as usize));
                outputs.push((format!("dx{tag}.bin"), n_in as usize));
                want.push((
                    format!("{p:?} max={max} nchw={nchw}"),
                    p,
                    nchw,
                    y.clone(),
                    dx.clone(),
                ));
            }
        }
        let got = EmuRun {
            program: &PROGRAM,
            main,
            inputs,
            outputs,
        }
        .run();
        for (got, (what, p, nchw, y, dx)) in got.chunks(2).zip(&want) {
            let back = |v: &[f32], hw| {
                if *nchw {
                    nchw_to_nhwc(v, p.mb, hw, 1, p.c)
                } else {
                    v.to_vec()
                }
            };
            let ey = rel_l2_error(&back(&got[0], p.oh * p.ow), y);
            let edx = rel_l2_error(&back(&got[1], p.ih * p.iw), dx);
            assert!(
                ey <= 1e-6 && edx <= 1e-6,
                "{what}: y off by {ey:.1e}, dx by {edx:.1e}"
            );
        }
    }
}
