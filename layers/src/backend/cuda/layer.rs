//! The interface between the GPU executor ([`super::gpu::GpuNet`]) and
//! each op's CUDA side, and the parameters the GPU keeps.
//!
//! Tensors cross it as raw device pointers: the executor owns every buffer
//! and sizes it from the graph, and a layer only enqueues work on the
//! benchmark stream. Parameters are fp32 master copies with fp32 gradients
//! and momentum; an f16/bf16 run keeps a half copy of each convolution and
//! fully connected weight for the layer to compute with, refreshed after
//! every update, and casts the layer's half gradient back to fp32.

use crate::backend::cuda::memory::Workspace;
use crate::backend::cuda::nvrtc::Kernels;
use crate::backend::cuda::{DeviceBuffer, Gpu, GpuResult};
use crate::core::dtype::Storage;
use crate::core::{DType, Layout};
use cnnbench_kernels::conv::ConvShape;
use cudarc::driver::sys::CUdeviceptr;
use std::ffi::c_void;

pub type DevPtr = CUdeviceptr;

pub fn void(p: DevPtr) -> *mut c_void {
    p as *mut c_void
}

/// What every layer may consult while it runs.
pub struct GpuCtx<'g> {
    pub gpu: &'g Gpu,
    pub kernels: &'g Kernels,
    pub dtype: DType,
    pub layout: Layout,
    /// Changes every training step (dropout draws a new mask).
    pub step_seed: u64,
    /// The convolutions' shared workspace.
    pub workspace: Workspace,
}

impl GpuCtx<'_> {
    pub fn cudnn(&self) -> cudarc::cudnn::sys::cudnnHandle_t {
        self.gpu.cudnn.0
    }
}

/// How a parameter's host values (the CPU layers' order) map to the
/// device's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostOrder {
    /// The same order (biases, batch-norm scale and shift).
    Plain,
    /// A convolution filter: gHWIO on the host, the layout's cuDNN filter
    /// on the device.
    Filter(ConvShape, Layout),
    /// A fully connected weight `[in][out]` reading a flattened `h x w x c`
    /// tensor: its rows follow the flattening order, `(h, w, c)` on the
    /// host and `(c, h, w)` on an NCHW device.
    LinearRows { h: usize, w: usize, c: usize },
}

impl HostOrder {
    pub fn to_device(self, host: &[f32]) -> Vec<f32> {
        match self {
            HostOrder::Plain => host.to_vec(),
            HostOrder::Filter(p, l) => l.filter_from_ghwio(host, &p),
            HostOrder::LinearRows { h, w, c } => permute_rows(host, [h, w, c], false),
        }
    }

    pub fn to_host(self, dev: &[f32]) -> Vec<f32> {
        match self {
            HostOrder::Plain => dev.to_vec(),
            HostOrder::Filter(p, l) => l.filter_to_ghwio(dev, &p),
            HostOrder::LinearRows { h, w, c } => permute_rows(dev, [h, w, c], true),
        }
    }
}

/// Rows of `[h·w·c][out]` from `(h, w, c)` order to `(c, h, w)` order, or
/// back when `inverse`.
pub fn permute_rows(x: &[f32], [h, w, c]: [usize; 3], inverse: bool) -> Vec<f32> {
    let rows = h * w * c;
    let out = x.len() / rows.max(1);
    let mut y = vec![0.0; x.len()];
    for hh in 0..h {
        for ww in 0..w {
            for cc in 0..c {
                let hwc = (hh * w + ww) * c + cc;
                let chw = (cc * h + hh) * w + ww;
                let (from, to) = if inverse { (chw, hwc) } else { (hwc, chw) };
                y[to * out..(to + 1) * out].copy_from_slice(&x[from * out..(from + 1) * out]);
            }
        }
    }
    y
}

/// A half copy of a weight and the gradient the layer writes in half.
pub struct HalfCopy {
    pub storage: Storage,
    pub value: DeviceBuffer,
    pub grad: DeviceBuffer,
}

pub struct GpuParam {
    pub len: usize,
    pub order: HostOrder,
    /// fp32 master values, gradients and momentum.
    pub value: DeviceBuffer,
    pub grad: DeviceBuffer,
    pub velocity: DeviceBuffer,
    pub half: Option<HalfCopy>,
}

impl GpuParam {
    /// Uploads `host` (the CPU order); `half` asks for a half copy in that
    /// storage (f16/bf16 runs of convolution and linear layers).
    pub fn new(
        gpu: &Gpu,
        kernels: &Kernels,
        host: &[f32],
        order: HostOrder,
        half: Option<Storage>,
    ) -> GpuResult<GpuParam> {
        let s = &gpu.stream;
        let bytes = host.len() * 4;
        let mut velocity = DeviceBuffer::alloc(s, bytes)?;
        velocity.fill_bytes(0)?;
        let mut grad = DeviceBuffer::alloc(s, bytes)?;
        grad.fill_bytes(0xFF)?;
        let half = match half {
            Some(st @ (Storage::F16 | Storage::Bf16)) => Some(HalfCopy {
                storage: st,
                value: DeviceBuffer::alloc(s, host.len() * 2)?,
                grad: DeviceBuffer::alloc(s, host.len() * 2)?,
            }),
            _ => None,
        };
        let mut p = GpuParam {
            len: host.len(),
            order,
            value: DeviceBuffer::alloc(s, bytes)?,
            grad,
            velocity,
            half,
        };
        p.upload(gpu, kernels, host)?;
        Ok(p)
    }

