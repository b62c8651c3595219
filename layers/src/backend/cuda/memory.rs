//! Device memory we own: one allocation, freed on drop. Copies go through
//! the benchmark's stream and wait for it, so they never race the
//! non-blocking stream's kernels.

use super::error::{driver, GpuResult};
use cudarc::driver::{result, sys, CudaStream};
use std::sync::Arc;

pub struct DeviceBuffer {
    ptr: sys::CUdeviceptr,
    bytes: usize,
    stream: Arc<CudaStream>,
}

impl DeviceBuffer {
    /// `bytes` of uninitialised device memory (at least one byte is
    /// allocated, so that the pointer is always valid).
    pub fn alloc(stream: &Arc<CudaStream>, bytes: usize) -> GpuResult<DeviceBuffer> {
        stream
            .context()
            .bind_to_thread()
            .map_err(|e| driver("cuCtxSetCurrent", e))?;
        // SAFETY: plain allocation; freed once in Drop.
        let ptr =
            unsafe { result::malloc_sync(bytes.max(1)) }.map_err(|e| driver("cuMemAlloc", e))?;
        Ok(DeviceBuffer {
            ptr,
            bytes,
            stream: stream.clone(),
        })
    }

    /// A buffer holding `data`.
    pub fn from_bytes(stream: &Arc<CudaStream>, data: &[u8]) -> GpuResult<DeviceBuffer> {
        let mut b = DeviceBuffer::alloc(stream, data.len())?;
        b.upload(data)?;
        Ok(b)
    }

    pub fn ptr(&self) -> sys::CUdeviceptr {
        self.ptr
    }

    pub fn as_void(&self) -> *mut std::ffi::c_void {
        self.ptr as *mut std::ffi::c_void
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The stream the buffer's copies are ordered by.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Copies `data` (exactly `bytes()` long) in and waits.
    pub fn upload(&mut self, data: &[u8]) -> GpuResult<()> {
        assert_eq!(data.len(), self.bytes, "upload size");
        if data.is_empty() {
            return Ok(());
        }
        // SAFETY: the allocation holds `bytes`; we wait before returning,
        // so `data` outlives the copy.
        unsafe {
            result::memcpy_htod_async(self.ptr, data, self.stream.cu_stream())
                .map_err(|e| driver("cuMemcpyHtoDAsync", e))?;
        }
        self.stream
            .synchronize()
            .map_err(|e| driver("cuStreamSynchronize", e))
    }

    /// Waits for the stream, then copies the whole buffer out.
    pub fn download(&self) -> GpuResult<Vec<u8>> {
        let mut out = vec![0u8; self.bytes];
        if self.bytes == 0 {
            return Ok(out);
        }
        // SAFETY: as in `upload`.
        unsafe {
            result::memcpy_dtoh_async(&mut out[..], self.ptr, self.stream.cu_stream())
                .map_err(|e| driver("cuMemcpyDtoHAsync", e))?;
        }
        self.stream
            .synchronize()
            .map_err(|e| driver("cuStreamSynchronize", e))?;
        Ok(out)
    }

    /// Sets every byte to `byte` (0xFF is NaN in f32, f16 and bf16), in
    /// stream order.
    pub fn fill_bytes(&mut self, byte: u8) -> GpuResult<()> {
        // SAFETY: within the allocation.
        unsafe {
            result::memset_d8_async(self.ptr, byte, self.bytes, self.stream.cu_stream())
                .map_err(|e| driver("cuMemsetD8Async", e))
        }
    }

    /// Copies all of `src` (same size) in stream order.
    pub fn copy_from(&mut self, src: &DeviceBuffer) -> GpuResult<()> {
        assert_eq!(src.bytes, self.bytes, "copy size");
        // SAFETY: both allocations hold `bytes`.
        unsafe {
            result::memcpy_dtod_async(self.ptr, src.ptr, self.bytes, self.stream.cu_stream())
                .map_err(|e| driver("cuMemcpyDtoDAsync", e))
        }
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // Work queued on the buffer must finish before it is freed; errors
        // here cannot be reported and would only leak the memory.
        let _ = self.stream.synchronize();
        // SAFETY: allocated by `malloc_sync`, freed once.
        unsafe {
            let _ = result::free_sync(self.ptr);
        }
    }
}

/// Workspace as cuDNN takes it.
#[derive(Clone, Copy, Debug)]
pub struct Workspace {
    pub ptr: *mut std::ffi::c_void,
    pub bytes: usize,
}

impl Workspace {
    pub const NONE: Workspace = Workspace {
        ptr: std::ptr::null_mut(),
        bytes: 0,
    };
}
