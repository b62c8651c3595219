//! `cnnbench conv`: time convolution problems, direction by direction, on
//! the CPU or the GPU. The arguments and their checks are here; the
//! pipeline is [`crate::driver::conv`].

use super::output::OutputArgs;
use super::session::{self, Needs, Session};
use super::{Device, TimingArgs};
use crate::driver::context::Context;
use crate::driver::conv::{self, Target};
use crate::note::note;
use crate::plan;
use crate::problem::{self, ConvProblem};
use anyhow::{bail, Context as _, Result};
use clap::Args;
use cnnbench_layers::cuda::ConvApi;
use cnnbench_layers::{DType, Layout};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
#[command(after_help = "Examples:\n  \
    cnnbench conv mb16ic64ih56oc64oh56kh3ph1 --check\n  \
    cnnbench conv --from builtin:resnet50 --dir fwd --format csv --out r50.csv\n  \
    cnnbench conv g2mb2ic96ih27oc256kh5ph2 --algo all --iters 20\n  \
    cnnbench conv --from builtin:resnet50 --device gpu --dtype f16 --layout nhwc --algo auto --check")]
pub struct ConvArgs {
    /// Problems in benchdnn syntax, e.g. mb16ic64ih56oc64oh56kh3ph1
    #[arg(value_name = "DESC")]
    problems: Vec<String>,
    /// Read problems from a batch file (one per line, # comments) or builtin:resnet50
    #[arg(long, value_name = "FILE")]
    from: Option<String>,
    /// Directions: fwd, bwd-data, bwd-filter, all (or FWD_B, FWD_D, BWD_D, BWD_W, BWD_WB)
    #[arg(long, default_value = "all", value_name = "LIST")]
    dir: String,
    /// auto, all, or a name. CPU: auto tries each briefly and times the fastest; names direct,
    /// im2col_gemm, winograd (F(4x4,3x3): 3x3 kernels at stride 1, one group), winograd_panels
    /// (the same in panels of output channels; forward and backward-data), ref. GPU: auto is cuDNN's exhaustive FindEx, then the winner is timed;
    /// heuristic is cuDNN's first choice; all times every algorithm cuDNN knows; names
    /// implicit_gemm, implicit_precomp_gemm, winograd, fft_tiling, algo_1, ... (or algo#N)
    #[arg(long, default_value = "auto", value_name = "ALGO")]
    algo: String,
    /// f32 (true fp32), or on the GPU tf32 (tensor cores on fp32 data), f16 or bf16 (half
    /// storage, fp32 accumulation)
    #[arg(long, default_value = "f32", value_name = "DTYPE")]
    dtype: String,
    /// nhwc, or nchw (GPU)
    #[arg(long, default_value = "nhwc", value_name = "LAYOUT")]
    layout: String,
    /// Most cuDNN workspace an algorithm may use, in bytes (K/M/G suffixes) [default: 4G, and
    /// at most 90% of the free GPU memory]
    #[arg(long, value_name = "BYTES")]
    workspace_limit: Option<String>,
    /// GPU: rotate between copies of the tensors even when a problem is bigger than L2 (by
    /// default only problems that fit in L2 rotate, so no run reads data a previous run left
    /// in cache)
    #[arg(long)]
    cold_cache: bool,
    /// GPU: cuDNN's API: legacy (cudnnConvolution* with the algorithm --algo picks) or graph
    /// (the backend API's engine configurations from its heuristics: --algo auto times each
    /// and keeps the fastest, heuristic takes the first, all times every one; checked on an H200
    /// in f16 and f32, not tf32)
    #[arg(long, value_name = "API", default_value = "legacy", value_parser = parse_conv_api)]
    api: ConvApi,
    /// GPU, f16 or bf16, NHWC: time each direction as NormConv, MLPerf ResNet-50's
    /// runtime-fused convolution through cuDNN's graph API (whatever --api says), the previous
    /// batch norm's scale and shift and its ReLU in the prologue: fwd also sums the output and
    /// its squares per channel, bwd-data applies ReLU's backward and the batch norm's weight
    /// backward, bwd-filter takes the activation it recomputes; --check compares every
    /// output. On an H200 only the forward of a 1x1 f16 shape has run (cuDNN offered no
    /// engine for the others tried)
    #[arg(long)]
    norm_conv: bool,
    /// Worker threads [default: all logical CPUs]. A comma list sweeps, as do lists in --batch,
    /// --dtype, --layout and --isa: one run per combination
    #[arg(long, value_name = "N", env = "CNNBENCH_THREADS")]
    threads: Option<usize>,
    /// Batch size for every problem (replaces mb), or max: the largest that fits in memory
    #[arg(long, value_name = "N|max")]
    batch: Option<String>,
    /// Instruction set for the kernels: auto, avx512, avx2, scalar
    #[arg(long, default_value = "auto", value_name = "ISA", env = "CNNBENCH_ISA")]
    isa: String,
    #[command(flatten)]
    timing: TimingArgs,
    /// Compare every output with the naive reference; exit 1 on a mismatch
    #[arg(long)]
    check: bool,
    /// Write inputs and outputs as float32 .npy (logical N,C,H,W / K,C/g,R,S) plus problem.json
    #[arg(long, value_name = "DIR", value_parser = super::output::writable_folder)]
    dump: Option<PathBuf>,
    #[command(flatten)]
    output: OutputArgs,
    /// cpu, gpu, or auto: the GPU when one is usable, else the CPU (it says which)
    #[arg(long, value_enum, default_value_t = Device::Auto)]
    device: Device,
    /// No progress lines on stderr
    #[arg(long, short)]
    quiet: bool,
}

