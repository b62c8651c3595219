//! The next batch's images on their way to the GPU while the current step
//! runs: converted on the host straight into pinned memory, copied by a
//! stream of their own into a device buffer of their own, and moved into
//! the network's input buffer (a device-to-device copy, in the compute
//! stream's order) when the next step begins.
//!
//! Two events keep the three parties apart: `copied` (the host-to-device
//! copy out of the pinned memory has finished: the host may rewrite it,
//! the compute stream may read the staging buffer) and `consumed` (the
//! compute stream has read the staging buffer: the copy stream may
//! overwrite it). An event never recorded counts as passed, in CUDA's
//! waits and synchronizations alike.

use super::error::{driver, GpuResult};
use super::DeviceBuffer;
use crate::core::backend::BatchDims;
use crate::core::encode::encode_nhwc_into;
use crate::core::{DType, Layout};
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{result, CudaEvent, CudaStream};
use std::sync::Arc;

/// Page-locked host memory, freed on drop once its stream's copies are done.
struct Pinned {
    ptr: *mut u8,
    bytes: usize,
    /// The stream that copies out of it.
    stream: Arc<CudaStream>,
}

impl Pinned {
    fn alloc(stream: &Arc<CudaStream>, bytes: usize) -> GpuResult<Pinned> {
        stream
            .context()
            .bind_to_thread()
            .map_err(|e| driver("cuCtxSetCurrent", e))?;
        // SAFETY: a plain allocation (at least one byte, so the pointer is
        // valid), freed once in Drop; its bytes are written before any read.
        let ptr = unsafe { result::malloc_host(bytes.max(1), 0) }
            .map_err(|e| driver("cuMemHostAlloc", e))?;
        Ok(Pinned {
            ptr: ptr.cast(),
            bytes,
            stream: stream.clone(),
        })
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: the allocation holds `bytes`, and `&mut self` is the only
        // way to it from the host.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.bytes) }
    }

    fn as_slice(&self) -> &[u8] {
        // SAFETY: as in `as_mut_slice`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.bytes) }
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        // A copy still reading the memory must end before it is freed;
        // errors here cannot be reported and would only leak it.
        let _ = self.stream.synchronize();
        // SAFETY: allocated by `malloc_host`, freed once.
        unsafe {
            let _ = result::free_host(self.ptr.cast());
        }
    }
}

// SAFETY: the pointer is owned like a Box<[u8]>; nothing else aliases it.
unsafe impl Send for Pinned {}

/// One batch's worth of staging: pinned host bytes, a device buffer, the
/// copy stream and its two events.
pub struct InputStage {
    // Fields drop in order: the pinned memory (after the copy stream's
    // work ends) before the staging buffer (after the compute stream's).
    pinned: Pinned,
    device: DeviceBuffer,
    copy: Arc<CudaStream>,
    copied: CudaEvent,
    consumed: CudaEvent,
    layout: Layout,
    dtype: DType,
    dims: BatchDims,
}

impl InputStage {
    /// A stage for batches of `dims` stored as `layout` and `dtype`; the
    /// compute stream is `compute`.
    pub fn new(
        compute: &Arc<CudaStream>,
        dims: BatchDims,
        layout: Layout,
        dtype: DType,
    ) -> GpuResult<InputStage> {
        let bytes = dims.len() * dtype.size_bytes();
        let ctx = compute.context();
        let copy = ctx.new_stream().map_err(|e| driver("cuStreamCreate", e))?;
        let event = || {
            ctx.new_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))
                .map_err(|e| driver("cuEventCreate", e))
        };
        Ok(InputStage {
            pinned: Pinned::alloc(&copy, bytes)?,
            device: DeviceBuffer::alloc(compute, bytes)?,
            copied: event()?,
            consumed: event()?,
            copy,
            layout,
            dtype,
            dims,
        })
    }

    /// The staging buffer's bytes on the device.
    pub fn device_bytes(&self) -> usize {
        self.device.bytes()
    }

    /// Converts `host` (NHWC f32) into the pinned memory and starts its
    /// copy to the staging buffer; returns without waiting for it.
    pub fn stage(&mut self, host: &[f32]) -> GpuResult<()> {
        // The previous copy out of the pinned memory must be over before
        // the host rewrites it (it normally ended during the last step).
        self.copied
            .synchronize()
            .map_err(|e| driver("cuEventSynchronize", e))?;
        encode_nhwc_into(
            self.layout,
            self.dtype,
            host,
            self.dims,
            self.pinned.as_mut_slice(),
        );
        // The compute stream must have read the staging buffer's last batch
        // before this copy overwrites it.
        self.copy
            .wait(&self.consumed)
            .map_err(|e| driver("cuStreamWaitEvent", e))?;
        if self.pinned.bytes > 0 {
            // SAFETY: the staging buffer holds `bytes`; the pinned memory is
            // not written again before `copied` has passed (above), nor
            // freed before the copy stream is done (Pinned's Drop).
            unsafe {
                result::memcpy_htod_async(
                    self.device.ptr(),
                    self.pinned.as_slice(),
                    self.copy.cu_stream(),
                )
                .map_err(|e| driver("cuMemcpyHtoDAsync", e))?;
            }
        }
        self.copied
            .record(&self.copy)
            .map_err(|e| driver("cuEventRecord", e))
    }

    /// Moves the staged batch into `buf` in the compute stream's order and
    /// waits until it is there, so that a copy the last step did not hide
    /// is the caller's to time.
    pub fn unstage(&mut self, buf: &mut DeviceBuffer) -> GpuResult<()> {
        let compute = self.device.stream().clone();
        compute
            .wait(&self.copied)
            .map_err(|e| driver("cuStreamWaitEvent", e))?;
        buf.copy_from(&self.device)?;
        self.consumed
            .record(&compute)
            .map_err(|e| driver("cuEventRecord", e))?;
        compute
            .synchronize()
            .map_err(|e| driver("cuStreamSynchronize", e))
    }
}
