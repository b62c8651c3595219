//! Recurrent layers on cuDNN's v8 RNN API ([`RnnSpace`]): one layer, left
//! to right or bidirectional (concatenated), reading the network's
//! batch-major `[n][t][c]` sequence and writing its `[n][t][dirs·h]`
//! output in place (`CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED`: no
//! transposes), with Keras's one bias per gate, on the algorithm
//! `--rnn-algo` names (standard by default; `SINGLE_INP_BIAS`, and with
//! a persistent algorithm two biases, the recurrent one zeros that no
//! parameter maps to). A persistent algorithm cuDNN refuses in that
//! layout runs on PyTorch's time-major one behind transposes
//! ([`seq_major`]); with `--rnn-algo auto` ([`pick`]) each algorithm is
//! timed in both layouts and the fastest kept.
//!
//! The parameters are the CPU's tensors (`weight_ih`, `weight_hh`,
//! `bias_ih` per direction, fp32 master values and gradients). cuDNN wants
//! them in its one weight space, which a [`GpuParam`] (owning its
//! buffers) cannot be a view into, so every forward pass first copies the
//! parameters in (converted to the run's dtype) and every backward pass
//! copies the weight gradients out to the parameters' fp32 gradients:
//! device-to-device work on the stream, a few per direction (contiguous
//! gate blocks are merged).
//!
//! The last step's output (`sequences` false) is each direction's final
//! hidden state, cuDNN's `hy` (`[dirs][n][h]`), copied into the output's
//! `[n][dirs·h]` with one strided 2-D copy per direction; its gradient
//! goes back the same way into `dhy`, beside a sequence gradient kept at
//! zero.

use super::cudnn_descs::RnnForm;
use super::cudnn_space::{RnnSpace, RnnTensors};
use super::cudnn_weights::Slot;
use crate::backend::cuda::backend::{Cuda, DevPtr, GpuCtx, GpuParam, HostOrder};
use crate::backend::cuda::error::{check_driver, driver};
use crate::backend::cuda::paths::RnnChoice;
use crate::backend::cuda::rnn_algo::RnnAlgo;
use crate::backend::cuda::{DeviceBuffer, Gpu, GpuResult};
use crate::core::backend::Layer;
use crate::core::dtype::Storage;
use crate::core::error::Error;
use crate::core::{DType, Layout};
use crate::ops::spec::{NodeCx, OpSpec};
use cnnbench_kernels::rnn::{Cell, RnnShape};
use cudarc::driver::sys as drv;
use cudarc::driver::CudaStream;
use seq_major::SeqMajor;

/// The recurrent layer of `spec` for the node `cx` on `b`.
pub fn layer<'g>(
    spec: &super::RecurrentSpec,
    cx: &NodeCx,
    b: &Cuda<'g>,
) -> GpuResult<Option<Box<dyn Layer<Cuda<'g>>>>> {
    if b.layout == Layout::Nchw {
        return Err(Error::invalid(
            "make layer",
            "recurrent layers run in the nhwc layout; use --layout nhwc".into(),
        ));
    }
    let shape = spec.shape(cx.x[0], cx.batch);
    let params = spec
        .init(cx)
        .iter()
        .map(|host| b.param(host, HostOrder::Plain, None))
        .collect::<GpuResult<Vec<_>>>()?;
    let l = RecurrentGpuLayer::new(
        b.gpu,
        shape,
        b.dtype,
        b.paths.rnn,
        spec.sequences,
        params,
        cx.input_grad,
    )?;
    Ok(Some(Box::new(l)))
}

/// The space of an algorithm `--rnn-algo` names: on the network's
/// batch-major sequences, or where cuDNN refuses a persistent algorithm
/// there, on time-major ones behind transposes; refused in one line when
/// cuDNN takes it in neither layout.
fn named_space(
    gpu: &Gpu,
    shape: RnnShape,
    dtype: DType,
    algo: RnnAlgo,
    sequences: bool,
) -> GpuResult<(RnnSpace, Option<SeqMajor>)> {
    let batch_major = match RnnSpace::new(gpu, shape, dtype, algo, RnnForm::Network) {
        Ok(space) => return Ok((space, None)),
        Err(e) if algo == RnnAlgo::Standard => return Err(e),
        Err(e) => e,
    };
    let time_major = RnnSpace::new(gpu, shape, dtype, algo, RnnForm::NetworkSeqMajor)
        .and_then(|space| Ok((space, Some(SeqMajor::new(gpu, shape, dtype, sequences)?))));
    time_major.map_err(|e| {
        Error::invalid(
            "--rnn-algo",
            format!(
                "{algo}: cuDNN refuses it for this layer in either layout: \
                 batch-major: {batch_major}; time-major: {e}"
            ),
        )
    })
}

