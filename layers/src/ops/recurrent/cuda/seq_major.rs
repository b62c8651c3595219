//! [`RnnForm::NetworkSeqMajor`](super::super::cudnn_descs::RnnForm): the
//! network's batch-major sequences (`[n][t][c]`) transposed into cuDNN's
//! time-major packed ones (`[t][n][c]`, PyTorch's layout) and back around
//! the passes, one `cudnnTransformTensor` per tensor and way, and the
//! passes of either form behind one pair of calls.

use super::super::cudnn_descs::{strided_tensor, to_int};
use super::super::cudnn_space::{RnnSpace, RnnTensors};
use crate::backend::cuda::cudnn::TensorDesc;
use crate::backend::cuda::cudnn_ops::SCALARS;
use crate::backend::cuda::error::{check_cudnn, GpuResult};
use crate::backend::cuda::loader::cudnn_sys as sys;
use crate::backend::cuda::{DeviceBuffer, Gpu};
use crate::core::DType;
use cnnbench_kernels::rnn::RnnShape;
use cudarc::driver::sys::CUdeviceptr;

/// Two views of one logical `(t, n, c)` tensor: as the network holds it
/// (batch-major) and as cuDNN's time-major packed layout does.
pub(super) struct Transpose {
    batch_major: TensorDesc,
    seq_major: TensorDesc,
}

impl Transpose {
    /// The views of a `(t, n, c)` sequence tensor in `dtype`.
    pub(super) fn new(dtype: DType, t: usize, n: usize, c: usize) -> GpuResult<Self> {
        let call = "cudnnSetTensorNdDescriptor";
        let (t, n, c) = (
            to_int(call, "sequence length", t)?,
            to_int(call, "minibatch", n)?,
            to_int(call, "vector", c)?,
        );
        let dims = [t, n, c, 1];
        let tc = to_int(call, "a sequence's elements", t as usize * c as usize)?;
        let nc = to_int(call, "a step's elements", n as usize * c as usize)?;
        Ok(Transpose {
            batch_major: strided_tensor(dtype, &dims, &[c, tc, 1, 1])?,
            seq_major: strided_tensor(dtype, &dims, &[nc, c, 1, 1])?,
        })
    }

    /// `dst` (time-major) from `src` (batch-major), or the other way
    /// round when `to_seq` is false; on the GPU's stream.
    ///
    /// # Safety
    /// Both must hold the tensor in the dtype the views were made for, and
    /// not overlap.
    pub(super) unsafe fn run(
        &self,
        gpu: &Gpu,
        to_seq: bool,
        src: CUdeviceptr,
        dst: CUdeviceptr,
    ) -> GpuResult<()> {
        let (from, to) = match to_seq {
            true => (&self.batch_major, &self.seq_major),
            false => (&self.seq_major, &self.batch_major),
        };
        // SAFETY: valid handle and descriptors; the caller's buffers.
        check_cudnn("cudnnTransformTensor", unsafe {
            sys::cudnnTransformTensor(
                gpu.cudnn.0,
                SCALARS.one(),
                from.0,
                src as *const std::ffi::c_void,
                SCALARS.zero(),
                to.0,
                dst as *mut std::ffi::c_void,
            )
        })
    }
}

/// The time-major form's views and buffers: the input sequence (kept from
/// the forward for the backward) and its gradient, and when the layer
/// outputs its whole sequence, that sequence and its gradient (otherwise
/// cuDNN's output sequence is the layer's own buffer, in whatever layout).
pub(super) struct SeqMajor {
    x: Transpose,
    y: Transpose,
    xs: DeviceBuffer,
    dxs: DeviceBuffer,
    ys: Option<(DeviceBuffer, DeviceBuffer)>,
}

