//! One convolution's cuDNN descriptors and the calls that use them, on
//! tensors given by pointer: shared by the single-layer benchmark
//! ([`super::cuda::GpuConv`]) and the network's convolution layers
//! ([`super::gpu_layer`]).

use super::kernels::BiasGrad;
use crate::backend::cuda::cudnn::{
    self, ConvDesc, ConvFns, ConvGeometry, CudnnHandle, FilterDesc, RawAlgoPerf, TensorDesc,
};
use crate::backend::cuda::loader::cudnn_sys as sys;
use crate::backend::cuda::memory::Workspace;
use crate::backend::cuda::nvrtc::Kernels;
use crate::backend::cuda::{check_cudnn, GpuResult};
use crate::core::{DType, Layout};
use cnnbench_kernels::conv::{ConvShape, Direction};
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::CudaStream;
use std::ffi::c_void;

/// The device tensors of one convolution (null where a direction does not
/// touch them).
#[derive(Clone, Copy, Debug)]
pub struct ConvPtrs {
    pub src: *mut c_void,
    pub wei: *mut c_void,
    pub bias: *mut c_void,
    pub dst: *mut c_void,
    pub diff_dst: *mut c_void,
    pub diff_src: *mut c_void,
    pub diff_wei: *mut c_void,
    pub diff_bias: *mut c_void,
}

/// What a run with bias needs besides the descriptors: who computes the
/// bias gradient, and (for `bias_grad.cu`) the kernels and the stream.
#[derive(Clone, Copy)]
pub struct BiasCx<'a> {
    pub grad: &'a BiasGrad,
    pub kernels: Option<&'a Kernels>,
    pub stream: &'a CudaStream,
}

/// One algorithm as cuDNN reports it for a direction.
#[derive(Clone, Debug, PartialEq)]
pub struct AlgoInfo {
    pub id: u32,
    /// `ok`, `not supported`, `out of memory`, ...
    pub status: String,
    /// cuDNN's own time (FindEx only).
    pub cudnn_ms: Option<f64>,
    pub workspace_bytes: usize,
    /// cudnnMathType_t by number.
    pub math: u32,
    /// cuDNN marks it deterministic (`CUDNN_DETERMINISTIC`): its sums run
    /// in the same order every time.
    pub deterministic: bool,
}

pub struct ConvDescs {
    pub shape: ConvShape,
    pub dtype: DType,
    pub x: TensorDesc,
    pub y: TensorDesc,
    pub bias: TensorDesc,
    pub w: FilterDesc,
    pub conv: ConvDesc,
    fns: &'static ConvFns,
}

/// cuDNN's geometry for a oneDNN-convention shape (dilation 0 = dense).
pub fn geometry(p: &ConvShape) -> ConvGeometry {
    ConvGeometry {
        pad: [p.ph, p.pw],
        stride: [p.sh, p.sw],
        dilation: [p.dh + 1, p.dw + 1],
        groups: p.g,
    }
}

impl ConvDescs {
    pub fn new(p: ConvShape, dtype: DType, layout: Layout) -> GpuResult<ConvDescs> {
        Ok(ConvDescs {
            shape: p,
            dtype,
            x: TensorDesc::new(layout, dtype, p.mb, p.ic, p.ih, p.iw)?,
            y: TensorDesc::new(layout, dtype, p.mb, p.oc, p.oh, p.ow)?,
            bias: TensorDesc::new(layout, dtype, 1, p.oc, 1, 1)?,
            w: FilterDesc::new(layout, dtype, p.oc, p.icg(), p.kh, p.kw)?,
            conv: ConvDesc::new(&geometry(&p), cudnn::math_for(dtype))?,
            fns: ConvFns::get()?,
        })
    }

    /// Puts the descriptor back to the dtype's math type, so that searches
    /// and workspace queries see every algorithm the dtype allows.
    pub fn reset_math(&self) -> GpuResult<()> {
        self.conv.set_math(cudnn::math_for(self.dtype))
    }

