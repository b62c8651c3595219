//! RAII descriptors for the cuDNN ops a network needs besides convolution
//! (activation, pooling, LRN, op-tensor), and the choices made for them
//! (batch-norm mode, pooling mode), kept apart from the calls so that the
//! choices are testable without a GPU.

use super::error::{check_cudnn, GpuError, GpuResult};
use crate::backend::cuda::loader::cudnn_sys as sys;
use crate::core::Layout;

/// `1.0` and `0.0` as cuDNN's alpha/beta pointers (floats, for float, half
/// and bfloat16 data alike).
pub struct Scalars {
    one: f32,
    zero: f32,
}

pub const SCALARS: Scalars = Scalars {
    one: 1.0,
    zero: 0.0,
};

impl Scalars {
    pub fn one(&self) -> *const std::ffi::c_void {
        &self.one as *const f32 as *const std::ffi::c_void
    }
    pub fn zero(&self) -> *const std::ffi::c_void {
        &self.zero as *const f32 as *const std::ffi::c_void
    }
}

macro_rules! descriptor {
    ($name:ident, $raw:ty, $create:ident, $destroy:ident) => {
        pub struct $name(pub(crate) $raw);

        impl $name {
            fn create() -> GpuResult<$name> {
                let mut p = std::ptr::null_mut();
                // SAFETY: out-pointer to a local.
                check_cudnn(stringify!($create), unsafe { sys::$create(&mut p) })?;
                Ok($name(p))
            }
        }

        impl Drop for $name {
            fn drop(&mut self) {
                // SAFETY: created by `create`, destroyed once.
                unsafe {
                    let _ = sys::$destroy(self.0);
                }
            }
        }
    };
}

descriptor!(
    ActivationDesc,
    sys::cudnnActivationDescriptor_t,
    cudnnCreateActivationDescriptor,
    cudnnDestroyActivationDescriptor
);
descriptor!(
    PoolingDesc,
    sys::cudnnPoolingDescriptor_t,
    cudnnCreatePoolingDescriptor,
    cudnnDestroyPoolingDescriptor
);
descriptor!(
    LrnDesc,
    sys::cudnnLRNDescriptor_t,
    cudnnCreateLRNDescriptor,
    cudnnDestroyLRNDescriptor
);
descriptor!(
    OpTensorDesc,
    sys::cudnnOpTensorDescriptor_t,
    cudnnCreateOpTensorDescriptor,
    cudnnDestroyOpTensorDescriptor
);

impl ActivationDesc {
    /// ReLU; a NaN input stays NaN (as on the CPU).
    pub fn relu() -> GpuResult<ActivationDesc> {
        let d = ActivationDesc::create()?;
        // SAFETY: valid descriptor.
        check_cudnn("cudnnSetActivationDescriptor", unsafe {
            sys::cudnnSetActivationDescriptor(
                d.0,
                sys::cudnnActivationMode_t::CUDNN_ACTIVATION_RELU,
                sys::cudnnNanPropagation_t::CUDNN_PROPAGATE_NAN,
                0.0,
            )
        })?;
        Ok(d)
    }
}

/// Which pooling cuDNN runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolMode {
    Max,
    AvgCountPad,
    AvgExcludePad,
}

impl PoolMode {
    pub fn new(max: bool, count_pad: bool) -> PoolMode {
        match (max, count_pad) {
            (true, _) => PoolMode::Max,
            (false, true) => PoolMode::AvgCountPad,
            (false, false) => PoolMode::AvgExcludePad,
        }
    }

    fn raw(self) -> sys::cudnnPoolingMode_t {
        match self {
            // The deterministic max: its backward gives each output's
            // gradient to one input, like the CPU kernel.
            PoolMode::Max => sys::cudnnPoolingMode_t::CUDNN_POOLING_MAX_DETERMINISTIC,
            PoolMode::AvgCountPad => {
                sys::cudnnPoolingMode_t::CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
            }
            PoolMode::AvgExcludePad => {
                sys::cudnnPoolingMode_t::CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING
            }
        }
    }
}

/// cuDNN sizes pooling outputs by rounding down; ceil-mode layers whose
/// output is one larger run on cnnbench's own kernel instead.
pub fn cudnn_pool_size(input: usize, k: usize, s: usize, p: usize) -> usize {
    (input + 2 * p).saturating_sub(k) / s + 1
}

impl PoolingDesc {
    /// A `kh x kw` window with stride and symmetric padding.
    pub fn new(mode: PoolMode, k: [usize; 2], s: [usize; 2], p: [usize; 2]) -> GpuResult<Self> {
        let d = PoolingDesc::create()?;
        let call = "cudnnSetPooling2dDescriptor";
        let i = |v: usize| to_int(call, v);
        // SAFETY: valid descriptor.
        check_cudnn(call, unsafe {
            sys::cudnnSetPooling2dDescriptor(
                d.0,
                mode.raw(),
                sys::cudnnNanPropagation_t::CUDNN_PROPAGATE_NAN,
                i(k[0])?,
                i(k[1])?,
                i(p[0])?,
                i(p[1])?,
                i(s[0])?,
                i(s[1])?,
            )
        })?;
        Ok(d)
    }
}

