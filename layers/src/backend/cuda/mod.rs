//! The CUDA backend. Every call into the driver, cuDNN and cuBLAS goes
//! through this module; each status is checked and turned into a
//! [`GpuError`] that names the call. The libraries are loaded at run time
//! (cudarc's dynamic loading), so the binary builds and runs without CUDA:
//! [`Gpu::open`] says in one line what is missing.

pub mod backend;
pub mod bandwidth;
pub mod cublas;
pub mod cudnn;
pub mod cudnn_graph;
pub mod cudnn_ops;
pub mod device;
#[cfg(test)]
pub mod emu;
pub(crate) mod error;
pub mod kernel_name;
pub mod loader;
pub mod memory;
pub mod nccl;
pub mod nvrtc;
pub mod paths;
mod probe;
pub mod rnn_algo;
pub mod stage;

pub use device::{DeviceInfo, Peak};
pub use error::{check_cudnn, check_driver as error_driver, GpuError, GpuResult};
pub use memory::DeviceBuffer;
pub use paths::{ConvApi, GpuPaths, RnnChoice};
pub use probe::{gpu_lib_for_test, no_gpu_for_test, nvrtc_missing, Presence};

use crate::core::DType;
use cudarc::driver::sys::{CUdevice_attribute as Attr, CUevent_flags};
use cudarc::driver::{CudaContext, CudaEvent, CudaStream};
use error::driver;
use std::sync::Arc;

/// The oldest driver (as a CUDA version, 12.8) with every entry point the
/// bindings load; older ones lack `cuEventElapsedTime_v2`, and a missing
/// symbol would panic on first use instead of failing here.
pub const MIN_DRIVER_CUDA: i32 = 12080;

/// One GPU, ready for benchmarks: a context, one non-blocking stream, and
/// cuDNN and cuBLAS handles bound to that stream.
pub struct Gpu {
    // Fields drop in this order: the handles before the stream they use,
    // the stream before its context.
    pub cudnn: cudnn::CudnnHandle,
    pub cublas: cublas::CublasHandle,
    pub info: DeviceInfo,
    pub stream: Arc<CudaStream>,
    pub ctx: Arc<CudaContext>,
}

impl Gpu {
    /// Opens device 0, or says in one line why no GPU is usable.
    pub fn open() -> Result<Gpu, String> {
        Gpu::open_ordinal(0)
    }

    /// Opens device `ordinal` (of those `CUDA_VISIBLE_DEVICES` shows), or
    /// says in one line why it is not usable.
    pub fn open_ordinal(ordinal: usize) -> Result<Gpu, String> {
        if let Some(missing) = Presence::detect().missing() {
            return Err(missing);
        }
        Gpu::open_present(ordinal).map_err(|e| format!("no usable GPU {ordinal}: {e}"))
    }

    /// How many GPUs this process sees (after `CUDA_VISIBLE_DEVICES`), or
    /// why none.
    pub fn count() -> Result<usize, String> {
        if let Some(missing) = Presence::detect().missing() {
            return Err(missing);
        }
        // SAFETY: cuInit takes no pointers; the library is present.
        error::check_driver("cuInit", unsafe { cudarc::driver::sys::cuInit(0) })
            .and_then(|_| CudaContext::device_count().map_err(|e| driver("cuDeviceGetCount", e)))
            .map(|n| n.max(0) as usize)
            .map_err(|e| format!("no usable GPU: {e}"))
    }

    fn open_present(ordinal: usize) -> GpuResult<Gpu> {
        let mut driver_version = 0;
        // SAFETY: out-pointer to a local; needs no cuInit.
        error::check_driver("cuDriverGetVersion", unsafe {
            cudarc::driver::sys::cuDriverGetVersion(&mut driver_version)
        })?;
        if driver_version < MIN_DRIVER_CUDA {
            return Err(GpuError {
                call: "cuDriverGetVersion",
                status: format!(
                    "the driver supports CUDA {}.{}; cnnbench needs a driver for CUDA 12.8 or later",
                    driver_version / 1000,
                    (driver_version % 1000) / 10
                ),
                oom: false,
            });
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| driver("cuInit/cuCtxCreate", e))?;
        // Our buffers are raw allocations ordered by one stream: cudarc's
        // per-allocation event tracking would only add work.
        // SAFETY: called before any cudarc allocation on this context.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().map_err(|e| driver("cuStreamCreate", e))?;
        let cudnn = cudnn::CudnnHandle::new(&stream)?;
        let cublas = cublas::CublasHandle::new(&stream)?;
        let info = device_info(&ctx, &cublas, driver_version)?;
        Ok(Gpu {
            ctx,
            stream,
            cudnn,
            cublas,
            info,
        })
    }

