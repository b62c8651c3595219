//! A training step captured once as a CUDA graph and replayed
//! (`--cuda-graph`): the forward pass, the backward pass and, where asked,
//! the SGD update, enqueued on the benchmark stream under stream capture
//! and launched as one graph per step, so the host's launch overhead of
//! each kernel, cuDNN and cuBLAS call is paid once, at capture.
//!
//! What a replay must see change stays outside the graph: the step's seed
//! (dropout draws a new mask each step) is copied before each launch into
//! a device cell the captured dropout kernels read
//! ([`crate::backend::cuda::backend::GpuCtx::step_seed_at`]); a real-data
//! batch is copied into the input buffer before the launch
//! ([`Executor::take_batch`]), and the loss is read after it. Everything the
//! graph reads or writes is the network's own memory, allocated once
//! before the capture: the buffers, the layers' workspaces, and a cuBLAS
//! workspace set for the capture ([`StepGraph`] owns it and gives cuBLAS
//! its default back when dropped).
//!
//! Not captured: per-layer timing (events inside a graph are not timing)
//! and a data-parallel step's gradient exchange; the command line refuses
//! `--cuda-graph` with either.

use super::compare::Pair;
use super::cpu::CpuNet;
use super::exec::Executor;
use super::gpu::GpuNet;
use crate::backend::cuda::backend::Cuda;
use crate::backend::cuda::device::compute_capability;
use crate::backend::cuda::error::driver;
use crate::backend::cuda::{DeviceBuffer, Gpu, GpuError, GpuResult};
use cudarc::driver::sys::{CUevent_flags, CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{result, CudaEvent, CudaGraph};

/// The cuBLAS workspace of a captured step: cuBLAS's advice is 32 MiB on
/// Hopper and later, 4 MiB before.
pub fn cublas_workspace_bytes(compute_capability: (i32, i32)) -> usize {
    if compute_capability.0 >= 9 {
        32 << 20
    } else {
        4 << 20
    }
}

/// What the step was captured with: a graph replays exactly what it
/// captured, so a step asking for another update needs a new capture.
pub fn captured_as(graph: Option<&StepGraph<'_>>, update: Option<(f32, f32)>) -> bool {
    graph.is_some_and(|g| g.update == update)
}

/// The memory a captured step reads and writes besides the network's, and
/// cuBLAS's workspace setting that goes with it. Made before the capture
/// so that a failed capture also gives cuBLAS its default back.
struct Held<'g> {
    gpu: &'g Gpu,
    /// Where the replayed dropout kernels read the step's seed.
    seed_cell: DeviceBuffer,
    cublas_workspace: DeviceBuffer,
}

impl<'g> Held<'g> {
    fn new(gpu: &'g Gpu) -> GpuResult<Held<'g>> {
        let cc = compute_capability(&gpu.info.compute_capability);
        let mut seed_cell = DeviceBuffer::alloc(&gpu.stream, 8)?;
        seed_cell.fill_bytes(0)?;
        let cublas_workspace = DeviceBuffer::alloc(&gpu.stream, cublas_workspace_bytes(cc))?;
        // SAFETY: cuMemAlloc's memory is 256-byte aligned; `Drop` resets
        // cuBLAS before the buffer is freed.
        unsafe {
            gpu.cublas
                .set_workspace(cublas_workspace.as_void(), cublas_workspace.bytes())?
        };
        Ok(Held {
            gpu,
            seed_cell,
            cublas_workspace,
        })
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        // Nothing to report to: a failure leaves cuBLAS pointing at memory
        // freed below, which only the next GEMM would notice, in an error.
        let _ = self.gpu.synchronize();
        let _ = self.gpu.cublas.default_workspace(&self.gpu.stream);
    }
}

/// One captured training step of one network, replayed by
/// [`Executor::replay_step`]. It holds the network's device addresses: use
/// it only with the network that captured it, and capture again after
/// anything reallocates that network's buffers.
pub struct StepGraph<'g> {
    // Dropped first: the graph before the memory it uses.
    graph: CudaGraph,
    held: Held<'g>,
    /// The update captured with the step (learning rate, momentum).
    update: Option<(f32, f32)>,
    /// Around each launch (the seed's copy included).
    start: CudaEvent,
    end: CudaEvent,
}

