//! `cnnbench rnn --device gpu`'s problem ([`GpuRnn`]): one RNN on cuDNN
//! in PyTorch's form, with every tensor it reads and writes.

use super::cudnn_descs::{invalid, RnnDescs, RnnForm};
use super::cudnn_space::{RnnSpace, RnnTensors};
use crate::backend::cuda::error::GpuResult;
use crate::backend::cuda::rnn_algo::RnnAlgo;
use crate::backend::cuda::{DeviceBuffer, Gpu};
use crate::core::DType;
use cnnbench_kernels::rnn::{Cell, RnnShape, Weights};

/// One RNN problem on a GPU, `cnnbench rnn`'s: its [`RnnSpace`] in
/// PyTorch's form and every tensor, made once; the passes only enqueue
/// work on `gpu.stream`.
pub struct GpuRnn<'g> {
    gpu: &'g Gpu,
    space: RnnSpace,
    x: DeviceBuffer,
    y: DeviceBuffer,
    hx: DeviceBuffer,
    cx: DeviceBuffer,
    hy: DeviceBuffer,
    cy: DeviceBuffer,
    dx: DeviceBuffer,
    dy: DeviceBuffer,
    dhx: DeviceBuffer,
    dhy: DeviceBuffer,
    dcx: DeviceBuffer,
    dcy: DeviceBuffer,
}

/// Host-side outputs of the passes, as f32, for checks (the weight
/// gradients apart: [`GpuRnn::download_weight_grads`]).
pub type RnnOutputs = cnnbench_kernels::rnn::Outputs;

impl<'g> GpuRnn<'g> {
    /// Makes the [`RnnSpace`] and allocates every tensor. Outputs start as
    /// NaN (0xFF bytes), so that a pass that wrote nothing is caught by
    /// the checks.
    pub fn new(gpu: &'g Gpu, shape: RnnShape, dtype: DType, algo: RnnAlgo) -> GpuResult<Self> {
        let space = RnnSpace::new(gpu, shape, dtype, algo, RnnForm::Pytorch)?;
        let s = &gpu.stream;
        let size = dtype.size_bytes();
        let bytes = |elems: usize| {
            elems.checked_mul(size).ok_or_else(|| {
                invalid(
                    "cuMemAlloc",
                    format!("{elems} elements of {size} bytes overflow"),
                )
            })
        };
        let lstm = shape.cell == Cell::Lstm;
        let (x_bytes, y_bytes) = (bytes(shape.x_len())?, bytes(shape.y_len())?);
        let state_bytes = bytes(shape.state_len())?;
        let c_bytes = if lstm { state_bytes } else { 0 };
        let alloc = |b: usize| DeviceBuffer::alloc(s, b);
        let mut rnn = GpuRnn {
            gpu,
            space,
            x: alloc(x_bytes)?,
            y: alloc(y_bytes)?,
            hx: alloc(state_bytes)?,
            cx: alloc(c_bytes)?,
            hy: alloc(state_bytes)?,
            cy: alloc(c_bytes)?,
            dx: alloc(x_bytes)?,
            dy: alloc(y_bytes)?,
            dhx: alloc(state_bytes)?,
            dhy: alloc(state_bytes)?,
            dcx: alloc(c_bytes)?,
            dcy: alloc(c_bytes)?,
        };
        for b in [
            &mut rnn.x,
            &mut rnn.hx,
            &mut rnn.cx,
            &mut rnn.dy,
            &mut rnn.dhy,
            &mut rnn.dcy,
        ] {
            if b.bytes() > 0 {
                b.fill_bytes(0)?;
            }
        }
        for b in [
            &mut rnn.y,
            &mut rnn.hy,
            &mut rnn.cy,
            &mut rnn.dx,
            &mut rnn.dhx,
            &mut rnn.dcx,
        ] {
            if b.bytes() > 0 {
                b.fill_bytes(0xFF)?;
            }
        }
        gpu.synchronize()?;
        Ok(rnn)
    }

    /// The problem's descriptors.
    pub fn descs(&self) -> &RnnDescs {
        &self.space.descs
    }

    /// Writes PyTorch-layout weights (one [`Weights`] per layer and
    /// direction), converted to the run's dtype, into the weight space.
    pub fn set_weights(&mut self, weights: &[Weights]) -> GpuResult<()> {
        self.space.set_weights(weights)
    }