impl SeqMajor {
    /// For `shape` in `dtype`; `sequences`: whether the layer outputs
    /// every step.
    pub(super) fn new(
        gpu: &Gpu,
        shape: RnnShape,
        dtype: DType,
        sequences: bool,
    ) -> GpuResult<Self> {
        let s = &gpu.stream;
        let size = dtype.size_bytes();
        let (x_bytes, y_bytes) = (shape.x_len() * size, shape.y_len() * size);
        Ok(SeqMajor {
            x: Transpose::new(dtype, shape.t, shape.mb, shape.input)?,
            y: Transpose::new(dtype, shape.t, shape.mb, shape.output())?,
            xs: DeviceBuffer::alloc(s, x_bytes)?,
            dxs: DeviceBuffer::alloc(s, x_bytes)?,
            ys: match sequences {
                true => Some((
                    DeviceBuffer::alloc(s, y_bytes)?,
                    DeviceBuffer::alloc(s, y_bytes)?,
                )),
                false => None,
            },
        })
    }

    pub(super) fn bytes(&self) -> usize {
        self.xs.bytes()
            + self.dxs.bytes()
            + self.ys.as_ref().map_or(0, |(y, dy)| y.bytes() + dy.bytes())
    }
}

/// cuDNN's forward on the network's tensors `t` (batch-major `x`, and `y`
/// when the layer outputs its sequence), through `seq`'s buffers when the
/// space is time-major.
///
/// # Safety
/// As [`RnnSpace::forward`], `t` in the network's layout; `seq` made for
/// the space's shape and dtype.
pub(super) unsafe fn forward(
    gpu: &Gpu,
    space: &RnnSpace,
    seq: Option<&SeqMajor>,
    t: &RnnTensors,
) -> GpuResult<()> {
    // SAFETY: the caller's tensors and `seq`'s own buffers, sized alike.
    unsafe {
        let Some(s) = seq else {
            return space.forward(gpu, t);
        };
        s.x.run(gpu, true, t.x, s.xs.ptr())?;
        let y = s.ys.as_ref().map_or(t.y, |(y, _)| y.ptr());
        space.forward(
            gpu,
            &RnnTensors {
                x: s.xs.ptr(),
                y,
                ..*t
            },
        )?;
        if s.ys.is_some() {
            s.y.run(gpu, false, y, t.y)?;
        }
        Ok(())
    }
}

