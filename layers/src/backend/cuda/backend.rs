//! The CUDA backend ([`Cuda`]): what the executor asks of the device, the
//! context each op's CUDA layer runs in, and the parameters the GPU keeps.
//!
//! The GPU, its kernels and the run's dtype and layout are one [`Device`],
//! made once by [`Cuda::new`]; the backend and every context it makes
//! ([`Cuda::ctx`]) refer to that one value and read its fields through
//! `Deref` (`b.gpu`, `cx.dtype`).
//!
//! Tensors cross the layer interface as raw device pointers: the executor
//! owns every buffer and sizes it from the graph, and a layer only enqueues
//! work on the benchmark stream. Parameters are fp32 master copies with fp32 gradients
//! and momentum; an f16/bf16 run keeps a half copy of each convolution and
//! fully connected weight for the layer to compute with, refreshed after
//! every update, and casts the layer's half gradient back to fp32.

use super::cudnn::TensorDesc;
use super::cudnn_ops::{OpTensorDesc, SCALARS};
use super::memory::Workspace;
use super::nvrtc::Kernels;
use super::paths::GpuPaths;
use super::stage::InputStage;
use super::{check_cudnn, DeviceBuffer, Gpu, GpuError, GpuResult};
use crate::core::backend::{Backend, BatchDims, Elem};
use crate::core::dtype::Storage;
use crate::core::shape::Dims;
use crate::core::{DType, Layout};
use cnnbench_kernels::conv::ConvShape;
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::CudaEvent;
use std::ffi::c_void;
use std::ops::Deref;
use std::rc::Rc;

pub type DevPtr = CUdeviceptr;

pub fn void(p: DevPtr) -> *mut c_void {
    p as *mut c_void
}

/// One run's device, shared by the backend and the layers' contexts: one
/// GPU, the NVRTC kernels, the run's dtype and layout, and the optional
/// paths it takes.
pub struct Device<'g> {
    pub gpu: &'g Gpu,
    pub kernels: &'g Kernels,
    pub dtype: DType,
    pub layout: Layout,
    pub paths: GpuPaths,
}

/// What every layer may consult while it runs: the run's [`Device`]
/// (through `Deref`: `cx.gpu`, `cx.dtype`) and the state that changes.
pub struct GpuCtx<'g> {
    device: Rc<Device<'g>>,
    /// Changes every training step (dropout draws a new mask).
    pub step_seed: u64,
    /// While a step is captured as a CUDA graph (`--cuda-graph`): the
    /// device address of the u64 the replayed step reads its seed from
    /// (set before each launch, outside the graph); 0 in an eager step.
    pub step_seed_at: DevPtr,
    /// The convolutions' shared workspace (while planning: the search
    /// workspace).
    pub workspace: Workspace,
    /// While planning: the most workspace a chosen algorithm may use.
    pub workspace_limit: usize,
    /// The allocation `workspace` points into.
    pub workspace_buf: Option<DeviceBuffer>,
}

impl<'g> Deref for GpuCtx<'g> {
    type Target = Device<'g>;

    fn deref(&self) -> &Device<'g> {
        &self.device
    }
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

/// The CUDA backend: one GPU, the NVRTC kernels, and the run's dtype and
/// layout (its [`Device`], read through `Deref`: `b.gpu`, `b.dtype`).
pub struct Cuda<'g> {
    device: Rc<Device<'g>>,
    /// cuDNN's op-tensor add, for gradient sums.
    add: OpTensorDesc,
}

impl<'g> Deref for Cuda<'g> {
    type Target = Device<'g>;

    fn deref(&self) -> &Device<'g> {
        &self.device
    }
}

impl<'g> Cuda<'g> {
    pub fn new(
        gpu: &'g Gpu,
        kernels: &'g Kernels,
        dtype: DType,
        layout: Layout,
        paths: GpuPaths,
    ) -> GpuResult<Self> {
        Ok(Cuda {
            device: Rc::new(Device {
                gpu,
                kernels,
                dtype,
                layout,
                paths,
            }),
            add: OpTensorDesc::add()?,
        })
    }