/// cuDNN's limits on LRN (`CUDNN_LRN_MIN_N` .. `MAX_N`, `MIN_K`,
/// `MIN_BETA`): a layer outside them is refused with a one-line reason.
pub fn lrn_supported(size: usize, beta: f32, k: f32) -> Result<(), String> {
    if !(1..=16).contains(&size) {
        return Err(format!("cuDNN LRN needs a size of 1 to 16, not {size}"));
    }
    if k < 1e-5 {
        return Err(format!("cuDNN LRN needs k >= 1e-5, not {k}"));
    }
    if beta < 0.01 {
        return Err(format!("cuDNN LRN needs beta >= 0.01, not {beta}"));
    }
    Ok(())
}

impl LrnDesc {
    /// Cross-channel LRN, `y = x / (k + alpha/size · Σ x²)^beta` (cuDNN
    /// divides alpha by the size, as Caffe and PyTorch do).
    pub fn new(size: usize, alpha: f32, beta: f32, k: f32) -> GpuResult<LrnDesc> {
        lrn_supported(size, beta, k).map_err(|status| GpuError {
            call: "cudnnSetLRNDescriptor",
            status,
            oom: false,
        })?;
        let d = LrnDesc::create()?;
        // SAFETY: valid descriptor.
        check_cudnn("cudnnSetLRNDescriptor", unsafe {
            sys::cudnnSetLRNDescriptor(d.0, size as u32, alpha as f64, beta as f64, k as f64)
        })?;
        Ok(d)
    }
}

impl OpTensorDesc {
    /// Elementwise add, computed in fp32 whatever the storage.
    pub fn add() -> GpuResult<OpTensorDesc> {
        let d = OpTensorDesc::create()?;
        // SAFETY: valid descriptor.
        check_cudnn("cudnnSetOpTensorDescriptor", unsafe {
            sys::cudnnSetOpTensorDescriptor(
                d.0,
                sys::cudnnOpTensorOp_t::CUDNN_OP_TENSOR_ADD,
                sys::cudnnDataType_t::CUDNN_DATA_FLOAT,
                sys::cudnnNanPropagation_t::CUDNN_PROPAGATE_NAN,
            )
        })?;
        Ok(d)
    }
}

/// Batch norm over N·H·W per channel. Channels-last data uses cuDNN's
/// persistent kernels (PyTorch's choice in training with channels_last);
/// NCHW the plain ones.
pub fn bn_mode(layout: Layout) -> sys::cudnnBatchNormMode_t {
    match layout {
        Layout::Nhwc => sys::cudnnBatchNormMode_t::CUDNN_BATCHNORM_SPATIAL_PERSISTENT,
        Layout::Nchw => sys::cudnnBatchNormMode_t::CUDNN_BATCHNORM_SPATIAL,
    }
}

/// The layer's epsilon as cuDNN takes it (cuDNN 9's
/// `CUDNN_BN_MIN_EPSILON` is 0, so nothing is clamped).
pub fn bn_epsilon(eps: f32) -> f64 {
    eps as f64
}

fn to_int(call: &'static str, v: usize) -> GpuResult<i32> {
    i32::try_from(v).map_err(|_| GpuError {
        call,
        status: format!("{v} does not fit in a C int"),
        oom: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_modes_and_floor_sizes() {
        assert_eq!(PoolMode::new(true, true), PoolMode::Max);
        assert_eq!(PoolMode::new(false, true), PoolMode::AvgCountPad);
        assert_eq!(PoolMode::new(false, false), PoolMode::AvgExcludePad);
        // ResNet's stem pool: 112 -> 56 (3x3/2, pad 1), same either way.
        assert_eq!(cudnn_pool_size(112, 3, 2, 1), 56);
        // GoogLeNet's ceil-mode 3x3/2 on 112 gives 56; cuDNN would give 55.
        assert_eq!(cudnn_pool_size(112, 3, 2, 0), 55);
    }

    #[test]
    fn lrn_limits_name_the_reason() {
        assert!(lrn_supported(5, 0.75, 1.0).is_ok());
        assert!(lrn_supported(17, 0.75, 1.0)
            .unwrap_err()
            .contains("1 to 16"));
        assert!(lrn_supported(5, 0.75, 0.0).unwrap_err().contains("k >="));
        assert!(lrn_supported(5, 0.0, 1.0).unwrap_err().contains("beta"));
    }

    #[test]
    fn batchnorm_choices() {
        assert_eq!(
            bn_mode(Layout::Nhwc),
            sys::cudnnBatchNormMode_t::CUDNN_BATCHNORM_SPATIAL_PERSISTENT
        );
        assert_eq!(bn_epsilon(1e-3), 1e-3f32 as f64);
        assert_eq!(bn_epsilon(1e-7), 1e-7f32 as f64);
    }
}
