//! Sigmoid with binary cross-entropy on cnnbench's NVRTC kernels
//! (`sigmoid_bce.cu`), as the softmax loss's CUDA side: logits in the
//! run's dtype, the loss in f32 (the loss node's buffer is f32 whatever
//! the dtype), labels (0 or 1) on the device.

use crate::backend::cuda::backend::{Cuda, DevPtr, GpuCtx};
use crate::backend::cuda::{DeviceBuffer, Gpu, GpuResult};
use crate::core::backend::Layer;
use crate::core::DType;
use crate::ops::loss::cuda::device_labels;
use crate::ops::spec::NodeCx;

/// A label takes two values.
const CLASSES: usize = 2;

/// The loss layer for the node `cx` on `b`.
pub fn layer<'g>(cx: &NodeCx, b: &Cuda<'g>) -> GpuResult<Option<Box<dyn Layer<Cuda<'g>>>>> {
    let l = SigmoidBceGpuLayer::new(b.gpu, cx.labels, b.dtype)?;
    Ok(Some(Box::new(l)))
}

pub struct SigmoidBceGpuLayer {
    batch: usize,
    dtype: DType,
    labels: DeviceBuffer,
}

impl SigmoidBceGpuLayer {
    /// One label (0 or 1) per image of the batch.
    pub fn new(gpu: &Gpu, labels: &[u32], dtype: DType) -> GpuResult<Self> {
        let bytes = device_labels(labels, labels.len(), CLASSES)?;
        Ok(SigmoidBceGpuLayer {
            batch: labels.len(),
            dtype,
            labels: DeviceBuffer::from_bytes(&gpu.stream, &bytes)?,
        })
    }
}

impl<'g> Layer<Cuda<'g>> for SigmoidBceGpuLayer {
    fn forward(&mut self, cx: &mut GpuCtx<'g>, x: &[DevPtr], y: DevPtr) -> GpuResult<()> {
        // SAFETY: x holds one logit per image in the dtype; y at least one
        // f32; the labels one u32 per image.
        unsafe {
            cx.kernels.sigmoid_bce_fwd(
                &cx.gpu.stream,
                self.dtype.storage(),
                x[0],
                self.labels.ptr(),
                y,
                self.batch,
            )
        }
    }

    /// The loss is the network's output: its gradient is 1, whatever `dy`.
    fn backward(
        &mut self,
        cx: &mut GpuCtx<'g>,
        x: &[DevPtr],
        _y: DevPtr,
        _dy: &[DevPtr],
        dx: &mut [Option<DevPtr>],
    ) -> GpuResult<()> {
        let Some(dx) = dx[0] else { return Ok(()) };
        // SAFETY: x and dx hold one element of the dtype per image.
        unsafe {
            cx.kernels.sigmoid_bce_bwd(
                &cx.gpu.stream,
                self.dtype.storage(),
                x[0],
                self.labels.ptr(),
                dx,
                self.batch,
            )
        }
    }

    fn scratch_bytes(&self) -> usize {
        self.labels.bytes()
    }

    /// Checks the labels (0 or 1, one per image), copies them in and
    /// waits (between steps, outside their timing).
    fn set_labels(&mut self, _cx: &mut GpuCtx<'g>, labels: &[u32]) -> GpuResult<bool> {
        self.labels
            .upload(&device_labels(labels, self.batch, CLASSES)?)?;
        Ok(true)
    }

    fn kernels(&self) -> String {
        "nvrtc sigmoid_bce".into()
    }
}