    /// The layers' context on this backend's device: `step_seed` for the
    /// first step, no workspace yet, and `workspace_limit` for planning.
    pub fn ctx(&self, step_seed: u64, workspace_limit: usize) -> GpuCtx<'g> {
        GpuCtx {
            device: Rc::clone(&self.device),
            step_seed,
            step_seed_at: 0,
            workspace: Workspace::NONE,
            workspace_limit,
            workspace_buf: None,
        }
    }

    /// cuDNN's descriptor of a tensor of `batch` images of `d`.
    pub fn tensor_desc(&self, batch: usize, d: Dims) -> GpuResult<TensorDesc> {
        TensorDesc::new(self.layout, self.dtype, batch, d.c, d.h, d.w)
    }

    /// The storage of the half copy convolution and fully connected
    /// weights keep (f16 and bf16 runs).
    pub fn half_storage(&self) -> Option<Storage> {
        match self.dtype {
            DType::F16 | DType::Bf16 => Some(self.dtype.storage()),
            _ => None,
        }
    }

    /// A parameter uploaded from `host` (the CPU layers' order).
    pub fn param(
        &self,
        host: &[f32],
        order: HostOrder,
        half: Option<Storage>,
    ) -> GpuResult<GpuParam> {
        GpuParam::new(self.gpu, self.kernels, host, order, half)
    }

    fn elem_dtype(&self, elem: Elem) -> DType {
        match elem {
            Elem::Run => self.dtype,
            Elem::F32 => DType::F32,
        }
    }

    fn driver(call: &'static str, e: cudarc::driver::DriverError) -> GpuError {
        GpuError {
            call,
            status: format!("{:?}", e.0),
            oom: false,
        }
    }
}

/// A gradient sum's tensor: its descriptor (cuDNN's adds) and its
/// element count (the own add kernel's).
pub struct SumPlan {
    desc: TensorDesc,
    elems: usize,
}

/// `c = a + b` in one op-tensor call (the residual add, and the first two
/// parts of a gradient sum).
pub fn add_into(
    cx: &GpuCtx,
    t: &TensorDesc,
    op: &OpTensorDesc,
    a: DevPtr,
    b: DevPtr,
    c: DevPtr,
) -> GpuResult<()> {
    // SAFETY: a, b and c hold the described tensor.
    check_cudnn("cudnnOpTensor", unsafe {
        crate::backend::cuda::loader::cudnn_sys::cudnnOpTensor(
            cx.cudnn(),
            op.0,
            SCALARS.one(),
            t.0,
            void(a),
            SCALARS.one(),
            t.0,
            void(b),
            SCALARS.zero(),
            t.0,
            void(c),
        )
    })
}

impl<'g> Backend for Cuda<'g> {
    type Buf = DeviceBuffer;
    type In<'a>
        = DevPtr
    where
        Self: 'a;
    type Out<'a>
        = DevPtr
    where
        Self: 'a;
    type Param = GpuParam;
    type Ctx = GpuCtx<'g>;
    type Event = CudaEvent;
    type SumPlan = SumPlan;
    type Stage = InputStage;