/// The state tensors of every pass: `zeros` as the initial states and the
/// cell state's gradient, `dhy` as the final state's gradient, and the
/// buffers cuDNN writes (`hy`, `cy`, `dhx`, `dcx`).
fn state_tensors(
    zeros: &DeviceBuffer,
    [hy, cy, dhx, dcx]: [&DeviceBuffer; 4],
    dhy: DevPtr,
) -> RnnTensors {
    let z = zeros.ptr();
    RnnTensors {
        hx: z,
        cx: z,
        dcy: z,
        dhy,
        hy: hy.ptr(),
        cy: cy.ptr(),
        dhx: dhx.ptr(),
        dcx: dcx.ptr(),
        ..RnnTensors::default()
    }
}

/// A run of one parameter's elements that lies contiguously in the
/// weight space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Piece {
    /// The parameter (`3·direction + k`, the CPU's order).
    param: usize,
    /// Its first element in the parameter.
    at: usize,
    /// Its byte offset in the weight space (and its gradient).
    space: usize,
    len: usize,
}

/// Where every parameter's elements lie in cuDNN's weight space (`slots`,
/// elements of `elem` bytes), as few pieces as the layout allows, checked
/// to cover each parameter (of `sizes` elements) once.
fn pieces(slots: &[Slot], elem: usize, sizes: &[usize]) -> GpuResult<Vec<Piece>> {
    let call = "place RNN parameters";
    let mut all = Vec::new();
    for slot in slots {
        let d = slot.lin.pseudo_layer;
        let (m, b) = slot.lin.source();
        all.push(Piece {
            param: 3 * d + usize::from(slot.lin.recurrent),
            at: m.start,
            space: slot.matrix,
            len: m.len(),
        });
        match (slot.bias, slot.lin.recurrent) {
            (Some(at), false) => all.push(Piece {
                param: 3 * d + 2,
                at: b.start,
                space: at,
                len: b.len(),
            }),
            (None, _) => {}
            // A guard: the network's forms name no recurrent bias, so
            // `find_slots` gives none.
            (Some(_), true) => {
                return Err(Error::invalid(
                    call,
                    format!("cuDNN holds a recurrent bias in direction {d}"),
                ))
            }
        }
    }
    all.sort_by_key(|p| (p.param, p.at));
    let mut merged: Vec<Piece> = Vec::new();
    for p in all {
        match merged.last_mut() {
            Some(q)
                if q.param == p.param
                    && q.at + q.len == p.at
                    && q.space + q.len * elem == p.space =>
            {
                q.len += p.len
            }
            _ => merged.push(p),
        }
    }
    // Each parameter covered exactly: its pieces in order, end to end.
    for (k, &size) in sizes.iter().enumerate() {
        let mut next = 0;
        for p in merged.iter().filter(|p| p.param == k) {
            if p.at != next {
                return Err(Error::invalid(
                    call,
                    format!("parameter {k}: a gap or overlap at {next}"),
                ));
            }
            next += p.len;
        }
        if next != size {
            return Err(Error::invalid(
                call,
                format!("parameter {k}: cuDNN holds {next} of its {size} values"),
            ));
        }
    }
    if merged.iter().any(|p| p.param >= sizes.len()) {
        return Err(Error::invalid(call, "a weight with no parameter".into()));
    }
    Ok(merged)
}