    /// A pair of timing events on this GPU.
    pub fn event_pair(&self) -> GpuResult<EventPair> {
        let new = || {
            self.ctx
                .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(|e| driver("cuEventCreate", e))
        };
        Ok(EventPair {
            start: new()?,
            end: new()?,
            stream: self.stream.clone(),
        })
    }

    pub fn synchronize(&self) -> GpuResult<()> {
        self.stream
            .synchronize()
            .map_err(|e| driver("cuStreamSynchronize", e))
    }

    /// Free device memory in bytes.
    pub fn free_memory(&self) -> GpuResult<usize> {
        self.ctx
            .mem_get_info()
            .map(|(free, _)| free)
            .map_err(|e| driver("cuMemGetInfo", e))
    }

    /// The peak for `d`: from device properties where known, else the
    /// measured one filled in by [`crate::ops::gemm::cuda::ensure_peak`].
    pub fn peak_tflops(&self, d: DType) -> Option<f64> {
        self.info.peak(d).map(|p| p.tflops)
    }
}

/// Timed runs per candidate while planning, after one warm-up run.
pub const TUNE_RUNS: usize = 3;

/// CUDA events around work enqueued on the benchmark stream: the time the
/// GPU spent between them, without the host's launch overhead.
pub struct EventPair {
    start: CudaEvent,
    end: CudaEvent,
    stream: Arc<CudaStream>,
}

impl EventPair {
    /// Records the start event, runs `enqueue`, records the end event and
    /// waits for it; returns the GPU milliseconds in between.
    pub fn time<E: From<GpuError>>(
        &self,
        enqueue: &mut dyn FnMut() -> Result<(), E>,
    ) -> Result<f64, E> {
        self.start
            .record(&self.stream)
            .map_err(|e| driver("cuEventRecord", e))?;
        enqueue()?;
        self.end
            .record(&self.stream)
            .map_err(|e| driver("cuEventRecord", e))?;
        self.end
            .synchronize()
            .map_err(|e| driver("cuEventSynchronize", e))?;
        let ms = self
            .start
            .elapsed_ms(&self.end)
            .map_err(|e| driver("cuEventElapsedTime", e))?;
        Ok(ms as f64)
    }

    /// The lowest time in ms of [`TUNE_RUNS`] runs of `run`, after a
    /// warm-up run: how every candidate is timed while planning (a legacy
    /// convolution algorithm against a graph plan, one RNN algorithm
    /// against another), so that they compare on the same footing.
    pub fn lowest_time(&self, run: &mut dyn FnMut() -> GpuResult<()>) -> GpuResult<f64> {
        run()?;
        self.stream
            .synchronize()
            .map_err(|e| driver("cuStreamSynchronize", e))?;
        let mut best = f64::INFINITY;
        for _ in 0..TUNE_RUNS {
            best = best.min(self.time::<GpuError>(run)?);
        }
        Ok(best)
    }
}

fn device_info(
    ctx: &Arc<CudaContext>,
    cublas: &cublas::CublasHandle,
    driver_version: i32,
) -> GpuResult<DeviceInfo> {
    let attr = |a: Attr| {
        ctx.attribute(a)
            .map_err(|e| driver("cuDeviceGetAttribute", e))
    };
    let cc = (
        attr(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
        attr(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
    );
    let sms = attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as usize;
    let clock_mhz = (attr(Attr::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)? / 1000) as u32;
    let name = ctx.name().map_err(|e| driver("cuDeviceGetName", e))?;
    let peaks = DType::ALL
        .iter()
        .filter_map(|&d| device::nominal_peak(&name, cc, sms, clock_mhz, d))
        .collect();
    Ok(DeviceInfo {
        name,
        compute_capability: format!("{}.{}", cc.0, cc.1),
        sms,
        memory_bytes: ctx.total_mem().map_err(|e| driver("cuDeviceTotalMem", e))? as u64,
        clock_mhz,
        memory_clock_mhz: (attr(Attr::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)? / 1000) as u32,
        memory_bus_bits: attr(Attr::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)? as u32,
        l2_bytes: attr(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as usize,
        driver_cuda: format!("{}.{}", driver_version / 1000, (driver_version % 1000) / 10),
        cudnn_cudart: cudnn::cudart_version(),
        cudnn: cudnn::version(),
        cublas: cublas.version()?,
        peaks,
        libraries: loader::libraries(),
    })
}
