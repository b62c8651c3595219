//! The cuDNN side of one RNN problem besides its tensors ([`RnnSpace`]):
//! the weight space, workspace and reserve, and the three passes that use
//! them, shared by `cnnbench rnn`'s problem ([`super::cudnn_problem`]) and
//! the network's recurrent layer ([`super::cuda`]).

use super::cudnn_descs::{empty_tensor_desc, invalid, to_int, RnnDescs, RnnForm};
use super::cudnn_weights::{lin_layers_in, packed_dims, Slot};
use crate::backend::cuda::error::{check_cudnn, GpuResult};
use crate::backend::cuda::loader::cudnn_sys as sys;
use crate::backend::cuda::rnn_algo::RnnAlgo;
use crate::backend::cuda::{DeviceBuffer, Gpu};
use crate::core::DType;
use cnnbench_kernels::rnn::{Cell, RnnShape, Weights};
use cudarc::driver::sys::CUdeviceptr;
use std::ffi::c_void;

/// Device pointers of the passes' tensors, in the run's dtype and the
/// descriptors' layouts; each pass reads the ones its cuDNN call takes.
/// The cell states (`cx`, `cy`, `dcx`, `dcy`) are the LSTM's: the other
/// cells pass NULL whatever is here.
#[derive(Clone, Copy, Debug, Default)]
pub struct RnnTensors {
    pub x: CUdeviceptr,
    pub y: CUdeviceptr,
    pub hx: CUdeviceptr,
    pub hy: CUdeviceptr,
    pub cx: CUdeviceptr,
    pub cy: CUdeviceptr,
    pub dx: CUdeviceptr,
    pub dy: CUdeviceptr,
    pub dhx: CUdeviceptr,
    pub dhy: CUdeviceptr,
    pub dcx: CUdeviceptr,
    pub dcy: CUdeviceptr,
}

fn ptr(p: CUdeviceptr) -> *mut c_void {
    p as *mut c_void
}

/// What the passes of one RNN problem need besides its tensors: the
/// descriptors, cuDNN's weight space and its gradient, the workspace and
/// reserve, the sequence lengths on the device, and every weight's place,
/// all sized and made once; the passes only enqueue work on the stream of
/// the GPU they are given, which must be the one the space was made on.
pub struct RnnSpace {
    pub descs: RnnDescs,
    slots: Vec<Slot>,
    weight_space: DeviceBuffer,
    dweight_space: DeviceBuffer,
    workspace: DeviceBuffer,
    reserve: DeviceBuffer,
    /// `t` per sequence (int32), which the passes read on the device.
    dev_seq_lengths: DeviceBuffer,
}

impl RnnSpace {
    /// Builds the descriptors, sizes the weight space, workspace and
    /// reserve once (forward mode training, as the backward needs the
    /// reserve), allocates them, and finds each weight's place in the
    /// weight space. The weights start at zero (a bias `form` does not
    /// hold stays so), their gradients as NaN.
    pub fn new(
        gpu: &Gpu,
        shape: RnnShape,
        dtype: DType,
        algo: RnnAlgo,
        form: RnnForm,
    ) -> GpuResult<Self> {
        let descs = RnnDescs::with_form(shape, dtype, algo, form)?;
        let handle = gpu.cudnn.0;
        if algo == RnnAlgo::PersistDynamic {
            let mb = to_int("cudnnBuildRNNDynamic", "minibatch", shape.mb)?;
            // SAFETY: valid handle and set descriptor; compiles the
            // persistent kernel for this minibatch before any pass.
            check_cudnn("cudnnBuildRNNDynamic", unsafe {
                sys::cudnnBuildRNNDynamic(handle, descs.rnn.0, mb)
            })?;
        }
        let mut weight_bytes = 0usize;
        // SAFETY: valid handle and descriptor; out-pointer to a local.
        check_cudnn("cudnnGetRNNWeightSpaceSize", unsafe {
            sys::cudnnGetRNNWeightSpaceSize(handle, descs.rnn.0, &mut weight_bytes)
        })?;
        let (mut work_bytes, mut reserve_bytes) = (0usize, 0usize);
        // SAFETY: valid handle and descriptors; out-pointers to locals.
        check_cudnn("cudnnGetRNNTempSpaceSizes", unsafe {
            sys::cudnnGetRNNTempSpaceSizes(
                handle,
                descs.rnn.0,
                sys::cudnnForwardMode_t::CUDNN_FWD_MODE_TRAINING,
                descs.x.0,
                &mut work_bytes,
                &mut reserve_bytes,
            )
        })?;
        let s = &gpu.stream;
        let seq: Vec<u8> = descs
            .seq_lengths
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        let mut space = RnnSpace {
            slots: Vec::new(),
            weight_space: DeviceBuffer::alloc(s, weight_bytes)?,
            dweight_space: DeviceBuffer::alloc(s, weight_bytes)?,
            workspace: DeviceBuffer::alloc(s, work_bytes)?,
            reserve: DeviceBuffer::alloc(s, reserve_bytes)?,
            dev_seq_lengths: DeviceBuffer::from_bytes(s, &seq)?,
            descs,
        };
        space.slots = space.find_slots(gpu)?;
        if weight_bytes > 0 {
            space.weight_space.fill_bytes(0)?;
            space.dweight_space.fill_bytes(0xFF)?;
        }
        Ok(space)
    }