/// Copies `rows` rows of `width` bytes from `src` (rows `src_pitch` bytes
/// apart) to `dst` (rows `dst_pitch` apart), in stream order.
///
/// # Safety
///
/// Both ranges must lie in device allocations live until the copy
/// completes on `stream`, and not overlap.
unsafe fn copy_rows(
    stream: &CudaStream,
    [src, src_pitch]: [DevPtr; 2],
    [dst, dst_pitch]: [DevPtr; 2],
    width: usize,
    rows: usize,
) -> GpuResult<()> {
    stream
        .context()
        .bind_to_thread()
        .map_err(|e| driver("cuCtxSetCurrent", e))?;
    let copy = drv::CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: drv::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        srcHost: std::ptr::null(),
        srcDevice: src,
        srcArray: std::ptr::null_mut(),
        srcPitch: src_pitch as usize,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: drv::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        dstHost: std::ptr::null_mut(),
        dstDevice: dst,
        dstArray: std::ptr::null_mut(),
        dstPitch: dst_pitch as usize,
        WidthInBytes: width,
        Height: rows,
    };
    // SAFETY: device-to-device within the caller's allocations; the
    // descriptor is read during the call only.
    check_driver("cuMemcpy2DAsync", unsafe {
        drv::cuMemcpy2DAsync_v2(&copy, stream.cu_stream())
    })
}

/// What the last-step output (`sequences` false) needs: the full output
/// sequence cuDNN writes (and its backward passes read), a sequence
/// gradient of zeros, and the final states' gradient.
struct LastStep {
    y: DeviceBuffer,
    dy_zero: DeviceBuffer,
    dhy: DeviceBuffer,
}

pub struct RecurrentGpuLayer {
    space: RnnSpace,
    storage: Storage,
    /// `weight_ih`, `weight_hh`, `bias_ih` per direction (fp32).
    params: Vec<GpuParam>,
    pieces: Vec<Piece>,
    /// Zeros (never written): the initial states `hx`, `cx`, the final
    /// cell state's gradient `dcy`, and `dhy` for `sequences`.
    zeros: DeviceBuffer,
    /// The final states and the initial states' gradients, which cuDNN
    /// writes (the layer reads `hy` alone, for the last step).
    hy: DeviceBuffer,
    cy: DeviceBuffer,
    dhx: DeviceBuffer,
    dcx: DeviceBuffer,
    last: Option<LastStep>,
    /// The input gradient cuDNN always computes, where the network needs
    /// none.
    dx_scratch: Option<DeviceBuffer>,
    /// With `--rnn-algo auto`: what each candidate algorithm did.
    picked: Option<String>,
    /// The time-major form's views and buffers, where auto picked it.
    seq: Option<SeqMajor>,
}

impl RecurrentGpuLayer {
    /// `params` as the spec makes them (per direction `weight_ih`,
    /// `weight_hh`, `bias_ih`); `rnn`: cuDNN's algorithm, or auto;
    /// `input_grad`: whether the network needs the sequence's gradient.
    pub fn new(
        gpu: &Gpu,
        shape: RnnShape,
        dtype: DType,
        rnn: RnnChoice,
        sequences: bool,
        params: Vec<GpuParam>,
        input_grad: bool,
    ) -> GpuResult<Self> {
        let s = &gpu.stream;
        let size = dtype.size_bytes();
        let bytes = |elems: usize| {
            elems.checked_mul(size).ok_or_else(|| {
                Error::invalid(
                    "cuMemAlloc",
                    format!("{elems} elements of {size} bytes overflow"),
                )
            })
        };
        let zeroed = |b: usize| -> GpuResult<DeviceBuffer> {
            let mut buf = DeviceBuffer::alloc(s, b)?;
            buf.fill_bytes(0)?;
            Ok(buf)
        };
        let state = bytes(shape.state_len())?;
        let (x_bytes, y_bytes) = (bytes(shape.x_len())?, bytes(shape.y_len())?);
        let cell = if shape.cell == Cell::Lstm { state } else { 0 };
        let last = match sequences {
            true => None,
            false => Some(LastStep {
                y: DeviceBuffer::alloc(s, y_bytes)?,
                dy_zero: zeroed(y_bytes)?,
                dhy: DeviceBuffer::alloc(s, state)?,
            }),
        };
        let (zeros, hy, cy) = (
            zeroed(state)?,
            DeviceBuffer::alloc(s, state)?,
            DeviceBuffer::alloc(s, cell)?,
        );
        let (dhx, dcx) = (
            DeviceBuffer::alloc(s, state)?,
            DeviceBuffer::alloc(s, cell)?,
        );
        let (space, seq, picked) = match rnn {
            RnnChoice::Algo(algo) => {
                let (space, seq) = named_space(gpu, shape, dtype, algo, sequences)?;
                (space, seq, None)
            }
            RnnChoice::Auto => {
                let states = state_tensors(&zeros, [&hy, &cy, &dhx, &dcx], zeros.ptr());
                let p = pick::fastest(gpu, shape, dtype, &states, sequences, input_grad)?;
                (p.space, p.seq, Some(p.said))
            }
        };
        let sizes: Vec<usize> = params.iter().map(|p| p.len).collect();
        let pieces = pieces(space.slots(), dtype.size_bytes(), &sizes)?;
        Ok(RecurrentGpuLayer {
            storage: dtype.storage(),
            params,
            pieces,
            zeros,
            hy,
            cy,
            dhx,
            dcx,
            last,
            // The time-major form's own buffer takes an unwanted gradient.
            dx_scratch: match input_grad || seq.is_some() {
                true => None,
                false => Some(DeviceBuffer::alloc(s, x_bytes)?),
            },
            space,
            picked,
            seq,
        })
    }