/// The arguments parsed and checked, as the pipeline takes them.
fn request(args: &ConvArgs) -> Result<conv::Request> {
    let policy = args.timing.policy()?;
    let mut problems = Vec::new();
    for d in &args.problems {
        problems.push(ConvProblem::parse(d)?);
    }
    if let Some(src) = &args.from {
        problems.extend(problem::load_batch(src)?);
    }
    if problems.is_empty() {
        bail!("no problem given: pass a descriptor such as mb16ic64ih56oc64oh56kh3ph1, or --from FILE");
    }
    let batch = args.batch.as_deref().map(plan::parse_batch).transpose()?;
    if let Some(plan::BatchChoice::Fixed(mb)) = batch {
        for p in &mut problems {
            p.shape.mb = mb;
        }
    }
    let dirs = plan::parse_dirs(&args.dir)?;
    let dtype = DType::parse(&args.dtype)?;
    let layout = Layout::parse(&args.layout)?;
    let workspace_limit = args
        .workspace_limit
        .as_deref()
        .map(plan::parse_bytes)
        .transpose()
        .context("--workspace-limit")?;
    Ok(conv::Request {
        problems,
        batch,
        dirs,
        dtype,
        layout,
        workspace_limit,
        algo: args.algo.clone(),
        isa: args.isa.clone(),
        cold_cache: args.cold_cache,
        api: args.api,
        norm_conv: args.norm_conv,
        check: args.check,
        seed: args.timing.seed,
        dump: args.dump.clone(),
        policy,
        avail: crate::results::memory::available(super::thread_count(args.threads).unwrap_or(1)),
        threads: super::thread_count(args.threads)?,
    })
}

/// `--api`: one API per run; `auto` (a per-layer choice) belongs to
/// `model` and `check`, where a layer keeps the faster.
fn parse_conv_api(s: &str) -> Result<ConvApi, String> {
    match ConvApi::parse(s)? {
        ConvApi::Auto => Err(
            "auto picks per layer in model and check; conv compares the two with --api legacy and --api graph"
                .into(),
        ),
        api => Ok(api),
    }
}

pub fn run(args: ConvArgs) -> Result<ExitCode> {
    let req = request(&args)?;
    req.check_host_memory()?;
    let (gpu, no_gpu) = match session::choose_device(args.device, Needs::Cudnn)? {
        session::Target::Gpu(g) => (Some(*g), None),
        session::Target::Cpu(no_gpu) => (None, no_gpu),
    };
    let (s, target) = conv::plan(req, gpu, no_gpu)?;
    let work = (s.problems.len() * s.dirs.len()) as u64;
    let session = Session::start(args.threads, work, args.quiet)?;
    let threads = session.threads;
    match &target {
        Target::Gpu(g) => {
            if args.device == Device::Auto && !args.quiet {
                note!("cnnbench: device auto: using the GPU ({})", g.gpu.info.name);
            }
            // Checked on an H200 in f16 and f32; a GPU test found tf32
            // weight gradients off (results/reference/gpu-h200-paths-56f71b5).
            if args.api == ConvApi::Graph && args.dtype.contains("tf32") && !args.quiet {
                note!("cnnbench: --api graph in tf32 not yet verified on a GPU: compare it with --check");
            }
        }
        Target::Cpu { isa, no_gpu, .. } => {
            if let (Device::Auto, Some(why), false) = (args.device, no_gpu, args.quiet) {
                note!("cnnbench: device auto: {why}; using the CPU ({threads} threads, {isa})");
            }
        }
    }
    let ctx = Context {
        threads,
        bar: &session.bar,
        runner: session.runner(s.policy),
    };
    let out = conv::run(&s, target, &ctx, |env, dtype| {
        args.output.open(env, "conv", dtype)
    })?;
    session.bar.finish_and_clear();
    out.finish(session.interrupted())
}
