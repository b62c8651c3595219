//! `cnnbench gemm`'s pipeline: dense GEMMs (the fully connected layers'
//! kernel; DeepBench's GEMM suite) timed on the CPU (the kernels crate's
//! GEMM, packed or tiled: `gemm::Path`) or
//! through cuBLAS, each through the one driver loop.

use super::context::Context;
use crate::bench::timer::{CudaEvents, Timer, WallClock};
use crate::bench::{Samples, Stats};
use crate::driver::{self, Case};
use crate::output::sink::Output;
use crate::problem::gemm;
use crate::results::memory::Available;
use crate::results::record::{Ran, Subject, Timing};
use crate::results::{self, Check, Dir, Environment, Record};
use anyhow::{bail, Context as _, Result};
use cnnbench_kernels::{peak, Isa};
use cnnbench_layers::cuda::Gpu;
use cnnbench_layers::gemm::cuda::{ensure_peak, GpuGemm};
use cnnbench_layers::gemm::{GemmShape, GemmTensors};
use cnnbench_layers::DType;

/// Every GEMM's tensors (twice with `check`: the reference's too) fit in
/// host memory: refused in one line before anything runs.
pub fn check_host_memory(
    shapes: &[GemmShape],
    check: bool,
    avail: Option<Available>,
) -> Result<()> {
    for s in shapes {
        let need = GemmTensors::bytes_needed(s) * if check { 2 } else { 1 };
        if let Some(a) = avail.filter(|a| need > a.bytes) {
            bail!(
                "GEMM {} needs {} of host memory, but only {}",
                gemm::canonical(s),
                crate::results::memory::size(need),
                a.describe()
            );
        }
    }
    Ok(())
}

/// One GEMM on the CPU (the kernels crate's GEMM) or on the GPU (cuBLAS).
struct GemmCase<'a, 'g> {
    t: GemmTensors,
    gpu: Option<GpuGemm<'g>>,
    want: Option<Vec<f32>>,
    shape: &'a GemmShape,
    dtype: DType,
    peak_gflops: f64,
    isa: Isa,
}

impl Case for GemmCase<'_, '_> {
    type Record = Record;

    fn run(&mut self) -> Result<()> {
        match &mut self.gpu {
            Some(op) => op.run().map_err(Into::into),
            None => {
                self.t.run_cpu(self.isa);
                Ok(())
            }
        }
    }

    fn check(&mut self) -> Result<Option<Check>> {
        let Some(w) = &self.want else {
            return Ok(None);
        };
        if let Some(op) = &self.gpu {
            self.t.c = op.download()?;
        }
        let rel_err = cnnbench_kernels::conv::reference::rel_l2_error(&self.t.c, w);
        Ok(Some(Check {
            rel_err,
            passed: rel_err <= self.dtype.tolerance(self.shape.k),
        }))
    }

    fn record(&mut self, samples: &Samples, check: Option<Check>) -> Result<Record> {
        let on_gpu = self.gpu.is_some();
        let path = cnnbench_kernels::gemm::Path::for_shape(self.isa, self.shape);
        let kernel = if on_gpu {
            format!("cublasGemmEx ({})", self.dtype.math())
        } else {
            format!("{} {}", path.name(), path.kernel(self.isa))
        };
        Ok(Record::new(
            Subject {
                problem: gemm::canonical(self.shape),
                dir: Dir::Gemm,
                device: if on_gpu {
                    results::Device::Gpu
                } else {
                    results::Device::Cpu
                },
                dtype: self.dtype,
                layout: "row-major".into(),
                algo: if on_gpu { "cublas" } else { path.name() }.into(),
            },
            Timing {
                ms: Stats::of(&samples.ms).context("no timed runs")?,
                runs: samples.ms.len(),
                flops: self.shape.flops(),
                // Measured before any record.
                peak_gflops: Some(self.peak_gflops),
            },
            Ran {
                check,
                kernel,
                bias: false,
                workspace_bytes: 0,
                cudnn_find_ms: None,
            },
        ))
    }
}

/// What a GEMM run is, besides its shapes.
pub struct Request {
    pub dtype: DType,
    /// Compare C with a naive f64 reference.
    pub check: bool,
    /// Seed of the random A and B.
    pub seed: u64,
    /// The CPU path's ISA (see [`cnnbench_kernels::gemm`]).
    pub isa: Isa,
}

/// Times every shape on `gpu` (cuBLAS) or, without one, on the CPU; the
/// output, to finish.
pub fn run(
    shapes: &[GemmShape],
    mut gpu: Option<Gpu>,
    req: &Request,
    ctx: &Context,
    open: impl FnOnce(Environment, DType) -> Result<Output>,
) -> Result<Output> {
    let (dtype, threads, bar, runner) = (req.dtype, ctx.threads, ctx.bar, &ctx.runner);
    let (peak_gflops, timer_text, gpu_info) = match &mut gpu {
        Some(g) => {
            let p = ensure_peak(g, dtype)?;
            (
                p.tflops * 1e3,
                CudaEvents::DESCRIPTION,
                Some(g.info.clone()),
            )
        }
        None => (
            // The best ISA's peak, as conv's, whatever `--isa` runs.
            crate::bench::timer::cpu_peak_gflops(Isa::detect(), threads, peak::DEFAULT_REPS)?,
            WallClock.describe(),
            None,
        ),
    };
    let env = Environment {
        gpu: gpu_info,
        ..Environment::here(
            threads,
            req.isa.name().into(),
            Some(peak_gflops),
            timer_text,
        )
    };
    let mut out = open(env, dtype)?;

    for (i, shape) in shapes.iter().enumerate() {
        let mut t = GemmTensors::random(shape, req.seed);
        dtype.round_in_place(&mut t.a);
        dtype.round_in_place(&mut t.b);
        let want = req.check.then(|| t.reference());
        let op = match &gpu {
            Some(g) => Some(GpuGemm::new(g, &t, dtype, 1).with_context(|| gemm::canonical(shape))?),
            None => None,
        };
        let mut timer: Box<dyn Timer> = match &gpu {
            Some(g) => Box::new(CudaEvents(g.event_pair()?)),
            None => Box::new(WallClock),
        };
        let mut case = GemmCase {
            t,
            gpu: op,
            want,
            shape,
            dtype,
            peak_gflops,
            isa: req.isa,
        };
        let Some(rec) = driver::drive(&mut case, runner, timer.as_mut())? else {
            break;
        };
        bar.set_position(i as u64 + 1);
        bar.println(format!(
            "[{}/{}] {}: {:.3} ms median, {:.1} GFLOP/s",
            i + 1,
            shapes.len(),
            rec.problem,
            rec.ms.median,
            rec.gflops
        ));
        out.push(rec)?;
    }
    Ok(out)
}
