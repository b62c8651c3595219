//! cuBLAS through its C API: a handle on the benchmark's stream, and
//! GemmEx with the compute type each dtype asks for.

use super::error::{check_cublas, GpuError, GpuResult};
use crate::backend::cuda::loader::cublas_sys::{
    self as sys, cublasComputeType_t, cublasOperation_t, cudaDataType,
};
use crate::core::DType;
use std::ffi::c_void;

pub struct CublasHandle(sys::cublasHandle_t);

impl CublasHandle {
    /// A handle whose work goes to `stream`.
    pub fn new(stream: &std::sync::Arc<cudarc::driver::CudaStream>) -> GpuResult<CublasHandle> {
        let mut h = std::ptr::null_mut();
        // SAFETY: out-pointer to a local.
        check_cublas("cublasCreate_v2", unsafe { sys::cublasCreate_v2(&mut h) })?;
        let handle = CublasHandle(h);
        // SAFETY: valid handle and stream.
        check_cublas("cublasSetStream_v2", unsafe {
            sys::cublasSetStream_v2(h, stream.cu_stream() as sys::cudaStream_t)
        })?;
        Ok(handle)
    }

    /// Makes cuBLAS use `bytes` at `ptr` as its workspace from now on, so
    /// that a captured CUDA graph's GEMMs use memory the caller owns and
    /// keeps alive while the graph exists (cuBLAS's advice for graph
    /// capture); [`CublasHandle::default_workspace`] undoes it.
    ///
    /// # Safety
    /// `ptr` must hold `bytes` of device memory (256-byte aligned) that
    /// outlives every cuBLAS call until the workspace is reset.
    pub unsafe fn set_workspace(&self, ptr: *mut c_void, bytes: usize) -> GpuResult<()> {
        check_cublas("cublasSetWorkspace_v2", unsafe {
            sys::cublasSetWorkspace_v2(self.0, ptr, bytes)
        })
    }

    /// Back to cuBLAS's own workspace pool: setting the stream again resets
    /// it (cuBLAS's documented behaviour of `cublasSetStream`).
    pub fn default_workspace(
        &self,
        stream: &std::sync::Arc<cudarc::driver::CudaStream>,
    ) -> GpuResult<()> {
        // SAFETY: valid handle and stream.
        check_cublas("cublasSetStream_v2", unsafe {
            sys::cublasSetStream_v2(self.0, stream.cu_stream() as sys::cudaStream_t)
        })
    }

    /// The loaded cuBLAS's version, e.g. `13.0.0`.
    pub fn version(&self) -> GpuResult<String> {
        let mut v = 0;
        // SAFETY: valid handle, out-pointer to a local.
        check_cublas("cublasGetVersion_v2", unsafe {
            sys::cublasGetVersion_v2(self.0, &mut v)
        })?;
        // 130001 = 13.0.1 (major·10000 + minor·100 + patch).
        Ok(format!("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100))
    }

    /// Row-major C[m×n] = op(A)·op(B), where op(A) is m×k and op(B) is k×n
    /// and `trans_*` means the stored matrix is the transpose. cuBLAS is
    /// column-major, so this computes Cᵀ = op(B)ᵀ·op(A)ᵀ.
    ///
    /// # Safety
    /// `a`, `b`, `c` must be device buffers of `d`'s storage holding m·k,
    /// k·n and m·n elements.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn gemm(
        &self,
        d: DType,
        [m, n, k]: [usize; 3],
        [trans_a, trans_b]: [bool; 2],
        a: *const c_void,
        b: *const c_void,
        c: *mut c_void,
    ) -> GpuResult<()> {
        if !gemm_fits([m, n, k]) {
            return Err(GpuError {
                call: "cublasGemmEx",
                status: format!("dimensions {m}x{n}x{k} do not fit in a C int"),
                oom: false,
            });
        }
        let (dt, compute) = gemm_types(d);
        let op = |t: bool| {
            if t {
                cublasOperation_t::CUBLAS_OP_T
            } else {
                cublasOperation_t::CUBLAS_OP_N
            }
        };
        // In range: checked by `gemm_fits` above.
        let dim = |v: usize| v as i32;
        // Leading dimensions of the row-major matrices as stored.
        let lda = if trans_a { m } else { k };
        let ldb = if trans_b { k } else { n };
        let (alpha, beta) = (1f32, 0f32);
        check_cublas(
            "cublasGemmEx",
            sys::cublasGemmEx(
                self.0,
                op(trans_b),
                op(trans_a),
                dim(n),
                dim(m),
                dim(k),
                &alpha as *const f32 as *const c_void,
                b,
                dt,
                dim(ldb),
                a,
                dt,
                dim(lda),
                &beta as *const f32 as *const c_void,
                c,
                dt,
                dim(n),
                compute,
                sys::cublasGemmAlgo_t::CUBLAS_GEMM_DFALT,
            ),
        )
    }
}

/// Storage type and compute type per dtype: fp32 accumulation always;
/// tensor cores for tf32 (`FAST_TF32`) and the half types. Plain
/// `COMPUTE_32F` under the handle's default math mode never uses TF32.
pub fn gemm_types(d: DType) -> (cudaDataType, cublasComputeType_t) {
    match d {
        DType::F32 => (
            cudaDataType::CUDA_R_32F,
            cublasComputeType_t::CUBLAS_COMPUTE_32F,
        ),
        DType::Tf32 => (
            cudaDataType::CUDA_R_32F,
            cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
        ),
        DType::F16 => (
            cudaDataType::CUDA_R_16F,
            cublasComputeType_t::CUBLAS_COMPUTE_32F,
        ),
        DType::Bf16 => (
            cudaDataType::CUDA_R_16BF,
            cublasComputeType_t::CUBLAS_COMPUTE_32F,
        ),
    }
}

/// GemmEx's GEMM dimensions fit in a C int.
pub fn gemm_fits(mnk: [usize; 3]) -> bool {
    mnk.iter().all(|&v| v >= 1 && v <= i32::MAX as usize)
}

impl Drop for CublasHandle {
    fn drop(&mut self) {
        // SAFETY: created by cublasCreate_v2, destroyed once.
        unsafe {
            let _ = sys::cublasDestroy_v2(self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compute_types_per_dtype() {
        assert_eq!(
            gemm_types(DType::F32).1,
            cublasComputeType_t::CUBLAS_COMPUTE_32F
        );
        assert_eq!(
            gemm_types(DType::Tf32).1,
            cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32
        );
        assert_eq!(gemm_types(DType::Bf16).0, cudaDataType::CUDA_R_16BF);
        assert_eq!(
            gemm_types(DType::F16).1,
            cublasComputeType_t::CUBLAS_COMPUTE_32F
        );
        assert!(gemm_fits([1, 2, 3]));
        assert!(!gemm_fits([0, 2, 3]));
        assert!(!gemm_fits([1 << 31, 2, 3]));
    }
}
