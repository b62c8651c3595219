//! A small RAII layer over cuDNN's C API (cudarc's safe wrappers hide the
//! descriptors and offer heuristic algorithms only). Algorithm enums cross
//! this boundary as plain numbers, so an algorithm added by a newer cuDNN is
//! carried and printed by number instead of becoming an invalid Rust enum.

use super::error::{check_cudnn, GpuError, GpuResult};
use crate::backend::cuda::loader::cudnn_sys as sys;
use crate::core::{DType, Layout};
use std::ffi::c_void;
use std::sync::OnceLock;

pub use super::loader::cudnn_sys::{version, version_string};

/// The CUDA runtime version cuDNN was built against, e.g. `13.0`.
pub fn cudart_version() -> String {
    // SAFETY: no arguments.
    let v = unsafe { sys::cudnnGetCudartVersion() };
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

pub struct CudnnHandle(pub(crate) sys::cudnnHandle_t);

impl CudnnHandle {
    /// A handle whose work goes to `stream`.
    pub fn new(stream: &std::sync::Arc<cudarc::driver::CudaStream>) -> GpuResult<CudnnHandle> {
        let mut h = std::ptr::null_mut();
        // SAFETY: out-pointer to a local.
        check_cudnn("cudnnCreate", unsafe { sys::cudnnCreate(&mut h) })?;
        let handle = CudnnHandle(h);
        // SAFETY: valid handle and stream.
        check_cudnn("cudnnSetStream", unsafe {
            sys::cudnnSetStream(h, stream.cu_stream() as sys::cudaStream_t)
        })?;
        Ok(handle)
    }
}

impl Drop for CudnnHandle {
    fn drop(&mut self) {
        // SAFETY: created by cudnnCreate, destroyed once.
        unsafe {
            let _ = sys::cudnnDestroy(self.0);
        }
    }
}

pub fn data_type(d: DType) -> sys::cudnnDataType_t {
    match d {
        DType::F32 | DType::Tf32 => sys::cudnnDataType_t::CUDNN_DATA_FLOAT,
        DType::F16 => sys::cudnnDataType_t::CUDNN_DATA_HALF,
        DType::Bf16 => sys::cudnnDataType_t::CUDNN_DATA_BFLOAT16,
    }
}

fn format(l: Layout) -> sys::cudnnTensorFormat_t {
    match l {
        Layout::Nchw => sys::cudnnTensorFormat_t::CUDNN_TENSOR_NCHW,
        Layout::Nhwc => sys::cudnnTensorFormat_t::CUDNN_TENSOR_NHWC,
    }
}

/// `cudnnDeterminism_t`'s `CUDNN_DETERMINISTIC`, as an algorithm query
/// reports it ([`RawAlgoPerf::determinism`]).
pub const DETERMINISTIC: u32 = sys::cudnnDeterminism_t::CUDNN_DETERMINISTIC as u32;

/// cuDNN's math types by number (`cudnnMathType_t`).
pub mod math {
    pub const DEFAULT: u32 = 0;
    pub const TENSOR_OP: u32 = 1;
    pub const TENSOR_OP_ALLOW_CONVERSION: u32 = 2;
    pub const FMA: u32 = 3;

    pub fn name(m: u32) -> String {
        match m {
            DEFAULT => "default".into(),
            TENSOR_OP => "tensor_op".into(),
            TENSOR_OP_ALLOW_CONVERSION => "tensor_op_allow_conversion".into(),
            FMA => "fma".into(),
            other => format!("math#{other}"),
        }
    }
}

/// The math type a dtype asks for, as PyTorch sets it: true fp32 is FMA
/// only (the default math type would allow TF32 on Ampere and later), TF32
/// is the default math on fp32 data, and half types use tensor ops.
pub fn math_for(d: DType) -> u32 {
    match d {
        DType::F32 => math::FMA,
        DType::Tf32 => math::DEFAULT,
        DType::F16 | DType::Bf16 => math::TENSOR_OP,
    }
}

/// Whether an algorithm result with math type `m` honours dtype `d`: an
/// f32 run must not use tensor cores, and nothing may down-convert.
pub fn math_allowed(d: DType, m: u32) -> bool {
    match d {
        DType::F32 => m == math::FMA,
        _ => m == math::DEFAULT || m == math::TENSOR_OP || m == math::FMA,
    }
}

fn math_enum(m: u32) -> Option<sys::cudnnMathType_t> {
    Some(match m {
        math::DEFAULT => sys::cudnnMathType_t::CUDNN_DEFAULT_MATH,
        math::TENSOR_OP => sys::cudnnMathType_t::CUDNN_TENSOR_OP_MATH,
        math::TENSOR_OP_ALLOW_CONVERSION => {
            sys::cudnnMathType_t::CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION
        }
        math::FMA => sys::cudnnMathType_t::CUDNN_FMA_MATH,
        _ => return None,
    })
}

fn to_int(call: &'static str, v: usize) -> GpuResult<i32> {
    i32::try_from(v).map_err(|_| GpuError {
        call,
        status: format!("dimension {v} does not fit in a C int"),
        oom: false,
    })
}

/// The most elements cuDNN takes in one tensor: `cudnnSetTensor4dDescriptor`
/// returns CUDNN_STATUS_NOT_SUPPORTED from 2^31 elements on, whatever the
/// dtype and layout (checked with cuDNN 9.26's library).
pub const MAX_TENSOR_ELEMENTS: u64 = i32::MAX as u64;

/// Whether an `n x c x h x w` tensor is within [`MAX_TENSOR_ELEMENTS`];
/// if not, why, in one line.
pub fn within_tensor_limit([n, c, h, w]: [usize; 4]) -> Result<(), String> {
    let elems = [n, c, h, w]
        .into_iter()
        .try_fold(1u64, |a, v| a.checked_mul(v as u64));
    match elems {
        Some(e) if e <= MAX_TENSOR_ELEMENTS => Ok(()),
        _ => Err(format!(
            "a {n}x{c}x{h}x{w} tensor has {} elements; cuDNN takes at most 2^31-1 ({MAX_TENSOR_ELEMENTS}) per tensor",
            elems.map_or_else(|| "at least 2^64".to_string(), |e| e.to_string())
        )),
    }
}

pub struct TensorDesc(pub(crate) sys::cudnnTensorDescriptor_t);

impl TensorDesc {
    /// A dense 4-d tensor with logical dims N, C, H, W in `layout`.
    pub fn new(
        layout: Layout,
        d: DType,
        n: usize,
        c: usize,
        h: usize,
        w: usize,
    ) -> GpuResult<Self> {
        let call = "cudnnSetTensor4dDescriptor";
        within_tensor_limit([n, c, h, w]).map_err(|status| GpuError {
            call,
            status,
            oom: false,
        })?;
        let mut p = std::ptr::null_mut();
        // SAFETY: out-pointer to a local.
        check_cudnn("cudnnCreateTensorDescriptor", unsafe {
            sys::cudnnCreateTensorDescriptor(&mut p)
        })?;
        let desc = TensorDesc(p);
        let (n, c, h, w) = (
            to_int(call, n)?,
            to_int(call, c)?,
            to_int(call, h)?,
            to_int(call, w)?,
        );
        // SAFETY: valid descriptor.
        check_cudnn(call, unsafe {
            sys::cudnnSetTensor4dDescriptor(p, format(layout), data_type(d), n, c, h, w)
        })?;
        Ok(desc)
    }
}

impl TensorDesc {
    /// The per-channel descriptor cuDNN's batch norm wants for `x` (fp32
    /// for float and half data alike).
    pub fn derived_bn(x: &TensorDesc, mode: sys::cudnnBatchNormMode_t) -> GpuResult<Self> {
        let mut p = std::ptr::null_mut();
        // SAFETY: out-pointer to a local.
        check_cudnn("cudnnCreateTensorDescriptor", unsafe {
            sys::cudnnCreateTensorDescriptor(&mut p)
        })?;
        let desc = TensorDesc(p);
        // SAFETY: both descriptors are valid; `x` is set.
        check_cudnn("cudnnDeriveBNTensorDescriptor", unsafe {
            sys::cudnnDeriveBNTensorDescriptor(p, x.0, mode)
        })?;
        Ok(desc)
    }
}

impl Drop for TensorDesc {
    fn drop(&mut self) {
        // SAFETY: created above, destroyed once.
        unsafe {
            let _ = sys::cudnnDestroyTensorDescriptor(self.0);
        }
    }
}

pub struct FilterDesc(pub(crate) sys::cudnnFilterDescriptor_t);

impl FilterDesc {
    /// K output channels, C/g input channels per group, R x S taps.
    pub fn new(
        layout: Layout,
        d: DType,
        k: usize,
        c: usize,
        r: usize,
        s: usize,
    ) -> GpuResult<Self> {
        let mut p = std::ptr::null_mut();
        // SAFETY: out-pointer to a local.
        check_cudnn("cudnnCreateFilterDescriptor", unsafe {
            sys::cudnnCreateFilterDescriptor(&mut p)
        })?;
        let desc = FilterDesc(p);
        let call = "cudnnSetFilter4dDescriptor";
        let (k, c, r, s) = (
            to_int(call, k)?,
            to_int(call, c)?,
            to_int(call, r)?,
            to_int(call, s)?,
        );
        // SAFETY: valid descriptor.
        check_cudnn(call, unsafe {
            sys::cudnnSetFilter4dDescriptor(p, data_type(d), format(layout), k, c, r, s)
        })?;
        Ok(desc)
    }
}

impl Drop for FilterDesc {
    fn drop(&mut self) {
        // SAFETY: created above, destroyed once.
        unsafe {
            let _ = sys::cudnnDestroyFilterDescriptor(self.0);
        }
    }
}

pub struct ConvDesc(pub(crate) sys::cudnnConvolutionDescriptor_t);

/// Padding, stride and dilation (cuDNN's convention: 1 = dense) of a
/// cross-correlation with `groups` groups, accumulating in fp32.
pub struct ConvGeometry {
    pub pad: [usize; 2],
    pub stride: [usize; 2],
    pub dilation: [usize; 2],
    pub groups: usize,
}

impl ConvDesc {
    pub fn new(g: &ConvGeometry, math: u32) -> GpuResult<Self> {
        let mut p = std::ptr::null_mut();
        // SAFETY: out-pointer to a local.
        check_cudnn("cudnnCreateConvolutionDescriptor", unsafe {
            sys::cudnnCreateConvolutionDescriptor(&mut p)
        })?;
        let desc = ConvDesc(p);
        let call = "cudnnSetConvolution2dDescriptor";
        let i = |v| to_int(call, v);
        // SAFETY: valid descriptor.
        check_cudnn(call, unsafe {
            sys::cudnnSetConvolution2dDescriptor(
                p,
                i(g.pad[0])?,
                i(g.pad[1])?,
                i(g.stride[0])?,
                i(g.stride[1])?,
                i(g.dilation[0])?,
                i(g.dilation[1])?,
                sys::cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION,
                sys::cudnnDataType_t::CUDNN_DATA_FLOAT,
            )
        })?;
        let groups = to_int("cudnnSetConvolutionGroupCount", g.groups)?;
        // SAFETY: valid descriptor.
        check_cudnn("cudnnSetConvolutionGroupCount", unsafe {
            sys::cudnnSetConvolutionGroupCount(p, groups)
        })?;
        desc.set_math(math)?;
        Ok(desc)
    }

    pub fn set_math(&self, m: u32) -> GpuResult<()> {
        let Some(e) = math_enum(m) else {
            return Err(GpuError {
                call: "cudnnSetConvolutionMathType",
                status: format!("unknown math type {m}"),
                oom: false,
            });
        };
        // SAFETY: valid descriptor.
        check_cudnn("cudnnSetConvolutionMathType", unsafe {
            sys::cudnnSetConvolutionMathType(self.0, e)
        })
    }
}

impl Drop for ConvDesc {
    fn drop(&mut self) {
        // SAFETY: created above, destroyed once.
        unsafe {
            let _ = sys::cudnnDestroyConvolutionDescriptor(self.0);
        }
    }
}

/// One entry of a cuDNN algorithm query (`cudnnConvolution*AlgoPerf_t`,
/// whose three variants share this layout), with the enums as numbers.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RawAlgoPerf {
    pub algo: u32,
    pub status: u32,
    pub time: f32,
    pub memory: usize,
    pub determinism: u32,
    pub math_type: u32,
    pub reserved: [i32; 3],
}

