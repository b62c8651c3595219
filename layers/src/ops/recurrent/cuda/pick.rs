//! `--rnn-algo auto`: per layer, the fastest of cuDNN's recurrence
//! algorithms and the two sequence layouts that cuDNN accepts for the
//! layer, each timed on its shape while planning (never in a timed loop),
//! as `--api auto` times the convolutions' candidates.

use super::super::cudnn_descs::RnnForm;
use super::super::cudnn_space::{RnnSpace, RnnTensors};
use super::seq_major::{self, SeqMajor};
use crate::backend::cuda::rnn_algo::RnnAlgo;
use crate::backend::cuda::{DeviceBuffer, Gpu, GpuResult};
use crate::core::DType;
use cnnbench_kernels::rnn::RnnShape;

/// The algorithms timed, in this order (a tie keeps the earlier): the
/// standard one, then the persistent kernels that keep the recurrent
/// weights on chip. PyTorch picks persist-static-small-h for LSTMs and
/// GRUs of hidden size 128 and less (192 forward), and persist-static for
/// f16 at small batches. persist-dynamic is left out: it compiles its
/// kernel while planning, and PyTorch never picks it.
pub(super) const CANDIDATES: [RnnAlgo; 3] = [
    RnnAlgo::Standard,
    RnnAlgo::PersistStaticSmallH,
    RnnAlgo::PersistStatic,
];

/// Each algorithm on the network's batch-major sequences in place, then
/// on time-major ones behind transposes (PyTorch's layout).
const FORMS: [RnnForm; 2] = [RnnForm::Network, RnnForm::NetworkSeqMajor];

/// A byte every element of the timing inputs is filled with: small, normal
/// values in every dtype (f32 and bf16 about 0.0115, f16 about 1.06).
const FILL: u8 = 0x3C;

/// What the fastest candidate needs: its space, the time-major form's
/// buffers where it is that form, and one line saying what each candidate
/// did (its time, or why cuDNN refused it).
pub(super) struct Picked {
    pub space: RnnSpace,
    pub seq: Option<SeqMajor>,
    pub said: String,
}

/// The fastest candidate for `shape` in `dtype`. `states` gives the state
/// tensors (`hx`, `cx`, `dhy`, `dcy` zeros; `hy`, `cy`, `dhx`, `dcx`
/// writable); the sequences are scratch made here; `sequences`: whether
/// the layer outputs every step; `input_grad`: whether the network wants
/// the input's gradient (a time-major candidate transposes it only then).
/// The standard algorithm failing in the network's layout is an error; any
/// other candidate that cuDNN refuses, or that runs out of memory, is
/// skipped, unless the GPU then fails to synchronise (an error from a
/// kernel poisons the context: that is an error too).
pub(super) fn fastest(
    gpu: &Gpu,
    shape: RnnShape,
    dtype: DType,
    states: &RnnTensors,
    sequences: bool,
    input_grad: bool,
) -> GpuResult<Picked> {
    let s = &gpu.stream;
    let size = dtype.size_bytes();
    let (x_bytes, y_bytes) = (shape.x_len() * size, shape.y_len() * size);
    let filled = |b: usize| -> GpuResult<DeviceBuffer> {
        let mut buf = DeviceBuffer::alloc(s, b)?;
        buf.fill_bytes(FILL)?;
        Ok(buf)
    };
    let (x, dy) = (filled(x_bytes)?, filled(y_bytes)?);
    let (y, dx) = (
        DeviceBuffer::alloc(s, y_bytes)?,
        DeviceBuffer::alloc(s, x_bytes)?,
    );
    let t = RnnTensors {
        x: x.ptr(),
        y: y.ptr(),
        dx: dx.ptr(),
        dy: dy.ptr(),
        ..*states
    };
    let events = gpu.event_pair()?;
    let mut said = Vec::new();
    // The time-major form's buffers; without them only the batch-major
    // candidates run.
    let seq = SeqMajor::new(gpu, shape, dtype, sequences)
        .map_err(|e| said.push(format!("time-major refused ({}: {})", e.call, e.status)))
        .ok();
    let mut best: Option<(RnnSpace, RnnForm, f64)> = None;
    for form in FORMS {
        let layout = match form {
            RnnForm::NetworkSeqMajor => " time-major",
            _ => "",
        };
        let seq = match form {
            RnnForm::NetworkSeqMajor => match &seq {
                Some(s) => Some(s),
                None => continue,
            },
            _ => None,
        };
        for algo in CANDIDATES {
            let timed = RnnSpace::new(gpu, shape, dtype, algo, form).and_then(|mut space| {
                let ms = events.lowest_time(&mut || {
                    // SAFETY: the sequences are sized for `shape` in
                    // `dtype` above, the states by the caller; the space
                    // and `seq` were made for the same shape on this GPU.
                    unsafe {
                        seq_major::forward(gpu, &space, seq, &t)?;
                        seq_major::backward(gpu, &mut space, seq, &t, input_grad)
                    }
                })?;
                Ok((space, ms))
            });
            match timed {
                Ok((space, ms)) => {
                    said.push(format!("{algo}{layout} {ms:.3} ms"));
                    if best.as_ref().is_none_or(|(_, _, b)| ms < *b) {
                        best = Some((space, form, ms));
                    }
                }
                Err(e) if algo == RnnAlgo::Standard && form == RnnForm::Network => return Err(e),
                Err(e) => {
                    // A refusal leaves nothing behind; a failed kernel
                    // would leave the context unusable.
                    gpu.synchronize()?;
                    let status = e.status.split(':').next().unwrap_or_default().trim();
                    said.push(format!("{algo}{layout} refused ({}: {status})", e.call));
                }
            }
        }
    }
    let (space, form, _) = best.expect("the standard algorithm ran or returned an error");
    Ok(Picked {
        space,
        seq: seq.filter(|_| form == RnnForm::NetworkSeqMajor),
        said: format!("auto of {}", said.join(", ")),
    })
}