    /// Asks cuDNN where each matrix and bias of [`lin_layers_in`] lies in
    /// the weight space, and checks that it holds them in the shapes
    /// expected (a mismatch would scramble the weights silently). A bias
    /// the form expects must be there: in the network's forms this is
    /// where cuDNN's input bias (its only one with the standard algorithm)
    /// is confirmed to be the input GEMM's.
    fn find_slots(&self, gpu: &Gpu) -> GpuResult<Vec<Slot>> {
        let call = "cudnnGetRNNWeightParams";
        let (m_desc, b_desc) = (empty_tensor_desc()?, empty_tensor_desc()?);
        let base = self.weight_space.ptr() as usize;
        let space = self.weight_space.bytes();
        let size = self.descs.dtype.size_bytes();
        let mut slots = Vec::new();
        for lin in lin_layers_in(&self.descs.shape, self.descs.form) {
            let (mut m_addr, mut b_addr) = (std::ptr::null_mut(), std::ptr::null_mut());
            let where_ = format!("pseudo-layer {} linLayerID {}", lin.pseudo_layer, lin.lin);
            // SAFETY: valid handle, descriptor and tensor descriptors; the
            // weight space is the allocation of `space` bytes; cuDNN only
            // computes addresses inside it (nothing is read on the host).
            check_cudnn(call, unsafe {
                sys::cudnnGetRNNWeightParams(
                    gpu.cudnn.0,
                    self.descs.rnn.0,
                    to_int(call, "pseudo-layer", lin.pseudo_layer)?,
                    space,
                    self.weight_space.as_void(),
                    to_int(call, "linLayerID", lin.lin)?,
                    m_desc.0,
                    &mut m_addr,
                    b_desc.0,
                    &mut b_addr,
                )
            })?;
            let m_dims = packed_dims(&m_desc)?;
            let m_elems: usize = m_dims.iter().product();
            // Where no bias is expected, cuDNN returns a NULL address and
            // may leave the descriptor as it was: it is not read.
            let b_elems: usize = if lin.bias > 0 {
                packed_dims(&b_desc)?.iter().product()
            } else {
                0
            };
            if m_elems != lin.rows * lin.cols
                || m_dims.last() != Some(&lin.cols)
                || b_elems != lin.bias
            {
                return Err(invalid(
                    call,
                    format!(
                        "{where_}: cuDNN holds a {m_dims:?} matrix and a bias of {b_elems}; \
                         expected [{}, {}] and {}",
                        lin.rows, lin.cols, lin.bias
                    ),
                ));
            }
            let offset = |addr: *mut c_void, elems: usize| -> GpuResult<usize> {
                let a = addr as usize;
                match a.checked_sub(base) {
                    Some(o) if !addr.is_null() && o + elems * size <= space => Ok(o),
                    _ => Err(invalid(
                        call,
                        format!("{where_}: an address outside the weight space"),
                    )),
                }
            };
            slots.push(Slot {
                lin,
                matrix: offset(m_addr, m_elems)?,
                bias: match lin.bias {
                    0 => None,
                    b => Some(offset(b_addr, b)?),
                },
            });
        }
        Ok(slots)
    }

