//! `cnnbench check`: verify a whole model's numerics. On the CPU the fast
//! layers run against the naive reference layers (f64-accumulating
//! convolution and GEMM, textbook batch norm, pooling and LRN); on the GPU
//! the cuDNN/cuBLAS layers run against the CPU's fast layers. One training
//! step each, from the same weights and data, compared on the loss, every
//! layer's output (the logits included) and every parameter gradient.
//! The arguments are here; the pipeline is [`crate::driver::check`].

use super::gpu_paths::GpuPathArgs;
use super::session::{self, Needs, Target};
use super::{init_threads, Device};
use crate::driver::check as pipeline;
use crate::driver::model::resolve;
use crate::note::note;
use crate::output::{self, Format, TABLE_OR_JSON};
use anyhow::{bail, Result};
use clap::Args;
use cnnbench_layers::{DType, Layout};
use std::process::ExitCode;

#[derive(Args, Debug)]
#[command(after_help = "Examples:
    cnnbench check --model resnet50
    cnnbench check --model all --batch 2 --format json
    cnnbench check --model resnet50 --device gpu --dtype f16 --layout nhwc")]
pub struct CheckArgs {
    /// Models to check, or `all`
    #[arg(long = "model", value_name = "NAME", default_value = "all")]
    pub models: Vec<String>,
    /// Images per step
    #[arg(long, default_value_t = 2)]
    pub batch: usize,
    /// Which backend to check: cpu (fast layers against the reference), gpu (against the
    /// CPU), or auto (the GPU when one is usable)
    #[arg(long, value_enum, default_value_t = Device::Cpu)]
    pub device: Device,
    /// GPU precision: f32, tf32, f16 or bf16
    #[arg(long, default_value = "f32")]
    pub dtype: String,
    /// GPU activation layout: nhwc or nchw (models with recurrent layers: nhwc only)
    #[arg(long, default_value = "nhwc")]
    pub layout: String,
    /// Worker threads [default: all logical CPUs]
    #[arg(long, value_name = "N", env = "CNNBENCH_THREADS")]
    pub threads: Option<usize>,
    /// Seed of the weights, images and labels
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Every compared tensor, not only the worst per model
    #[arg(long, short)]
    pub verbose: bool,
    #[arg(long, default_value = "table", value_parser = output::parser(TABLE_OR_JSON))]
    pub format: Format,
    #[command(flatten)]
    pub gpu_paths: GpuPathArgs,
}

pub fn run(args: CheckArgs) -> Result<ExitCode> {
    let mut graphs = resolve(&args.models)?;
    if args.batch == 0 {
        bail!("--batch must be at least 1");
    }
    let dtype = DType::parse(&args.dtype)?;
    let layout = Layout::parse(&args.layout)?;
    crate::driver::model::sequences_in_nhwc(&mut graphs, &args.models, layout)?;
    let planned = super::thread_count(args.threads).unwrap_or(1);
    let avail = crate::results::memory::available(planned);
    pipeline::check_host_memory(&graphs, args.batch, planned, avail)?;
    let (gpu, cpu_why) = match session::choose_device(args.device, Needs::CudnnAndNvrtc)? {
        Target::Gpu(g) => (Some(*g), None),
        Target::Cpu(why) => (None, why),
    };
    let paths = args.gpu_paths.paths(gpu.is_some(), cpu_why.as_deref())?;
    if let Some(why) = &cpu_why {
        note!("cnnbench: device auto: {why}; checking the CPU");
    }
    if gpu.is_none() && (dtype != DType::F32 || layout != Layout::Nhwc) {
        bail!("--dtype {dtype} --layout {layout}: the CPU path runs f32 in nhwc only");
    }
    let threads = init_threads(args.threads)?;
    // A stop signal ends the check after the model being checked; the
    // models checked so far are printed (a second signal ends it at once).
    crate::signals::install()?;
    let stopped = || crate::signals::stopped();
    let req = pipeline::Request {
        batch: args.batch,
        seed: args.seed,
        dtype,
        layout,
        paths,
    };
    let (all, checked) = pipeline::run(&graphs, gpu, &req, threads)?;
    let failed = all.iter().filter(|c| !c.passed).count();
    crate::output::print(&output::check::render(&all, args.format, args.verbose)?)?;
    if failed > 0 {
        note!("cnnbench: {failed} tensor(s) failed the check");
    }
    if stopped() {
        note!(
            "cnnbench: {}: checked {checked} of {} model(s)",
            crate::signals::stopped_by(),
            graphs.len()
        );
        return Ok(crate::signals::exit_code());
    }
    Ok(if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