    /// How many algorithms cuDNN has for `dir`.
    pub fn algo_count(&self, h: &CudnnHandle, dir: Direction) -> GpuResult<u32> {
        let mut n = 0;
        // SAFETY: valid handle, out-pointer to a local.
        let (call, st) = unsafe {
            match dir {
                Direction::Fwd => (
                    "cudnnGetConvolutionForwardAlgorithmMaxCount",
                    sys::cudnnGetConvolutionForwardAlgorithmMaxCount(h.0, &mut n),
                ),
                Direction::BwdData => (
                    "cudnnGetConvolutionBackwardDataAlgorithmMaxCount",
                    sys::cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h.0, &mut n),
                ),
                Direction::BwdFilter => (
                    "cudnnGetConvolutionBackwardFilterAlgorithmMaxCount",
                    sys::cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h.0, &mut n),
                ),
            }
        };
        check_cudnn(call, st)?;
        Ok(n.max(0) as u32)
    }

    /// Workspace bytes algorithm `id` needs for `dir` under the math type
    /// set now, or why it cannot run.
    pub fn workspace_size(&self, h: &CudnnHandle, dir: Direction, id: u32) -> GpuResult<usize> {
        let mut bytes = 0usize;
        let (x, y, w, c) = (self.x.0, self.y.0, self.w.0, self.conv.0);
        // SAFETY: valid handle and descriptors, out-pointer to a local.
        let (call, st) = unsafe {
            match dir {
                Direction::Fwd => (
                    "cudnnGetConvolutionForwardWorkspaceSize",
                    (self.fns.fwd_ws)(h.0, x, w, c, y, id, &mut bytes),
                ),
                Direction::BwdData => (
                    "cudnnGetConvolutionBackwardDataWorkspaceSize",
                    (self.fns.bwd_data_ws)(h.0, w, y, c, x, id, &mut bytes),
                ),
                Direction::BwdFilter => (
                    "cudnnGetConvolutionBackwardFilterWorkspaceSize",
                    (self.fns.bwd_filter_ws)(h.0, x, y, c, w, id, &mut bytes),
                ),
            }
        };
        cudnn::check_raw(call, st)?;
        Ok(bytes)
    }

    /// The most workspace any algorithm of `dir` needs within `limit`: what
    /// an exhaustive search may use.
    pub fn search_workspace(
        &self,
        h: &CudnnHandle,
        dir: Direction,
        limit: usize,
    ) -> GpuResult<usize> {
        self.reset_math()?;
        let mut ws = 0;
        for id in 0..self.algo_count(h, dir)? {
            if let Ok(b) = self.workspace_size(h, dir, id) {
                if b <= limit {
                    ws = ws.max(b);
                }
            }
        }
        Ok(ws)
    }

    /// cuDNN's heuristic ranking (`Get_v7`), best first.
    pub fn heuristic(&self, h: &CudnnHandle, dir: Direction) -> GpuResult<Vec<AlgoInfo>> {
        self.reset_math()?;
        let mut perf = vec![RawAlgoPerf::default(); self.algo_count(h, dir)?.max(1) as usize];
        let mut got = 0;
        let n = perf.len() as i32;
        let out = perf.as_mut_ptr();
        let (x, y, w, c) = (self.x.0, self.y.0, self.w.0, self.conv.0);
        // SAFETY: `perf` holds `n` entries laid out as cuDNN's perf structs.
        let (call, st) = unsafe {
            match dir {
                Direction::Fwd => (
                    "cudnnGetConvolutionForwardAlgorithm_v7",
                    sys::cudnnGetConvolutionForwardAlgorithm_v7(
                        h.0,
                        x,
                        w,
                        c,
                        y,
                        n,
                        &mut got,
                        out.cast(),
                    ),
                ),
                Direction::BwdData => (
                    "cudnnGetConvolutionBackwardDataAlgorithm_v7",
                    sys::cudnnGetConvolutionBackwardDataAlgorithm_v7(
                        h.0,
                        w,
                        y,
                        c,
                        x,
                        n,
                        &mut got,
                        out.cast(),
                    ),
                ),
                Direction::BwdFilter => (
                    "cudnnGetConvolutionBackwardFilterAlgorithm_v7",
                    sys::cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                        h.0,
                        x,
                        y,
                        c,
                        w,
                        n,
                        &mut got,
                        out.cast(),
                    ),
                ),
            }
        };
        check_cudnn(call, st)?;
        Ok(perf[..got.clamp(0, n) as usize]
            .iter()
            .map(|r| info(r, false))
            .collect())
    }

    /// cuDNN's exhaustive search (`FindEx`) on `t`, with workspace `ws`;
    /// sorted by cuDNN's time. It writes the direction's output tensor.
    pub fn find(
        &self,
        h: &CudnnHandle,
        dir: Direction,
        t: &ConvPtrs,
        ws: Workspace,
    ) -> GpuResult<Vec<AlgoInfo>> {
        self.reset_math()?;
        let mut perf = vec![RawAlgoPerf::default(); self.algo_count(h, dir)?.max(1) as usize];
        let mut got = 0;
        let n = perf.len() as i32;
        let out = perf.as_mut_ptr();
        let (x, y, w, c) = (self.x.0, self.y.0, self.w.0, self.conv.0);
        // SAFETY: the caller's tensors are sized for this problem and
        // dtype; `perf` as above.
        let (call, st) = unsafe {
            match dir {
                Direction::Fwd => (
                    "cudnnFindConvolutionForwardAlgorithmEx",
                    sys::cudnnFindConvolutionForwardAlgorithmEx(
                        h.0,
                        x,
                        t.src,
                        w,
                        t.wei,
                        c,
                        y,
                        t.dst,
                        n,
                        &mut got,
                        out.cast(),
                        ws.ptr,
                        ws.bytes,
                    ),
                ),
                Direction::BwdData => (
                    "cudnnFindConvolutionBackwardDataAlgorithmEx",
                    sys::cudnnFindConvolutionBackwardDataAlgorithmEx(
                        h.0,
                        w,
                        t.wei,
                        y,
                        t.diff_dst,
                        c,
                        x,
                        t.diff_src,
                        n,
                        &mut got,
                        out.cast(),
                        ws.ptr,
                        ws.bytes,
                    ),
                ),
                Direction::BwdFilter => (
                    "cudnnFindConvolutionBackwardFilterAlgorithmEx",
                    sys::cudnnFindConvolutionBackwardFilterAlgorithmEx(
                        h.0,
                        x,
                        t.src,
                        y,
                        t.diff_dst,
                        c,
                        w,
                        t.diff_wei,
                        n,
                        &mut got,
                        out.cast(),
                        ws.ptr,
                        ws.bytes,
                    ),
                ),
            }
        };
        check_cudnn(call, st)?;
        Ok(perf[..got.clamp(0, n) as usize]
            .iter()
            .map(|r| info(r, true))
            .collect())
    }

    /// Enqueues one run of `algo` for `dir` (the math type already set),
    /// with the bias when `bias` is given: forward adds it, backward-filter
    /// also writes its gradient (by cuDNN or, for bf16, by `bias_grad.cu`).
    ///
    /// # Safety
    /// `t`'s tensors of `dir` and `ws` must be device memory sized for this
    /// problem, dtype and algorithm.
    pub unsafe fn run(
        &self,
        h: &CudnnHandle,
        dir: Direction,
        algo: u32,
        bias: Option<BiasCx<'_>>,
        t: &ConvPtrs,
        ws: Workspace,
    ) -> GpuResult<()> {
        let (one, zero) = (1f32, 0f32);
        let (one, zero) = (
            &one as *const f32 as *const c_void,
            &zero as *const f32 as *const c_void,
        );
        let (x, y, w, c) = (self.x.0, self.y.0, self.w.0, self.conv.0);
        // alpha/beta are floats, as cuDNN wants for float, half and
        // bfloat16 data.
        match dir {
            Direction::Fwd => {
                cudnn::check_raw(
                    "cudnnConvolutionForward",
                    (self.fns.fwd)(
                        h.0, one, x, t.src, w, t.wei, c, algo, ws.ptr, ws.bytes, zero, y, t.dst,
                    ),
                )?;
                if let Some(b) = bias {
                    self.run_bias(h, dir, b, t)?;
                }
            }
            Direction::BwdData => cudnn::check_raw(
                "cudnnConvolutionBackwardData",
                (self.fns.bwd_data)(
                    h.0, one, w, t.wei, y, t.diff_dst, c, algo, ws.ptr, ws.bytes, zero, x,
                    t.diff_src,
                ),
            )?,
            Direction::BwdFilter => {
                cudnn::check_raw(
                    "cudnnConvolutionBackwardFilter",
                    (self.fns.bwd_filter)(
                        h.0, one, x, t.src, y, t.diff_dst, c, algo, ws.ptr, ws.bytes, zero, w,
                        t.diff_wei,
                    ),
                )?;
                if let Some(b) = bias {
                    self.run_bias(h, dir, b, t)?;
                }
            }
        }
        Ok(())
    }

    /// The bias's part of a run of `dir`, after the convolution itself:
    /// forward adds it to the output; backward-filter writes its gradient
    /// (by cuDNN or, for bf16, by `bias_grad.cu`); backward-data has none.
    /// The graph API's runs ([`super::graph_conv`]) share it.
    ///
    /// # Safety
    /// As [`Self::run`]'s.
    pub unsafe fn run_bias(
        &self,
        h: &CudnnHandle,
        dir: Direction,
        b: BiasCx<'_>,
        t: &ConvPtrs,
    ) -> GpuResult<()> {
        match dir {
            Direction::Fwd => {
                let one = 1f32;
                let one = &one as *const f32 as *const c_void;
                check_cudnn(
                    "cudnnAddTensor",
                    sys::cudnnAddTensor(h.0, one, self.bias.0, t.bias, one, self.y.0, t.dst),
                )
            }
            Direction::BwdData => Ok(()),
            Direction::BwdFilter => b.grad.run(
                h,
                b.kernels,
                b.stream,
                &self.y,
                t.diff_dst as CUdeviceptr,
                &self.bias,
                t.diff_bias as CUdeviceptr,
            ),
        }
    }
}

fn info(r: &RawAlgoPerf, timed: bool) -> AlgoInfo {
    let ok = r.status == 0;
    AlgoInfo {
        id: r.algo,
        status: cudnn::status_name(r.status),
        cudnn_ms: (timed && ok && r.time >= 0.0).then_some(r.time as f64),
        workspace_bytes: r.memory,
        math: r.math_type,
        deterministic: r.determinism == cudnn::DETERMINISTIC,
    }
}
