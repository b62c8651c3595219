//! `--rnn-algo auto`: per layer, the fastest of cuDNN's recurrence
//! algorithms that accept the layer, each timed on its shape while
//! planning (never in a timed loop), as `--api auto` times the
//! convolutions' candidates.

use super::super::cudnn_descs::RnnForm;
use super::super::cudnn_space::{RnnSpace, RnnTensors};
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

/// A byte every element of the timing inputs is filled with: small, normal
/// values in every dtype (f32 and bf16 about 0.0115, f16 about 1.06).
const FILL: u8 = 0x3C;

/// The space of the fastest candidate for `shape` in `dtype`, and one line
/// saying what each candidate did (its time, or why cuDNN refused it).
/// `states` gives the state tensors (`hx`, `cx`, `dhy`, `dcy` zeros; `hy`,
/// `cy`, `dhx`, `dcx` writable); the sequences are scratch made here.
/// The standard algorithm failing is an error; any other is skipped.
pub(super) fn fastest_space(
    gpu: &Gpu,
    shape: RnnShape,
    dtype: DType,
    states: &RnnTensors,
    (x_bytes, y_bytes): (usize, usize),
) -> GpuResult<(RnnSpace, String)> {
    let s = &gpu.stream;
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
    let mut best: Option<(RnnSpace, f64)> = None;
    let mut said = Vec::new();
    for algo in CANDIDATES {
        let timed =
            RnnSpace::new(gpu, shape, dtype, algo, RnnForm::Network).and_then(|mut space| {
                let ms = events.lowest_time(gpu, &mut || {
                    // SAFETY: the sequences are sized for `shape` in `dtype`
                    // above, the states by the caller; the space was made for
                    // the same shape on this GPU.
                    unsafe {
                        space.forward(gpu, &t)?;
                        space.backward_data(gpu, &t)?;
                        space.backward_weights(gpu, &t)
                    }
                })?;
                Ok((space, ms))
            });
        match timed {
            Ok((space, ms)) => {
                said.push(format!("{algo} {ms:.3} ms"));
                if best.as_ref().is_none_or(|(_, b)| ms < *b) {
                    best = Some((space, ms));
                }
            }
            Err(e) if algo == RnnAlgo::Standard => return Err(e),
            Err(e) => {
                let status = e.status.split(':').next().unwrap_or_default().trim();
                said.push(format!("{algo} refused ({status})"));
            }
        }
    }
    let (space, _) = best.expect("the standard algorithm ran or returned an error");
    Ok((space, format!("auto of {}", said.join(", "))))
}
