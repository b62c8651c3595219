//! `cnnbench gemm`: time dense GEMMs (the fully connected layers'
//! kernel; DeepBench's GEMM suite) on the CPU or through cuBLAS.

use super::output::OutputArgs;
use super::session::{self, Needs, Session, Target};
use super::{Device, TimingArgs};
use crate::bench::timer::{CudaEvents, Timer, WallClock};
use crate::bench::{Samples, Stats};
use crate::driver::{self, Case};
use crate::note::note;
use crate::problem::gemm;
use crate::results::record::{Ran, Subject, Timing};
use crate::results::{self, Check, Dir, Environment, Record};
use anyhow::{bail, Context, Result};
use clap::Args;
use cnnbench_kernels::{peak, Isa};
use cnnbench_layers::gemm::cuda::{ensure_peak, GpuGemm};
use cnnbench_layers::gemm::{GemmShape, GemmTensors};
use cnnbench_layers::DType;
use std::process::ExitCode;

#[derive(Args)]
#[command(after_help = "Examples:\n  \
    cnnbench gemm 1760x128x1760 --check\n  \
    cnnbench gemm 4096x4096x4096 5124x700x2048 --trans NT --device gpu --dtype f16")]
pub struct GemmArgs {
    /// Sizes MxNxK: C[MxN] = op(A)[MxK] · op(B)[KxN], row-major
    #[arg(value_name = "MxNxK", required = true)]
    sizes: Vec<String>,
    /// Which of A and B are stored transposed: NN, NT, TN or TT
    #[arg(long, default_value = "NN")]
    trans: String,
    /// f32, or on the GPU tf32, f16 or bf16 (fp32 accumulation)
    #[arg(long, default_value = "f32", value_name = "DTYPE")]
    dtype: String,
    /// cpu, gpu, or auto (the GPU when usable)
    #[arg(long, value_enum, default_value_t = Device::Auto)]
    device: Device,
    /// Worker threads on the CPU [default: all logical CPUs]; a comma list sweeps
    #[arg(long, value_name = "N", env = "CNNBENCH_THREADS")]
    threads: Option<usize>,
    #[command(flatten)]
    timing: TimingArgs,
    /// Compare C with a naive f64 reference; exit 1 on a mismatch
    #[arg(long)]
    check: bool,
    #[command(flatten)]
    output: OutputArgs,
    #[arg(long, short)]
    quiet: bool,
}

/// One GEMM on the CPU (our tiled kernel) or on the GPU (cuBLAS).
struct GemmCase<'a, 'g> {
    t: GemmTensors,
    gpu: Option<GpuGemm<'g>>,
    want: Option<Vec<f32>>,
    shape: &'a GemmShape,
    dtype: DType,
    peak_gflops: f64,
}

impl Case for GemmCase<'_, '_> {
    type Record = Record;

    fn run(&mut self) -> Result<()> {
        match &mut self.gpu {
            Some(op) => op.run().map_err(Into::into),
            None => {
                self.t.run_cpu();
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
        let kernel = if on_gpu {
            format!("cublasGemmEx ({})", self.dtype.math())
        } else {
            format!("tiled gemm_f32({})", cnnbench_kernels::gemm::gemm_isa())
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
                algo: if on_gpu { "cublas" } else { "tiled" }.into(),
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

pub fn run(args: GemmArgs) -> Result<ExitCode> {
    let policy = args.timing.policy()?;
    let shapes: Vec<GemmShape> = args
        .sizes
        .iter()
        .map(|s| gemm::parse(s, &args.trans))
        .collect::<Result<_>>()?;
    let dtype = DType::parse(&args.dtype)?;
    let avail = crate::results::memory::available(super::thread_count(args.threads).unwrap_or(1));
    for s in &shapes {
        let need = GemmTensors::bytes_needed(s) * if args.check { 2 } else { 1 };
        if let Some(a) = avail.filter(|a| need > a.bytes) {
            bail!(
                "GEMM {} needs {} of host memory, but only {}",
                gemm::canonical(s),
                crate::results::memory::size(need),
                a.describe()
            );
        }
    }
    let mut gpu = match session::choose_device(args.device, Needs::Cudnn)? {
        Target::Gpu(g) => Some(*g),
        Target::Cpu(why) => {
            if let (Some(why), false) = (why, args.quiet) {
                note!("cnnbench: device auto: {why}; using the CPU");
            }
            None
        }
    };
    if gpu.is_none() && dtype != DType::F32 {
        bail!("--dtype {dtype}: the CPU GEMM is f32 only");
    }
    let session = Session::start(args.threads, shapes.len() as u64, args.quiet)?;
    let (threads, bar) = (session.threads, &session.bar);
    let runner = session.runner(policy);

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
            crate::bench::timer::cpu_peak_gflops(Isa::detect(), threads, peak::DEFAULT_REPS)?,
            WallClock.describe(),
            None,
        ),
    };
    let env = Environment {
        gpu: gpu_info,
        ..Environment::here(
            threads,
            cnnbench_kernels::gemm::gemm_isa().name().into(),
            Some(peak_gflops),
            timer_text,
        )
    };
    let mut out = args.output.open(env, "gemm", dtype)?;

    for (i, shape) in shapes.iter().enumerate() {
        let mut t = GemmTensors::random(shape, args.timing.seed);
        dtype.round_in_place(&mut t.a);
        dtype.round_in_place(&mut t.b);
        let want = args.check.then(|| t.reference());
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
        };
        let Some(rec) = driver::drive(&mut case, &runner, timer.as_mut())? else {
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
    bar.finish_and_clear();
    out.finish(session.interrupted())
}
