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
/// the layer outputs every step. The standard algorithm failing in the
/// network's layout is an error; any other candidate is skipped.
pub(super) fn fastest(
    gpu: &Gpu,
    shape: RnnShape,
    dtype: DType,
    states: &RnnTensors,
    sequences: bool,
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
    let seq = SeqMajor::new(gpu, shape, dtype, sequences)?;
    let mut best: Option<(RnnSpace, RnnForm, f64)> = None;
    let mut said = Vec::new();
    for form in FORMS {
        let layout = match form {
            RnnForm::NetworkSeqMajor => " time-major",
            _ => "",
        };
        let seq = (form == RnnForm::NetworkSeqMajor).then_some(&seq);
        for algo in CANDIDATES {
            let timed = RnnSpace::new(gpu, shape, dtype, algo, form).and_then(|mut space| {
                let ms = events.lowest_time(gpu, &mut || {
                    // SAFETY: the sequences are sized for `shape` in
                    // `dtype` above, the states by the caller; the space
                    // and `seq` were made for the same shape on this GPU.
                    unsafe {
                        seq_major::forward(gpu, &space, seq, &t)?;
                        seq_major::backward(gpu, &mut space, seq, &t, true)
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
                    let status = e.status.split(':').next().unwrap_or_default().trim();
                    said.push(format!("{algo}{layout} refused ({status})"));
                }
            }
        }
    }
    let (space, form, _) = best.expect("the standard algorithm ran or returned an error");
    Ok(Picked {
        space,
        seq: (form == RnnForm::NetworkSeqMajor).then_some(seq),
        said: format!("auto of {}", said.join(", ")),
    })
}