impl StepGraph<'_> {
    /// Device bytes the captured step holds besides the network's (the
    /// cuBLAS workspace and the seed cell).
    pub fn bytes(&self) -> usize {
        self.held.cublas_workspace.bytes() + self.held.seed_cell.bytes()
    }

    /// The update the step was captured with.
    pub fn update(&self) -> Option<(f32, f32)> {
        self.update
    }
}

/// The one line a failed capture gives: the call, and what usually breaks
/// a capture.
fn capture_failed(e: GpuError) -> GpuError {
    GpuError {
        call: e.call,
        status: format!(
            "{} while capturing the step as a CUDA graph (a host wait, an allocation or an \
             uncapturable call inside the step)",
            e.status
        ),
        oom: e.oom,
    }
}

impl<'g> Executor<Cuda<'g>> {
    /// Captures one training step (forward, backward, and the update when
    /// `update` is given) as a CUDA graph, without running it; nothing
    /// else may use the stream meanwhile. An eager forward and backward
    /// pass comes first (no update: the weights stay as they are), so that
    /// every library's first-call setup is done outside the capture, and
    /// cuBLAS already works in the workspace the graph keeps.
    pub fn capture_step(&mut self, update: Option<(f32, f32)>) -> GpuResult<StepGraph<'g>> {
        if self.per_layer {
            return Err(GpuError::invalid(
                "capture a CUDA graph",
                "per-layer timing cannot run inside a captured step".into(),
            ));
        }
        let gpu = self.backend.gpu;
        let held = Held::new(gpu)?;
        let event = || {
            gpu.ctx
                .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(|e| driver("cuEventCreate", e))
        };
        let (start, end) = (event()?, event()?);
        self.forward()?;
        self.backward()?;
        // Whatever ran before has finished: the capture starts clean.
        gpu.synchronize()?;
        self.cx.step_seed_at = held.seed_cell.ptr();
        let begun = gpu
            .stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(|e| driver("cuStreamBeginCapture", e));
        let enqueued = begun.and_then(|_| self.enqueue_step(update));
        // Always ended, so that the stream leaves capture mode even when a
        // call inside failed.
        let ended = gpu.stream.end_capture(CUgraphInstantiate_flags(0));
        self.cx.step_seed_at = 0;
        enqueued.map_err(capture_failed)?;
        let graph = ended
            .map_err(|e| capture_failed(driver("cuStreamEndCapture/cuGraphInstantiate", e)))?
            .ok_or_else(|| {
                GpuError::invalid("cuStreamEndCapture", "the captured step is empty".into())
            })?;
        graph.upload().map_err(|e| driver("cuGraphUpload", e))?;
        Ok(StepGraph {
            graph,
            held,
            update,
            start,
            end,
        })
    }

    /// The step's work in order, as an eager step enqueues it (without its
    /// phase events).
    fn enqueue_step(&mut self, update: Option<(f32, f32)>) -> GpuResult<()> {
        self.forward()?;
        self.backward()?;
        if let Some((lr, m)) = update {
            self.sgd_update(lr, m)?;
        }
        Ok(())
    }

    /// The captured step once, at the network's current step (its seed):
    /// the seed copied into the graph's cell, the graph launched, and the
    /// GPU milliseconds from before the copy to the launch's end (waits
    /// for the device).
    pub fn replay_step(&mut self, g: &mut StepGraph<'g>) -> GpuResult<f64> {
        let gpu = self.backend.gpu;
        let seed = self.step_seed().to_le_bytes();
        let stream = &gpu.stream;
        g.start
            .record(stream)
            .map_err(|e| driver("cuEventRecord", e))?;
        // SAFETY: the cell holds 8 bytes; a copy from pageable memory is
        // staged before the call returns, so `seed` may go after it.
        unsafe {
            result::memcpy_htod_async(g.held.seed_cell.ptr(), &seed[..], stream.cu_stream())
                .map_err(|e| driver("cuMemcpyHtoDAsync", e))?;
        }
        g.graph.launch().map_err(|e| driver("cuGraphLaunch", e))?;
        g.end
            .record(stream)
            .map_err(|e| driver("cuEventRecord", e))?;
        g.end
            .synchronize()
            .map_err(|e| driver("cuEventSynchronize", e))?;
        let ms = g
            .start
            .elapsed_ms(&g.end)
            .map_err(|e| driver("cuEventElapsedTime", e))?;
        Ok(f64::from(ms))
    }

    /// One training step through a CUDA graph, as [`Executor::step`] is
    /// one eager step: the next step's seed, then the graph in `slot`
    /// replayed, captured first when `slot` holds none or one of another
    /// update. The GPU milliseconds of the whole step (its phases are not
    /// observable apart inside a graph).
    pub fn graph_step(
        &mut self,
        slot: &mut Option<StepGraph<'g>>,
        update: Option<(f32, f32)>,
    ) -> GpuResult<f64> {
        if !captured_as(slot.as_ref(), update) {
            // The old graph and its cuBLAS workspace go before the new
            // capture sets its own.
            *slot = None;
            *slot = Some(self.capture_step(update)?);
        }
        self.next_step();
        let g = slot.as_mut().expect("captured above");
        self.replay_step(g)
    }
}