    /// Copies the sequence, the initial states and the output gradients
    /// in, converted to the run's dtype (`cx` and `dcy` are read for the
    /// LSTM only).
    pub fn upload_inputs(
        &mut self,
        x: &[f32],
        hx: &[f32],
        cx: &[f32],
        dy: &[f32],
        dhy: &[f32],
        dcy: &[f32],
    ) -> GpuResult<()> {
        let s = self.space.descs.shape;
        let d = self.space.descs.dtype;
        let lstm = s.cell == Cell::Lstm;
        let c_len = if lstm { s.state_len() } else { 0 };
        let put = |buf: &mut DeviceBuffer, what: &str, v: &[f32], want: usize| {
            if v.len() != want {
                return Err(invalid(
                    "upload RNN inputs",
                    format!("{what} has {} values, not {want}", v.len()),
                ));
            }
            buf.upload(&d.encode(v))
        };
        put(&mut self.x, "x", x, s.x_len())?;
        put(&mut self.hx, "hx", hx, s.state_len())?;
        put(&mut self.dy, "dy", dy, s.y_len())?;
        put(&mut self.dhy, "dhy", dhy, s.state_len())?;
        if lstm {
            put(&mut self.cx, "cx", cx, c_len)?;
            put(&mut self.dcy, "dcy", dcy, c_len)?;
        }
        Ok(())
    }

    /// Every tensor's pointer.
    fn tensors(&self) -> RnnTensors {
        RnnTensors {
            x: self.x.ptr(),
            y: self.y.ptr(),
            hx: self.hx.ptr(),
            hy: self.hy.ptr(),
            cx: self.cx.ptr(),
            cy: self.cy.ptr(),
            dx: self.dx.ptr(),
            dy: self.dy.ptr(),
            dhx: self.dhx.ptr(),
            dhy: self.dhy.ptr(),
            dcx: self.dcx.ptr(),
            dcy: self.dcy.ptr(),
        }
    }

    /// Enqueues the forward pass in training mode: `y`, `hy` and (LSTM)
    /// `cy`.
    pub fn forward(&mut self) -> GpuResult<()> {
        // SAFETY: every tensor was allocated in `new` at the descriptors'
        // sizes and lives as long as `self`, whose drop waits for the
        // stream.
        unsafe { self.space.forward(self.gpu, &self.tensors()) }
    }

    /// Enqueues the backward pass for data, after [`GpuRnn::forward`]:
    /// `dx`, `dhx` and (LSTM) `dcx` from `dy`, `dhy`, `dcy`.
    pub fn backward_data(&mut self) -> GpuResult<()> {
        // SAFETY: as in `forward`.
        unsafe { self.space.backward_data(self.gpu, &self.tensors()) }
    }

    /// Enqueues the weight gradients, after [`GpuRnn::backward_data`]
    /// (see [`RnnSpace::backward_weights`]).
    pub fn backward_weights(&mut self) -> GpuResult<()> {
        let t = self.tensors();
        // SAFETY: as in `forward`.
        unsafe { self.space.backward_weights(self.gpu, &t) }
    }

    /// Waits for the stream and copies every output out, as f32.
    pub fn download_outputs(&self) -> GpuResult<RnnOutputs> {
        let d = self.space.descs.dtype;
        let lstm = self.space.descs.shape.cell == Cell::Lstm;
        let get = |b: &DeviceBuffer| b.download().map(|v| d.decode(&v));
        let get_c = |b: &DeviceBuffer| if lstm { get(b) } else { Ok(Vec::new()) };
        Ok(RnnOutputs {
            y: get(&self.y)?,
            hy: get(&self.hy)?,
            cy: get_c(&self.cy)?,
            dx: get(&self.dx)?,
            dhx: get(&self.dhx)?,
            dcx: get_c(&self.dcx)?,
            dw: Vec::new(),
        })
    }

    /// The weight gradients in PyTorch's layout, as f32.
    pub fn download_weight_grads(&self) -> GpuResult<Vec<Weights>> {
        self.space.download_weight_grads()
    }

    /// The weights as cuDNN holds them, back in PyTorch's layout.
    pub fn download_weights(&self) -> GpuResult<Vec<Weights>> {
        self.space.download_weights()
    }

    /// Bytes of the weight space (its gradient is as large), the workspace
    /// and the reserve space, as cuDNN sized them.
    pub fn sizes(&self) -> (usize, usize, usize) {
        self.space.sizes()
    }
}