/// cuDNN's backward passes (data, then weights) on the network's tensors
/// `t`, through `seq`'s buffers when the space is time-major; `dx_wanted`:
/// whether `t.dx` must receive the input gradient (a time-major space
/// otherwise leaves it in its own buffer).
///
/// # Safety
/// As [`forward`], after it on the same tensors.
pub(super) unsafe fn backward(
    gpu: &Gpu,
    space: &mut RnnSpace,
    seq: Option<&SeqMajor>,
    t: &RnnTensors,
    dx_wanted: bool,
) -> GpuResult<()> {
    // SAFETY: as in `forward`.
    unsafe {
        let Some(s) = seq else {
            space.backward_data(gpu, t)?;
            return space.backward_weights(gpu, t);
        };
        let (y, dy) = match &s.ys {
            Some((y, dy)) => {
                s.y.run(gpu, true, t.dy, dy.ptr())?;
                (y.ptr(), dy.ptr())
            }
            None => (t.y, t.dy),
        };
        let ts = RnnTensors {
            x: s.xs.ptr(),
            y,
            dy,
            dx: s.dxs.ptr(),
            ..*t
        };
        space.backward_data(gpu, &ts)?;
        space.backward_weights(gpu, &ts)?;
        if dx_wanted {
            s.x.run(gpu, false, s.dxs.ptr(), t.dx)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cuda::no_gpu_for_test;
    use crate::backend::cuda::rnn_algo::RnnAlgo;
    use crate::ops::recurrent::cudnn_descs::RnnForm;
    use cnnbench_kernels::rnn::{Cell, Direction};

    fn floats(b: &[u8]) -> Vec<f32> {
        b.chunks_exact(4)
            .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }

    fn bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    /// The time-major form behind its transposes computes what the
    /// batch-major form computes in place: the output sequence, the final
    /// state, the input gradient and the weight gradient, from the same
    /// weights, inputs and output gradients (f32, standard algorithm, so
    /// that both spaces lay their weights out alike).
    #[test]
    fn gpu_time_major_form_matches_the_batch_major_one() {
        let gpu = match Gpu::open() {
            Ok(g) => g,
            Err(why) => {
                no_gpu_for_test(&why);
                return;
            }
        };
        for (cell, direction) in [
            (Cell::Lstm, Direction::Concat),
            (Cell::Gru, Direction::Left2Right),
        ] {
            let shape = RnnShape {
                cell,
                direction,
                layers: 1,
                t: 5,
                mb: 3,
                input: 7,
                hidden: 6,
            };
            let dtype = DType::F32;
            let s = &gpu.stream;
            let wave = |n: usize, k: f32| -> Vec<f32> {
                (0..n).map(|i| (i as f32 * k).sin() * 0.5).collect()
            };
            let up = |v: &[f32]| DeviceBuffer::from_bytes(s, &bytes(v)).unwrap();
            let x = up(&wave(shape.x_len(), 0.37));
            let dy = up(&wave(shape.y_len(), 0.71));
            let zeros = up(&vec![0.0; shape.state_len()]);
            let mut outs = Vec::new();
            for form in [RnnForm::Network, RnnForm::NetworkSeqMajor] {
                let mut space = RnnSpace::new(&gpu, shape, dtype, RnnAlgo::Standard, form).unwrap();
                let wb = space.weight_space().bytes() / 4;
                // The same weights in both: the same algorithm and bias
                // mode lay them out alike.
                space
                    .weight_space_mut()
                    .upload(&bytes(&wave(wb, 0.13)))
                    .unwrap();
                let seq = (form == RnnForm::NetworkSeqMajor)
                    .then(|| SeqMajor::new(&gpu, shape, dtype, true).unwrap());
                let alloc = |n: usize| DeviceBuffer::alloc(s, n * 4).unwrap();
                let (y, dx) = (alloc(shape.y_len()), alloc(shape.x_len()));
                let (hy, cy, dhx, dcx) = (
                    alloc(shape.state_len()),
                    alloc(shape.state_len()),
                    alloc(shape.state_len()),
                    alloc(shape.state_len()),
                );
                let t = RnnTensors {
                    x: x.ptr(),
                    y: y.ptr(),
                    dx: dx.ptr(),
                    dy: dy.ptr(),
                    hx: zeros.ptr(),
                    cx: zeros.ptr(),
                    dhy: zeros.ptr(),
                    dcy: zeros.ptr(),
                    hy: hy.ptr(),
                    cy: cy.ptr(),
                    dhx: dhx.ptr(),
                    dcx: dcx.ptr(),
                };
                // SAFETY: every tensor above is sized for `shape` in f32.
                unsafe {
                    forward(&gpu, &space, seq.as_ref(), &t).unwrap();
                    backward(&gpu, &mut space, seq.as_ref(), &t, true).unwrap();
                }
                gpu.synchronize().unwrap();
                let dw = floats(&space.dweight_space().download().unwrap());
                outs.push([
                    floats(&y.download().unwrap()),
                    floats(&hy.download().unwrap()),
                    floats(&dx.download().unwrap()),
                    dw,
                ]);
            }
            for (k, what) in ["y", "hy", "dx", "dw"].iter().enumerate() {
                let (a, b) = (&outs[0][k], &outs[1][k]);
                assert_eq!(a.len(), b.len(), "{cell:?} {what}");
                for (i, (p, q)) in a.iter().zip(b).enumerate() {
                    assert!(
                        (p - q).abs() <= 1e-5 * (1.0 + p.abs()),
                        "{cell:?} {what}[{i}]: batch-major {p}, time-major {q}"
                    );
                }
            }
        }
    }
}