    /// Sets the values from `host` (the CPU order), half copy included.
    pub fn upload(&mut self, gpu: &Gpu, kernels: &Kernels, host: &[f32]) -> GpuResult<()> {
        self.value
            .upload(&DType::F32.encode(&self.order.to_device(host)))?;
        self.refresh_half(gpu, kernels)
    }

    /// The values the layer computes with.
    pub fn compute(&self) -> DevPtr {
        self.half
            .as_ref()
            .map_or(self.value.ptr(), |h| h.value.ptr())
    }

    /// Where the layer writes the gradient.
    pub fn compute_grad(&self) -> DevPtr {
        self.half.as_ref().map_or(self.grad.ptr(), |h| h.grad.ptr())
    }

    /// After the layer's backward: the half gradient into the fp32 one.
    pub fn finish_grad(&self, gpu: &Gpu, kernels: &Kernels) -> GpuResult<()> {
        if let Some(h) = &self.half {
            // SAFETY: both buffers hold `len` elements of their storage.
            unsafe {
                kernels.cast(
                    &gpu.stream,
                    h.storage,
                    Storage::F32,
                    h.grad.ptr(),
                    self.grad.ptr(),
                    self.len,
                )?;
            }
        }
        Ok(())
    }

    /// After an update: the master values into the half copy.
    pub fn refresh_half(&self, gpu: &Gpu, kernels: &Kernels) -> GpuResult<()> {
        if let Some(h) = &self.half {
            // SAFETY: both buffers hold `len` elements of their storage.
            unsafe {
                kernels.cast(
                    &gpu.stream,
                    Storage::F32,
                    h.storage,
                    self.value.ptr(),
                    h.value.ptr(),
                    self.len,
                )?;
            }
        }
        Ok(())
    }

    /// The fp32 gradient in the CPU order.
    pub fn download_grad(&self) -> GpuResult<Vec<f32>> {
        Ok(self
            .order
            .to_host(&DType::F32.decode(&self.grad.download()?)))
    }

    /// Bytes on the device (master, gradient, momentum, half copies).
    pub fn bytes(&self) -> usize {
        self.len * 12 + self.half.as_ref().map_or(0, |_| self.len * 4)
    }
}

/// The gradients and activations a layer's `plan` may search on.
pub struct PlanTensors<'a> {
    pub x: &'a [DevPtr],
    pub y: DevPtr,
    pub dy: Option<DevPtr>,
    pub dx: &'a [Option<DevPtr>],
    /// Scratch for the search, as large as the limit allows.
    pub search: Workspace,
    /// The most workspace a chosen algorithm may use.
    pub limit: usize,
}

/// One layer's CUDA side. Tensors are device buffers of the whole batch in
/// the run's dtype and layout.
pub trait GpuLayer {
    /// `y = f(x)`.
    fn forward(&mut self, cx: &GpuCtx, x: &[DevPtr], y: DevPtr) -> GpuResult<()>;

    /// The gradients of the inputs whose `dx[k]` is `Some`, and of the
    /// parameters (in fp32, [`GpuParam::finish_grad`] included), from the
    /// output gradient `dy` (the sum over consumers, made by the executor).
    fn backward(
        &mut self,
        cx: &GpuCtx,
        x: &[DevPtr],
        y: DevPtr,
        dy: DevPtr,
        dx: &[Option<DevPtr>],
    ) -> GpuResult<()>;

    /// Chooses algorithms on the network's own tensors, before any timed
    /// step; returns the workspace the choices need.
    fn plan(&mut self, _cx: &GpuCtx, _t: &PlanTensors) -> GpuResult<usize> {
        Ok(0)
    }

    fn params(&mut self) -> Vec<&mut GpuParam> {
        Vec::new()
    }

    fn params_ref(&self) -> Vec<&GpuParam> {
        Vec::new()
    }

    /// Device bytes held besides parameters and activations (saved
    /// statistics, masks, probabilities).
    fn scratch_bytes(&self) -> usize {
        0
    }

    /// What ran, for the per-layer table.
    fn kernels(&self) -> String {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_rows_follow_the_flattening_order() {
        // h=1, w=2, c=2, out=1: host rows (h,w,c) = [w0c0, w0c1, w1c0, w1c1]
        // device rows (c,h,w) = [c0w0, c0w1, c1w0, c1w1].
        let host = [1.0, 2.0, 3.0, 4.0];
        let o = HostOrder::LinearRows { h: 1, w: 2, c: 2 };
        assert_eq!(o.to_device(&host), vec![1.0, 3.0, 2.0, 4.0]);
        assert_eq!(o.to_host(&o.to_device(&host)), host.to_vec());
        // Two outputs per row move together.
        let host2: Vec<f32> = (0..12).map(|v| v as f32).collect();
        let o2 = HostOrder::LinearRows { h: 3, w: 1, c: 2 };
        let dev = o2.to_device(&host2);
        assert_eq!(&dev[0..2], &[0.0, 1.0]); // c0h0 = host row 0
        assert_eq!(&dev[2..4], &[4.0, 5.0]); // c0h1 = host row 2
        assert_eq!(o2.to_host(&dev), host2);
    }
}