    fn shape(&self) -> RnnShape {
        self.space.descs.shape
    }

    /// The tensors of every pass but the sequences: zero initial states,
    /// the layer's own final states and state gradients.
    fn states(&self) -> RnnTensors {
        let dhy = self.last.as_ref().map_or(self.zeros.ptr(), |l| l.dhy.ptr());
        state_tensors(&self.zeros, [&self.hy, &self.cy, &self.dhx, &self.dcx], dhy)
    }

    /// The parameters into cuDNN's weight space, in the run's dtype.
    fn weights_in(&self, cx: &GpuCtx) -> GpuResult<()> {
        let ws = self.space.weight_space().ptr();
        for p in &self.pieces {
            // SAFETY: `pieces` checked every piece against the parameter's
            // length and cuDNN's placement inside the weight space.
            unsafe {
                cx.kernels.cast(
                    &cx.gpu.stream,
                    Storage::F32,
                    self.storage,
                    self.params[p.param].value.ptr() + (4 * p.at) as u64,
                    ws + p.space as u64,
                    p.len,
                )?;
            }
        }
        Ok(())
    }

    /// The weight gradients out of cuDNN's gradient space into the
    /// parameters' fp32 gradients.
    fn grads_out(&self, cx: &GpuCtx) -> GpuResult<()> {
        let dws = self.space.dweight_space().ptr();
        for p in &self.pieces {
            // SAFETY: as in `weights_in`; the gradient space is laid out as
            // the weight space.
            unsafe {
                cx.kernels.cast(
                    &cx.gpu.stream,
                    self.storage,
                    Storage::F32,
                    dws + p.space as u64,
                    self.params[p.param].grad.ptr() + (4 * p.at) as u64,
                    p.len,
                )?;
            }
        }
        Ok(())
    }

    /// Each direction's rows of `h` values between cuDNN's `[dirs][n][h]`
    /// states and the layer's `[n][dirs·h]`: out of `hy` into `y`
    /// (`to_states` false) or out of `dy` into `dhy`.
    fn states_copy(
        &self,
        cx: &GpuCtx,
        net: DevPtr,
        states: DevPtr,
        to_states: bool,
    ) -> GpuResult<()> {
        let s = self.shape();
        let size = self.space.descs.dtype.size_bytes();
        let dirs = s.direction.count();
        let row = (s.hidden * size) as u64;
        for d in 0..dirs as u64 {
            let state = [states + d * s.mb as u64 * row, row];
            let layer = [net + d * row, dirs as u64 * row];
            let (from, to) = if to_states {
                (layer, state)
            } else {
                (state, layer)
            };
            // SAFETY: `mb` rows of `h` elements in both, within the
            // state buffer (`dirs·mb·h`) and the layer's tensor
            // (`mb·dirs·h`), which do not overlap.
            unsafe { copy_rows(&cx.gpu.stream, from, to, row as usize, s.mb)? };
        }
        Ok(())
    }
}