    fn input<'a>(buf: &'a DeviceBuffer) -> DevPtr
    where
        Self: 'a,
    {
        buf.ptr()
    }

    fn output<'a>(buf: &'a mut DeviceBuffer) -> DevPtr
    where
        Self: 'a,
    {
        buf.ptr()
    }

    fn alloc(&self, len: usize, elem: Elem) -> GpuResult<DeviceBuffer> {
        let bytes = len * self.elem_dtype(elem).size_bytes();
        let mut buf = DeviceBuffer::alloc(&self.gpu.stream, bytes)?;
        buf.fill_bytes(0)?;
        Ok(buf)
    }

    fn buf_bytes(buf: &DeviceBuffer) -> usize {
        buf.bytes()
    }

    fn download(&self, buf: &DeviceBuffer, d: BatchDims, elem: Elem) -> GpuResult<Vec<f32>> {
        let v = self.elem_dtype(elem).decode(&buf.download()?);
        Ok(self.layout.to_nhwc(&v, d.n, d.h, d.w, d.c))
    }

    fn upload(
        &self,
        buf: &mut DeviceBuffer,
        host: &[f32],
        d: BatchDims,
        elem: Elem,
    ) -> GpuResult<()> {
        let v = self.layout.from_nhwc(host, d.n, d.h, d.w, d.c);
        buf.upload(&self.elem_dtype(elem).encode(&v))
    }

    fn alloc_stage(&self, d: BatchDims, elem: Elem) -> GpuResult<InputStage> {
        InputStage::new(&self.gpu.stream, d, self.layout, self.elem_dtype(elem))
    }

    fn stage_bytes(stage: &InputStage) -> usize {
        stage.device_bytes()
    }

    fn stage(&self, stage: &mut InputStage, host: &[f32]) -> GpuResult<()> {
        stage.stage(host)
    }

    fn unstage(&self, stage: &mut InputStage, buf: &mut DeviceBuffer) -> GpuResult<()> {
        stage.unstage(buf)
    }

    fn plan_sum(&self, d: BatchDims) -> GpuResult<SumPlan> {
        Ok(SumPlan {
            desc: TensorDesc::new(self.layout, self.dtype, d.n, d.c, d.h, d.w)?,
            elems: d.n * d.c * d.h * d.w,
        })
    }

    fn sum(
        &self,
        cx: &mut GpuCtx<'g>,
        plan: &SumPlan,
        parts: &[DevPtr],
        dst: DevPtr,
    ) -> GpuResult<()> {
        if parts.len() < 2 {
            return Err(GpuError::invalid(
                "gradient sum",
                format!("{} part(s): a sum is planned for two or more", parts.len()),
            ));
        }
        if self.paths.own_kernels {
            // The add's own vectorized kernel (cuDNN's op-tensor add, the
            // same call as the default path's residual add, moved 2.4 TB/s
            // on the H200 at a3cfd5f, 56% of the measured copy rate):
            // dst = a + b, then dst += each further part.
            let st = self.dtype.storage();
            let stream = &self.gpu.stream;
            let mut acc = parts[0];
            for &p in &parts[1..] {
                // SAFETY: every part and dst hold the plan's elements of
                // the run's storage; the kernel reads a and b before it
                // writes y, elementwise (y may be a).
                unsafe {
                    self.kernels
                        .add_fwd(stream, st, acc, p, dst, plan.elems, false)?
                };
                acc = dst;
            }
            return Ok(());
        }
        let d = &plan.desc;
        add_into(cx, d, &self.add, parts[0], parts[1], dst)?;
        for &p in &parts[2..] {
            // SAFETY: every part and the sum hold the described tensor.
            check_cudnn("cudnnAddTensor", unsafe {
                crate::backend::cuda::loader::cudnn_sys::cudnnAddTensor(
                    cx.cudnn(),
                    SCALARS.one(),
                    d.0,
                    void(p),
                    SCALARS.one(),
                    d.0,
                    void(dst),
                )
            })?;
        }
        Ok(())
    }

    fn sgd(&self, _cx: &mut GpuCtx<'g>, p: &mut GpuParam, lr: f32, momentum: f32) -> GpuResult<()> {
        // SAFETY: the three buffers hold `len` floats.
        unsafe {
            self.kernels.sgd_update(
                &self.gpu.stream,
                p.value.ptr(),
                p.grad.ptr(),
                p.velocity.ptr(),
                p.len,
                lr,
                momentum,
            )?;
        }
        p.refresh_half(self.gpu, self.kernels)
    }

    fn param_grad(&self, p: &GpuParam) -> GpuResult<Vec<f32>> {
        p.download_grad()
    }

    fn param_bytes(p: &GpuParam) -> usize {
        p.bytes()
    }

    fn set_step_seed(cx: &mut GpuCtx<'g>, seed: u64) {
        cx.step_seed = seed;
    }

    fn ctx_bytes(cx: &GpuCtx<'g>) -> usize {
        cx.workspace_buf.as_ref().map_or(0, DeviceBuffer::bytes)
    }

    fn event(&self) -> GpuResult<CudaEvent> {
        self.gpu
            .ctx
            .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| Self::driver("cuEventCreate", e))
    }

    fn record(&self, e: &mut CudaEvent) -> GpuResult<()> {
        e.record(&self.gpu.stream)
            .map_err(|e| Self::driver("cuEventRecord", e))
    }

    fn wait(&self, e: &CudaEvent) -> GpuResult<()> {
        e.synchronize()
            .map_err(|e| Self::driver("cuEventSynchronize", e))
    }

    fn elapsed_ms(&self, a: &CudaEvent, b: &CudaEvent) -> GpuResult<f64> {
        a.elapsed_ms(b)
            .map(f64::from)
            .map_err(|e| Self::driver("cuEventElapsedTime", e))
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