/// Every parameter gradient of `dev`'s last backward pass, by name.
fn all_grads(dev: &GpuNet<'_>) -> GpuResult<Vec<(String, Vec<f32>)>> {
    let mut out = Vec::new();
    for i in 1..dev.graph.nodes.len() {
        out.extend(dev.layer_grads(i)?);
    }
    Ok(out)
}

/// The captured step checked (`check --device gpu --cuda-graph` and the
/// GPU tests on that path): a step without update captured on `dev` and
/// replayed at its current step, its loss against `reference`'s (which ran
/// the same step: same weights, batch and dropout masks) and each
/// parameter gradient against an eager step's at the same seed on the
/// same device (the eager layers are checked against the CPU's layer by
/// layer, [`super::compare`]); then the next step, whose new seed the
/// replay must read, its loss and every gradient together against the
/// eager step's. Leaves `dev` one step further on.
pub fn replayed_against_eager(dev: &mut GpuNet<'_>, reference: &CpuNet) -> GpuResult<Vec<Pair>> {
    let mut g = dev.capture_step(None)?;
    dev.replay_step(&mut g)?;
    let mut out = vec![Pair {
        tensor: "loss (CUDA graph, end to end)".into(),
        got: vec![dev.loss()?],
        want: vec![reference.loss()?],
    }];
    let replayed = all_grads(dev)?;
    dev.forward()?;
    dev.backward()?;
    for ((name, got), (_, want)) in replayed.into_iter().zip(all_grads(dev)?) {
        out.push(Pair {
            tensor: format!("{name}.grad (CUDA graph against eager)"),
            got,
            want,
        });
    }
    dev.next_step();
    dev.replay_step(&mut g)?;
    let (loss, grads) = (dev.loss()?, all_grads(dev)?);
    dev.forward()?;
    dev.backward()?;
    out.push(Pair {
        tensor: "loss (CUDA graph against eager, next step)".into(),
        got: vec![loss],
        want: vec![dev.loss()?],
    });
    let flat = |v: Vec<(String, Vec<f32>)>| v.into_iter().flat_map(|(_, g)| g).collect();
    out.push(Pair {
        tensor: "every gradient (CUDA graph against eager, next step)".into(),
        got: flat(grads),
        want: flat(all_grads(dev)?),
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cublas_gets_hoppers_workspace_from_sm90_on() {
        assert_eq!(cublas_workspace_bytes((8, 0)), 4 << 20);
        assert_eq!(cublas_workspace_bytes((8, 9)), 4 << 20);
        assert_eq!(cublas_workspace_bytes((9, 0)), 32 << 20);
        assert_eq!(cublas_workspace_bytes((12, 0)), 32 << 20);
    }

    #[test]
    fn a_failed_capture_says_so_in_one_line() {
        let e = capture_failed(GpuError {
            call: "cuMemAlloc",
            status: "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED".into(),
            oom: false,
        });
        let line = e.to_string();
        assert!(
            line.starts_with(
                "cuMemAlloc failed: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED while capturing"
            ),
            "{line}"
        );
        assert!(!line.contains('\n'));
    }

    #[test]
    fn no_graph_is_captured_as_anything() {
        assert!(!captured_as(None, None));
        assert!(!captured_as(None, Some((0.01, 0.9))));
    }
}