impl<'g> Layer<Cuda<'g>> for RecurrentGpuLayer {
    fn forward(&mut self, cx: &mut GpuCtx<'g>, x: &[DevPtr], y: DevPtr) -> GpuResult<()> {
        self.weights_in(cx)?;
        let t = RnnTensors {
            x: x[0],
            y: self.last.as_ref().map_or(y, |l| l.y.ptr()),
            ..self.states()
        };
        // SAFETY: x is the network's `[n][t][c]` and the sequence output
        // (the network's `[n][t][dirs·h]` or ours) as the descriptors
        // size them; the states are ours, at `dirs·n·h`; `seq` was made
        // with the space.
        unsafe { seq_major::forward(cx.gpu, &self.space, self.seq.as_ref(), &t)? };
        if self.last.is_some() {
            self.states_copy(cx, y, self.hy.ptr(), false)?;
        }
        Ok(())
    }

    fn backward(
        &mut self,
        cx: &mut GpuCtx<'g>,
        x: &[DevPtr],
        y: DevPtr,
        dy: &[DevPtr],
        dx: &mut [Option<DevPtr>],
    ) -> GpuResult<()> {
        let dx_wanted = dx.first().copied().flatten().is_some();
        let dx = match (dx.first().copied().flatten(), &self.dx_scratch) {
            (Some(d), _) => d,
            (None, Some(s)) => s.ptr(),
            // Unused: the time-major form leaves it in its own buffer.
            (None, None) if self.seq.is_some() => 0,
            (None, None) => {
                return Err(Error::invalid(
                    "recurrent backward",
                    "no buffer for the sequence's gradient".into(),
                ))
            }
        };
        let (y_seq, dy_seq) = match &self.last {
            Some(l) => {
                self.states_copy(cx, dy[0], l.dhy.ptr(), true)?;
                (l.y.ptr(), l.dy_zero.ptr())
            }
            None => (y, dy[0]),
        };
        let t = RnnTensors {
            x: x[0],
            y: y_seq,
            dx,
            dy: dy_seq,
            ..self.states()
        };
        // SAFETY: as in `forward`; dx holds the `[n][t][c]` gradient and
        // dy the output sequence's, both as the descriptors size them.
        unsafe { seq_major::backward(cx.gpu, &mut self.space, self.seq.as_ref(), &t, dx_wanted)? };
        self.grads_out(cx)
    }

    fn params(&mut self) -> Vec<&mut GpuParam> {
        self.params.iter_mut().collect()
    }

    fn params_ref(&self) -> Vec<&GpuParam> {
        self.params.iter().collect()
    }

    fn scratch_bytes(&self) -> usize {
        let last = self
            .last
            .as_ref()
            .map_or(0, |l| l.y.bytes() + l.dy_zero.bytes() + l.dhy.bytes());
        self.space.bytes()
            + self.seq.as_ref().map_or(0, SeqMajor::bytes)
            + [&self.zeros, &self.hy, &self.cy, &self.dhx, &self.dcx]
                .iter()
                .map(|b| b.bytes())
                .sum::<usize>()
            + last
            + self.dx_scratch.as_ref().map_or(0, DeviceBuffer::bytes)
    }

    fn kernels(&self) -> String {
        let d = &self.space.descs;
        let copy = match self.storage {
            Storage::F32 => "memcpy",
            Storage::F16 | Storage::Bf16 => "cast",
        };
        let last = if self.last.is_some() {
            " + hy 2-D copies"
        } else {
            ""
        };
        let picked = self
            .picked
            .as_ref()
            .map_or(String::new(), |p| format!(" [{p}]"));
        let layout = match self.seq {
            None => "batch-major in place",
            Some(_) => "time-major, transposed in and out",
        };
        format!(
            "cudnn RNN v8 {}{picked} ({}), {layout}{last}; \
             {n} {copy}s of the weights in and {n} of their gradients out per step",
            d.algo,
            d.dtype,
            n = self.pieces.len()
        )
    }
}

mod pick;
mod seq_major;

#[cfg(test)]
mod cudnn_tests;
#[cfg(test)]
mod tests;
