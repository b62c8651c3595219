//! Softmax cross-entropy on cnnbench's NVRTC kernels: logits in the run's
//! dtype, probabilities and the loss in fp32 (the loss node's buffer is
//! fp32 whatever the dtype).

use crate::backend::cuda::backend::{Cuda, DevPtr, GpuCtx};
use crate::backend::cuda::{DeviceBuffer, Gpu, GpuResult};
use crate::core::backend::Layer;
use crate::core::DType;

/// A batch's labels as the kernels read them (u32, little-endian), once
/// checked against the batch and the classes (`cpu::set_labels`).
pub(crate) fn device_labels(labels: &[u32], batch: usize, classes: usize) -> GpuResult<Vec<u8>> {
    let mut held = vec![0u32; batch];
    super::cpu::set_labels(&mut held, labels, classes)?;
    Ok(held.iter().flat_map(|l| l.to_le_bytes()).collect())
}

pub struct SoftmaxXentGpuLayer {
    batch: usize,
    classes: usize,
    dtype: DType,
    labels: DeviceBuffer,
    probs: DeviceBuffer,
    row_loss: DeviceBuffer,
}

impl SoftmaxXentGpuLayer {
    pub fn new(gpu: &Gpu, classes: usize, labels: &[u32], dtype: DType) -> GpuResult<Self> {
        let s = &gpu.stream;
        let bytes: Vec<u8> = labels.iter().flat_map(|l| l.to_le_bytes()).collect();
        Ok(SoftmaxXentGpuLayer {
            batch: labels.len(),
            classes,
            dtype,
            labels: DeviceBuffer::from_bytes(s, &bytes)?,
            probs: DeviceBuffer::alloc(s, labels.len() * classes * 4)?,
            row_loss: DeviceBuffer::alloc(s, labels.len() * 4)?,
        })
    }
}

impl<'g> Layer<Cuda<'g>> for SoftmaxXentGpuLayer {
    fn forward(&mut self, cx: &mut GpuCtx<'g>, x: &[DevPtr], y: DevPtr) -> GpuResult<()> {
        // SAFETY: x holds batch×classes logits; y at least one f32.
        unsafe {
            cx.kernels.softmax_xent_fwd(
                &cx.gpu.stream,
                self.dtype.storage(),
                x[0],
                self.labels.ptr(),
                self.probs.ptr(),
                self.row_loss.ptr(),
                y,
                self.batch,
                self.classes,
            )
        }
    }

    fn backward(
        &mut self,
        cx: &mut GpuCtx<'g>,
        _x: &[DevPtr],
        _y: DevPtr,
        _dy: &[DevPtr],
        dx: &mut [Option<DevPtr>],
    ) -> GpuResult<()> {
        let Some(dx) = dx[0] else { return Ok(()) };
        // SAFETY: dx holds batch×classes elements of the dtype.
        unsafe {
            cx.kernels.softmax_xent_bwd(
                &cx.gpu.stream,
                self.dtype.storage(),
                self.probs.ptr(),
                self.labels.ptr(),
                dx,
                self.batch,
                self.classes,
            )
        }
    }

    fn scratch_bytes(&self) -> usize {
        self.probs.bytes() + self.row_loss.bytes() + self.labels.bytes()
    }

    /// Copies the labels in and waits (between steps, outside their
    /// timing).
    fn set_labels(&mut self, _cx: &mut GpuCtx<'g>, labels: &[u32]) -> GpuResult<bool> {
        self.labels
            .upload(&device_labels(labels, self.batch, self.classes)?)?;
        Ok(true)
    }

    fn kernels(&self) -> String {
        "nvrtc softmax_xent".into()
    }
}
