//! `cnnbench gemm`: time dense GEMMs (the fully connected layers'
//! kernel; DeepBench's GEMM suite) on the CPU or through cuBLAS. The
//! arguments are here; the pipeline is [`crate::driver::gemm`].

use super::output::OutputArgs;
use super::session::{self, Needs, Session, Target};
use super::{Device, TimingArgs};
use crate::driver::context::Context;
use crate::driver::gemm as pipeline;
use crate::note::note;
use crate::problem::gemm;
use anyhow::{bail, Result};
use clap::Args;
use cnnbench_layers::gemm::GemmShape;
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
    /// Instruction set on the CPU: auto, avx512, avx2, scalar (scalar tiles on the `gemm` crate's own pick, without the packed AVX-512 path)
    #[arg(long, default_value = "auto", value_name = "ISA", env = "CNNBENCH_ISA")]
    isa: String,
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

pub fn run(args: GemmArgs) -> Result<ExitCode> {
    let policy = args.timing.policy()?;
    let shapes: Vec<GemmShape> = args
        .sizes
        .iter()
        .map(|s| gemm::parse(s, &args.trans))
        .collect::<Result<_>>()?;
    let dtype = DType::parse(&args.dtype)?;
    let avail = crate::results::memory::available(super::thread_count(args.threads).unwrap_or(1));
    pipeline::check_host_memory(&shapes, args.check, avail)?;
    let gpu = match session::choose_device(args.device, Needs::Cudnn)? {
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
    // As conv: resolved (and refused where this CPU lacks it) on the CPU
    // path only.
    let isa = match gpu {
        None => crate::plan::resolve_isa(&args.isa)?,
        Some(_) => cnnbench_kernels::Isa::detect(),
    };
    let session = Session::start(args.threads, shapes.len() as u64, args.quiet)?;
    let ctx = Context {
        threads: session.threads,
        bar: &session.bar,
        runner: session.runner(policy),
    };
    let req = pipeline::Request {
        dtype,
        check: args.check,
        seed: args.timing.seed,
        isa,
    };
    let out = pipeline::run(&shapes, gpu, &req, &ctx, |env, dtype| {
        args.output.open(env, "gemm", dtype)
    })?;
    session.bar.finish_and_clear();
    out.finish(session.interrupted())
}
