//! `cnnbench gemm`: time dense GEMMs (the fully connected layers'
//! kernel; DeepBench's GEMM suite) on the CPU or through cuBLAS.

use super::output::OutputArgs;
use super::{init_threads, Device, TimingArgs};
use crate::bench::timer::{CudaEvents, Timer, WallClock};
use crate::bench::{Runner, Stats};
use crate::problem::gemm;
use crate::results::environment;
use crate::results::record::{Ran, Subject, Timing};
use crate::results::{self, Check, Dir, Environment, Record};
use anyhow::{bail, Context, Result};
use clap::Args;
use cnnbench_kernels::{peak, Isa};
use cnnbench_layers::cuda::Gpu;
use cnnbench_layers::gemm::cuda::{ensure_peak, GpuGemm};
use cnnbench_layers::gemm::{GemmShape, GemmTensors};
use cnnbench_layers::DType;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

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

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

pub fn run(args: GemmArgs) -> Result<ExitCode> {
    let policy = args.timing.policy()?;
    let shapes: Vec<GemmShape> = args
        .sizes
        .iter()
        .map(|s| gemm::parse(s, &args.trans))
        .collect::<Result<_>>()?;
    let dtype = DType::parse(&args.dtype)?;
    let avail = environment::available_memory_bytes();
    for s in &shapes {
        let need = GemmTensors::bytes_needed(s) * if args.check { 2 } else { 1 };
        if avail.is_some_and(|a| need > a) {
            bail!(
                "GEMM {} needs {:.1} GiB of host memory",
                gemm::canonical(s),
                need as f64 / (1u64 << 30) as f64
            );
        }
    }
    let mut gpu = match args.device {
        Device::Cpu => None,
        Device::Gpu => Some(Gpu::open().map_err(|w| anyhow::anyhow!("--device gpu: {w}"))?),
        Device::Auto => match Gpu::open() {
            Ok(g) => Some(g),
            Err(why) => {
                if !args.quiet {
                    eprintln!("cnnbench: device auto: {why}; using the CPU");
                }
                None
            }
        },
    };
    if gpu.is_none() && dtype != DType::F32 {
        bail!("--dtype {dtype}: the CPU GEMM is f32 only");
    }
    let threads = init_threads(args.threads)?;
    ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::Relaxed))
        .context("installing the Ctrl-C handler")?;
    let bar = super::progress::bar(shapes.len() as u64, args.quiet);
    let runner = Runner {
        policy,
        interrupted: &INTERRUPTED,
    };

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
            peak::measure_gflops(Isa::detect(), threads, peak::DEFAULT_REPS)
                .map_err(anyhow::Error::msg)?,
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
        let (samples, kernel) = match &gpu {
            Some(g) => {
                let mut op =
                    GpuGemm::new(g, &t, dtype, 1).with_context(|| gemm::canonical(shape))?;
                let mut timer = CudaEvents(g.event_pair()?);
                let s = runner.run(&mut timer, &mut || op.run().map_err(Into::into))?;
                if want.is_some() {
                    t.c = op.download()?;
                }
                (s, format!("cublasGemmEx ({})", dtype.math()))
            }
            None => {
                let s = runner.run(&mut WallClock, &mut || {
                    t.run_cpu();
                    Ok(())
                })?;
                (
                    s,
                    format!("tiled gemm_f32({})", cnnbench_kernels::gemm::gemm_isa()),
                )
            }
        };
        if samples.interrupted {
            break;
        }
        let stats = Stats::of(&samples.ms).context("no timed runs")?;
        let check = want.as_ref().map(|w| {
            let rel_err = cnnbench_kernels::conv::reference::rel_l2_error(&t.c, w);
            Check {
                rel_err,
                passed: rel_err <= dtype.tolerance(shape.k),
            }
        });
        let rec = Record::new(
            Subject {
                problem: gemm::canonical(shape),
                dir: Dir::Gemm,
                device: if gpu.is_some() {
                    results::Device::Gpu
                } else {
                    results::Device::Cpu
                },
                dtype,
                layout: "row-major".into(),
                algo: if gpu.is_some() { "cublas" } else { "tiled" }.into(),
            },
            Timing {
                ms: stats,
                runs: samples.ms.len(),
                flops: shape.flops(),
                // Measured before any record.
                peak_gflops: Some(peak_gflops),
            },
            Ran {
                check,
                kernel,
                bias: false,
                workspace_bytes: 0,
                cudnn_find_ms: None,
            },
        );
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
    out.finish(INTERRUPTED.load(Ordering::Relaxed))
}
