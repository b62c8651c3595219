//! Every CUDA, cuDNN and cuBLAS status becomes a [`GpuError`] naming the
//! call that returned it.

use cudarc::cublas::sys::cublasStatus_t;
use cudarc::cudnn::sys::cudnnStatus_t;
use cudarc::driver::sys::CUresult;

/// The one error type of both backends (see [`crate::core::error`]).
pub use crate::core::error::Error as GpuError;
pub type GpuResult<T> = Result<T, GpuError>;

pub fn check_driver(call: &'static str, r: CUresult) -> GpuResult<()> {
    match r {
        CUresult::CUDA_SUCCESS => Ok(()),
        other => Err(GpuError {
            call,
            status: format!("{other:?}"),
            oom: other == CUresult::CUDA_ERROR_OUT_OF_MEMORY,
        }),
    }
}

pub fn check_cudnn(call: &'static str, s: cudnnStatus_t) -> GpuResult<()> {
    match s {
        cudnnStatus_t::CUDNN_STATUS_SUCCESS => Ok(()),
        other => Err(GpuError {
            call,
            status: format!("{other:?}"),
            oom: matches!(
                other,
                cudnnStatus_t::CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED
                    | cudnnStatus_t::CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED
            ),
        }),
    }
}

pub fn check_cublas(call: &'static str, s: cublasStatus_t) -> GpuResult<()> {
    match s {
        cublasStatus_t::CUBLAS_STATUS_SUCCESS => Ok(()),
        other => Err(GpuError {
            call,
            status: format!("{other:?}"),
            oom: other == cublasStatus_t::CUBLAS_STATUS_ALLOC_FAILED,
        }),
    }
}

/// Wraps a cudarc driver error (from its `result` layer) with the call name.
pub fn driver(call: &'static str, e: cudarc::driver::DriverError) -> GpuError {
    GpuError {
        call,
        status: format!("{:?}", e.0),
        oom: e.0 == CUresult::CUDA_ERROR_OUT_OF_MEMORY,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_call_and_the_status() {
        let e = check_cudnn(
            "cudnnConvolutionForward",
            cudnnStatus_t::CUDNN_STATUS_NOT_SUPPORTED,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "cudnnConvolutionForward failed: CUDNN_STATUS_NOT_SUPPORTED"
        );
        assert!(!e.oom);
        assert!(
            check_driver("cuMemAlloc", CUresult::CUDA_ERROR_OUT_OF_MEMORY)
                .unwrap_err()
                .oom
        );
        assert!(
            check_cublas("cublasGemmEx", cublasStatus_t::CUBLAS_STATUS_ALLOC_FAILED)
                .unwrap_err()
                .oom
        );
        assert!(check_cudnn("x", cudnnStatus_t::CUDNN_STATUS_SUCCESS).is_ok());
    }
}