/// A status returned as a plain number (by the entry points in
/// [`ConvFns`]), so that a code a newer cuDNN adds is reported, not
/// misread.
pub fn check_raw(call: &'static str, status: u32) -> GpuResult<()> {
    if status == 0 {
        return Ok(());
    }
    Err(GpuError {
        call,
        status: format!("cuDNN status {status} ({})", status_name(status)),
        oom: status_name(status) == "out of memory",
    })
}

/// `cudnnStatus_t` by number (cuDNN 9 groups its codes by thousands),
/// for the statuses inside perf results.
pub fn status_name(s: u32) -> String {
    match s {
        0 => "ok".into(),
        4003 | 4004 => "out of memory".into(),
        1000..=1999 => format!("library error ({s})"),
        2000..=2999 => format!("bad parameter ({s})"),
        3000..=3999 => "not supported".into(),
        4000..=4999 => format!("internal error ({s})"),
        5000..=5999 => format!("execution failed ({s})"),
        other => format!("status#{other}"),
    }
}

type FwdFn = unsafe extern "C" fn(
    sys::cudnnHandle_t,
    *const c_void,
    sys::cudnnTensorDescriptor_t,
    *const c_void,
    sys::cudnnFilterDescriptor_t,
    *const c_void,
    sys::cudnnConvolutionDescriptor_t,
    u32,
    *mut c_void,
    usize,
    *const c_void,
    sys::cudnnTensorDescriptor_t,
    *mut c_void,
) -> u32;
type BwdDataFn = unsafe extern "C" fn(
    sys::cudnnHandle_t,
    *const c_void,
    sys::cudnnFilterDescriptor_t,
    *const c_void,
    sys::cudnnTensorDescriptor_t,
    *const c_void,
    sys::cudnnConvolutionDescriptor_t,
    u32,
    *mut c_void,
    usize,
    *const c_void,
    sys::cudnnTensorDescriptor_t,
    *mut c_void,
) -> u32;
type BwdFilterFn = unsafe extern "C" fn(
    sys::cudnnHandle_t,
    *const c_void,
    sys::cudnnTensorDescriptor_t,
    *const c_void,
    sys::cudnnTensorDescriptor_t,
    *const c_void,
    sys::cudnnConvolutionDescriptor_t,
    u32,
    *mut c_void,
    usize,
    *const c_void,
    sys::cudnnFilterDescriptor_t,
    *mut c_void,
) -> u32;
type FwdWsFn = unsafe extern "C" fn(
    sys::cudnnHandle_t,
    sys::cudnnTensorDescriptor_t,
    sys::cudnnFilterDescriptor_t,
    sys::cudnnConvolutionDescriptor_t,
    sys::cudnnTensorDescriptor_t,
    u32,
    *mut usize,
) -> u32;
type BwdDataWsFn = unsafe extern "C" fn(
    sys::cudnnHandle_t,
    sys::cudnnFilterDescriptor_t,
    sys::cudnnTensorDescriptor_t,
    sys::cudnnConvolutionDescriptor_t,
    sys::cudnnTensorDescriptor_t,
    u32,
    *mut usize,
) -> u32;
type BwdFilterWsFn = unsafe extern "C" fn(
    sys::cudnnHandle_t,
    sys::cudnnTensorDescriptor_t,
    sys::cudnnTensorDescriptor_t,
    sys::cudnnConvolutionDescriptor_t,
    sys::cudnnFilterDescriptor_t,
    u32,
    *mut usize,
) -> u32;