    /// Every weight's place, in [`lin_layers_in`]'s order.
    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }

    /// cuDNN's weight space (the run's dtype).
    pub fn weight_space(&self) -> &DeviceBuffer {
        &self.weight_space
    }

    /// The weight space, for tests that fill it.
    #[cfg(test)]
    pub(crate) fn weight_space_mut(&mut self) -> &mut DeviceBuffer {
        &mut self.weight_space
    }

    /// The weight gradients, laid out as the weight space.
    pub fn dweight_space(&self) -> &DeviceBuffer {
        &self.dweight_space
    }

    /// Writes PyTorch-layout weights (one [`Weights`] per layer and
    /// direction), converted to the run's dtype, into the weight space
    /// (biases the form does not hold are left out).
    pub fn set_weights(&mut self, weights: &[Weights]) -> GpuResult<()> {
        let call = "set RNN weights";
        let shape = self.descs.shape;
        if weights.len() != shape.sets() {
            return Err(invalid(
                call,
                format!("{} weight sets for {}", weights.len(), shape.sets()),
            ));
        }
        for (s, w) in weights.iter().enumerate() {
            for (t, d) in w.tensors().iter().zip(shape.set_shapes(s)) {
                let want: usize = d.iter().product();
                if t.len() != want {
                    return Err(invalid(
                        call,
                        format!("set {s}: a tensor of {} values for {d:?}", t.len()),
                    ));
                }
            }
        }
        let dtype = self.descs.dtype;
        let size = dtype.size_bytes();
        let mut image = vec![0u8; self.weight_space.bytes()];
        for slot in &self.slots {
            let w = &weights[slot.lin.pseudo_layer];
            let (m, b) = slot.lin.source();
            let (wm, wb) = if slot.lin.recurrent {
                (&w.w_hh, &w.b_hh)
            } else {
                (&w.w_ih, &w.b_ih)
            };
            let mb = dtype.encode(&wm[m.clone()]);
            image[slot.matrix..][..m.len() * size].copy_from_slice(&mb);
            if let Some(at) = slot.bias {
                let bb = dtype.encode(&wb[b.clone()]);
                image[at..][..b.len() * size].copy_from_slice(&bb);
            }
        }
        self.weight_space.upload(&image)
    }

    /// The cell-state pointers: the LSTM's, NULL for the other cells
    /// (cuDNN ignores `c` for them).
    fn c(&self, p: CUdeviceptr) -> *mut c_void {
        if self.descs.shape.cell == Cell::Lstm {
            ptr(p)
        } else {
            std::ptr::null_mut()
        }
    }

    /// Enqueues the forward pass in training mode (it fills the reserve
    /// space the backward passes read): `y`, `hy` and (LSTM) `cy` from
    /// `x`, `hx` and (LSTM) `cx`.
    ///
    /// # Safety
    ///
    /// `gpu` must be the one the space was made on. Each pointer the call
    /// reads or writes must hold its tensor as the descriptors size it
    /// (sequences `t·mb·vector`, states `layers·dirs·mb·h` elements of the
    /// dtype), live until the work completes on the stream, the outputs
    /// overlapping nothing.
    pub unsafe fn forward(&self, gpu: &Gpu, t: &RnnTensors) -> GpuResult<()> {
        let d = &self.descs;
        // SAFETY: the caller's tensors; every buffer of ours was sized
        // from these descriptors and cuDNN's size queries in `new`; the
        // sequence lengths are on the device; the work is ordered on the
        // handle's stream.
        check_cudnn("cudnnRNNForward", unsafe {
            sys::cudnnRNNForward(
                gpu.cudnn.0,
                d.rnn.0,
                sys::cudnnForwardMode_t::CUDNN_FWD_MODE_TRAINING,
                self.dev_seq_lengths.ptr() as *const i32,
                d.x.0,
                ptr(t.x),
                d.y.0,
                ptr(t.y),
                d.h.0,
                ptr(t.hx),
                ptr(t.hy),
                d.h.0,
                self.c(t.cx),
                self.c(t.cy),
                self.weight_space.bytes(),
                self.weight_space.as_void(),
                self.workspace.bytes(),
                self.workspace.as_void(),
                self.reserve.bytes(),
                self.reserve.as_void(),
            )
        })
    }

    /// Enqueues the backward pass for data, after [`RnnSpace::forward`]
    /// on the same `x`, `y`, `hx` and `cx`: `dx`, `dhx` and (LSTM) `dcx`
    /// from `dy`, `dhy`, `dcy`.
    ///
    /// # Safety
    ///
    /// As for [`RnnSpace::forward`].
    pub unsafe fn backward_data(&self, gpu: &Gpu, t: &RnnTensors) -> GpuResult<()> {
        let d = &self.descs;
        // SAFETY: as in `forward`; the reserve holds the forward's state.
        check_cudnn("cudnnRNNBackwardData_v8", unsafe {
            sys::cudnnRNNBackwardData_v8(
                gpu.cudnn.0,
                d.rnn.0,
                self.dev_seq_lengths.ptr() as *const i32,
                d.y.0,
                ptr(t.y),
                ptr(t.dy),
                d.x.0,
                ptr(t.dx),
                d.h.0,
                ptr(t.hx),
                ptr(t.dhy),
                ptr(t.dhx),
                d.h.0,
                self.c(t.cx),
                self.c(t.dcy),
                self.c(t.dcx),
                self.weight_space.bytes(),
                self.weight_space.as_void(),
                self.workspace.bytes(),
                self.workspace.as_void(),
                self.reserve.bytes(),
                self.reserve.as_void(),
            )
        })
    }

    /// Enqueues the weight gradients into the gradient space, after
    /// [`RnnSpace::backward_data`] (which leaves what they need in the
    /// reserve), from `x`, `hx` and `y`. cuDNN documents
    /// `CUDNN_WGRAD_MODE_ADD` as the only mode `cudnnRNNBackwardWeights_v8`
    /// supports, so the gradient space is zeroed first (a memset on the
    /// stream, as PyTorch and TensorFlow do) and the gradients added to it:
    /// the same result as overwriting.
    ///
    /// # Safety
    ///
    /// As for [`RnnSpace::forward`].
    pub unsafe fn backward_weights(&mut self, gpu: &Gpu, t: &RnnTensors) -> GpuResult<()> {
        self.dweight_space.fill_bytes(0)?;
        let d = &self.descs;
        // SAFETY: as in `forward`.
        check_cudnn("cudnnRNNBackwardWeights_v8", unsafe {
            sys::cudnnRNNBackwardWeights_v8(
                gpu.cudnn.0,
                d.rnn.0,
                sys::cudnnWgradMode_t::CUDNN_WGRAD_MODE_ADD,
                self.dev_seq_lengths.ptr() as *const i32,
                d.x.0,
                ptr(t.x),
                d.h.0,
                ptr(t.hx),
                d.y.0,
                ptr(t.y),
                self.dweight_space.bytes(),
                self.dweight_space.as_void(),
                self.workspace.bytes(),
                self.workspace.as_void(),
                self.reserve.bytes(),
                self.reserve.as_void(),
            )
        })
    }

    /// The weight gradients in PyTorch's layout, as f32 (zero where the
    /// form holds no bias).
    pub fn download_weight_grads(&self) -> GpuResult<Vec<Weights>> {
        Ok(self.unpack(&self.dweight_space.download()?))
    }

    /// The weights as cuDNN holds them, back in PyTorch's layout.
    pub fn download_weights(&self) -> GpuResult<Vec<Weights>> {
        Ok(self.unpack(&self.weight_space.download()?))
    }

    /// A weight space's bytes (weights or gradients, laid out alike) as
    /// PyTorch-layout f32 sets.
    fn unpack(&self, space: &[u8]) -> Vec<Weights> {
        let shape = &self.descs.shape;
        let dtype = self.descs.dtype;
        let size = dtype.size_bytes();
        let mut out: Vec<Weights> = (0..shape.sets())
            .map(|s| Weights::zeros(shape, s))
            .collect();
        for slot in &self.slots {
            let w = &mut out[slot.lin.pseudo_layer];
            let (m, b) = slot.lin.source();
            let (wm, wb) = if slot.lin.recurrent {
                (&mut w.w_hh, &mut w.b_hh)
            } else {
                (&mut w.w_ih, &mut w.b_ih)
            };
            let mbytes = &space[slot.matrix..][..m.len() * size];
            wm[m].copy_from_slice(&dtype.decode(mbytes));
            if let Some(at) = slot.bias {
                let bbytes = &space[at..][..b.len() * size];
                wb[b].copy_from_slice(&dtype.decode(bbytes));
            }
        }
        out
    }

    /// Bytes of the weight space (its gradient is as large), the workspace
    /// and the reserve space, as cuDNN sized them.
    pub fn sizes(&self) -> (usize, usize, usize) {
        (
            self.weight_space.bytes(),
            self.workspace.bytes(),
            self.reserve.bytes(),
        )
    }

    /// Every byte held on the device.
    pub fn bytes(&self) -> usize {
        2 * self.weight_space.bytes()
            + self.workspace.bytes()
            + self.reserve.bytes()
            + self.dev_seq_lengths.bytes()
    }
}