/// The entry points that take an algorithm, declared with the algorithm
/// as a plain `u32` (the C ABI of an enum).
pub struct ConvFns {
    pub fwd: FwdFn,
    pub bwd_data: BwdDataFn,
    pub bwd_filter: BwdFilterFn,
    pub fwd_ws: FwdWsFn,
    pub bwd_data_ws: BwdDataWsFn,
    pub bwd_filter_ws: BwdFilterWsFn,
}

impl ConvFns {
    /// Looked up once in the loaded cuDNN.
    pub fn get() -> GpuResult<&'static ConvFns> {
        static FNS: OnceLock<Result<ConvFns, GpuError>> = OnceLock::new();
        FNS.get_or_init(|| {
            // SAFETY: the library was probed; each symbol is declared with
            // its C signature (enums as u32).
            unsafe {
                let sym = |name: &'static str| -> GpuResult<*const ()> {
                    sys::symbol(name).map_err(|status| GpuError {
                        call: name,
                        status,
                        oom: false,
                    })
                };
                Ok(ConvFns {
                    fwd: std::mem::transmute::<*const (), FwdFn>(sym("cudnnConvolutionForward")?),
                    bwd_data: std::mem::transmute::<*const (), BwdDataFn>(sym(
                        "cudnnConvolutionBackwardData",
                    )?),
                    bwd_filter: std::mem::transmute::<*const (), BwdFilterFn>(sym(
                        "cudnnConvolutionBackwardFilter",
                    )?),
                    fwd_ws: std::mem::transmute::<*const (), FwdWsFn>(sym(
                        "cudnnGetConvolutionForwardWorkspaceSize",
                    )?),
                    bwd_data_ws: std::mem::transmute::<*const (), BwdDataWsFn>(sym(
                        "cudnnGetConvolutionBackwardDataWorkspaceSize",
                    )?),
                    bwd_filter_ws: std::mem::transmute::<*const (), BwdFilterWsFn>(sym(
                        "cudnnGetConvolutionBackwardFilterWorkspaceSize",
                    )?),
                })
            }
        })
        .as_ref()
        .map_err(Clone::clone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tensor_limit_is_one_below_2_to_the_31() {
        assert!(within_tensor_limit([1, 1 << 30, 2, 1]).is_err());
        assert!(within_tensor_limit([1, i32::MAX as usize, 1, 1]).is_ok());
        let e = within_tensor_limit([1024, 64, 224, 224]).unwrap_err();
        assert_eq!(
            e,
            "a 1024x64x224x224 tensor has 3288334336 elements; \
             cuDNN takes at most 2^31-1 (2147483647) per tensor"
        );
        assert!(within_tensor_limit([usize::MAX, 2, 1, 1])
            .unwrap_err()
            .contains("at least 2^64"));
        assert!(within_tensor_limit([0, 1 << 40, 1, 1]).is_ok(), "empty");
    }

    #[test]
    fn versions_decode() {
        assert_eq!(version_string(91002), "9.10.2");
        assert_eq!(version_string(90100), "9.1.0");
        assert_eq!(version_string(8907), "8.9.7");
    }

    #[test]
    fn math_per_dtype() {
        assert_eq!(math_for(DType::F32), math::FMA);
        assert!(math_allowed(DType::F32, math::FMA));
        assert!(!math_allowed(DType::F32, math::TENSOR_OP));
        assert!(
            !math_allowed(DType::F32, math::DEFAULT),
            "default math may be TF32"
        );
        assert!(math_allowed(DType::F16, math::TENSOR_OP));
        assert!(!math_allowed(DType::Bf16, math::TENSOR_OP_ALLOW_CONVERSION));
        assert_eq!(math::name(7), "math#7");
        assert_eq!(math_enum(9), None);
    }

    #[test]
    fn perf_struct_matches_cudnn_layout() {
        assert_eq!(
            std::mem::size_of::<RawAlgoPerf>(),
            std::mem::size_of::<sys::cudnnConvolutionFwdAlgoPerf_t>()
        );
        assert_eq!(
            std::mem::size_of::<RawAlgoPerf>(),
            std::mem::size_of::<sys::cudnnConvolutionBwdFilterAlgoPerf_t>()
        );
        assert_eq!(std::mem::offset_of!(RawAlgoPerf, memory), 16);
    }

    #[test]
    fn perf_statuses_by_number() {
        assert_eq!(status_name(0), "ok");
        assert_eq!(status_name(2000), "bad parameter (2000)");
        assert_eq!(status_name(4004), "out of memory");
        assert_eq!(status_name(3007), "not supported");
        assert_eq!(status_name(4242), "internal error (4242)");
        assert_eq!(status_name(9999), "status#9999");
        assert!(check_raw("x", 0).is_ok());
        let e = check_raw("cudnnConvolutionForward", 3000).unwrap_err();
        assert_eq!(
            e.to_string(),
            "cudnnConvolutionForward failed: cuDNN status 3000 (not supported)"
        );
        assert!(check_raw("x", 4004).unwrap_err().oom);
    }
}
