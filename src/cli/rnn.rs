//! `cnnbench rnn`: time recurrent layers (DeepBench's RNN kernels)
//! forward, backward data and backward weights, as cuDNN splits them: on
//! the CPU through our kernels, on a GPU through cuDNN's RNN API. The
//! arguments are here; the pipeline is [`crate::driver::rnn`].

use super::output::OutputArgs;
use super::session::{self, Needs, Session, Target};
use super::{Device, TimingArgs};
use crate::driver::context::Context;
use crate::driver::rnn::{self as pipeline, PASSES};
use crate::note::note;
use crate::problem::rnn::{self as desc, RnnProblem};
use crate::results::Dir;
use anyhow::{bail, Context as _, Result};
use clap::Args;
use cnnbench_layers::backend::cuda::rnn_algo::RnnAlgo;
use cnnbench_layers::DType;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
#[command(after_help = "Examples:\n  \
    cnnbench rnn l1t25mb16sic512 --cell lstm --check\n  \
    cnnbench rnn l2t50mb32sic256 --cell gru --direction bidirectional-concat --dir fwd\n  \
    cnnbench rnn --from builtin:deepbench-rnn --format csv --out deepbench-rnn.csv")]
pub struct RnnArgs {
    /// Problems in benchdnn's RNN syntax: l1t25mb16sic512 (layers, time
    /// steps, batch, state size; slc, dhc default to sic)
    #[arg(value_name = "DESC")]
    problems: Vec<String>,
    /// Read problems from a batch file (one per line, `--cell=`/`--direction=` may lead a line), builtin:deepbench-rnn or builtin:small-rnn
    #[arg(long, value_name = "FILE|builtin:NAME")]
    from: Option<String>,
    /// The cell, for problems whose line does not say
    #[arg(long, value_enum, default_value_t = desc::Cell::Lstm)]
    cell: desc::Cell,
    /// Which way the sequence is read, and how two directions combine
    #[arg(long, value_enum, default_value_t = desc::Direction::Left2Right)]
    direction: desc::Direction,
    /// Passes to time: fwd, bwd-data, bwd-weights, or all (comma list)
    #[arg(long, default_value = "all", value_name = "PASSES")]
    dir: String,
    /// cpu, gpu (cuDNN), or auto (the GPU when usable)
    #[arg(long, value_enum, default_value_t = Device::Auto)]
    device: Device,
    /// f32, or on the GPU tf32, f16 or bf16 (fp32 accumulation)
    #[arg(long, default_value = "f32", value_name = "DTYPE")]
    dtype: String,
    /// cuDNN's RNN algorithm: standard, persist-static, persist-dynamic, persist-static-small-h, a comma list, or all (those cuDNN refuses for a problem are named on stderr)
    #[arg(long, default_value = "standard", value_name = "ALGO")]
    algo: String,
    /// Worker threads [default: all logical CPUs]
    #[arg(long, value_name = "N", env = "CNNBENCH_THREADS")]
    threads: Option<usize>,
    /// Instruction set for the CPU kernels: auto, avx512, avx2, scalar (with scalar, the whole-sequence GEMMs, the gradients' and an input product over every step, run tiled on the `gemm` crate's own pick)
    #[arg(long, default_value = "auto", value_name = "ISA", env = "CNNBENCH_ISA")]
    isa: String,
    #[command(flatten)]
    timing: TimingArgs,
    /// Compare every output of each pass with a naive f64 reference; exit 1 on a mismatch
    #[arg(long)]
    check: bool,
    /// Write each problem's inputs, parameters and outputs as .npy in PyTorch's layout (one folder per problem when several); scripts/peers/check_rnn_dump.py compares them with PyTorch
    #[arg(long, value_name = "DIR")]
    dump: Option<PathBuf>,
    #[command(flatten)]
    output: OutputArgs,
    #[arg(long, short)]
    quiet: bool,
}

fn parse_passes(s: &str) -> Result<Vec<Dir>> {
    let mut out = Vec::new();
    for part in s.split(',') {
        match part.trim() {
            "all" => out.extend(PASSES),
            "fwd" => out.push(Dir::Fwd),
            "bwd-data" => out.push(Dir::BwdData),
            "bwd-weights" => out.push(Dir::BwdWeights),
            other => bail!("--dir {other:?}: expected fwd, bwd-data, bwd-weights or all"),
        }
    }
    // Each pass once, in pass order.
    Ok(PASSES.into_iter().filter(|d| out.contains(d)).collect())
}

/// The cuDNN algorithms `--algo` names (`all`: every one).
fn parse_algos(s: &str) -> Result<Vec<RnnAlgo>> {
    if s == "all" {
        return Ok(RnnAlgo::ALL.to_vec());
    }
    s.split(',')
        .map(|a| RnnAlgo::parse(a.trim()).map_err(|e| anyhow::anyhow!("--algo: {e}")))
        .collect()
}

pub fn run(args: RnnArgs) -> Result<ExitCode> {
    let policy = args.timing.policy()?;
    let mut problems = Vec::new();
    for d in &args.problems {
        problems.push(RnnProblem::parse(d, args.cell, args.direction)?);
    }
    if let Some(src) = &args.from {
        problems.extend(desc::load_rnn_batch(src, args.cell, args.direction)?);
    }
    if problems.is_empty() {
        bail!("no problem given: pass a descriptor such as l1t25mb16sic512, or --from builtin:deepbench-rnn");
    }
    let passes = parse_passes(&args.dir)?;
    let dtype = DType::parse(&args.dtype)?;
    let algos = parse_algos(&args.algo)?;
    let mut req = pipeline::Request {
        problems,
        passes,
        dtype,
        algos,
        isa: cnnbench_kernels::Isa::detect(),
        check: args.check,
        seed: args.timing.seed,
        dump: args.dump.clone(),
    };
    let gpu = match session::choose_device(args.device, Needs::Cudnn)? {
        Target::Gpu(g) => Some(*g),
        Target::Cpu(why) => {
            if let (Some(why), false) = (why, args.quiet) {
                note!("cnnbench: device auto: {why}; using the CPU");
            }
            None
        }
    };
    // As conv: the ISA is the CPU path's, resolved (and refused where this
    // CPU lacks it) only there; a GPU run records the CPU's best.
    if gpu.is_none() {
        req.isa = crate::plan::resolve_isa(&args.isa)?;
    }
    if gpu.is_some() && args.dump.is_some() {
        bail!("--dump writes the CPU path's tensors; run it with --device cpu");
    }
    if let Some(root) = &args.dump {
        // As conv's --dump: not a folder, not writable or cannot be made
        // is said before the run, in words (not `File exists`).
        crate::results::atomic::check_folder(root).context("--dump")?;
        std::fs::create_dir_all(root)
            .with_context(|| format!("--dump: cannot create '{}'", root.display()))?;
    }
    let avail = crate::results::memory::available(super::thread_count(args.threads).unwrap_or(1));
    req.check_host_memory(gpu.is_none(), avail)?;
    if gpu.is_none() && dtype != DType::F32 {
        bail!("--dtype {dtype}: the CPU RNN path is f32 only");
    }
    if gpu.is_none() && args.algo != "standard" {
        bail!(
            "--algo {}: cuDNN's algorithms need a GPU (the CPU runs its own kernels)",
            args.algo
        );
    }
    let total = req.runs(gpu.is_some());
    let session = Session::start(args.threads, total as u64, args.quiet)?;
    let ctx = Context {
        threads: session.threads,
        bar: &session.bar,
        runner: session.runner(policy),
    };
    let out = pipeline::run(&req, gpu, &ctx, |env, dtype| {
        args.output.open(env, "rnn", dtype)
    })?;
    session.bar.finish_and_clear();
    out.finish(session.interrupted())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_parse_in_pass_order_once_each() {
        assert_eq!(parse_passes("all").unwrap(), PASSES.to_vec());
        assert_eq!(
            parse_passes("bwd-weights,fwd,fwd").unwrap(),
            vec![Dir::Fwd, Dir::BwdWeights]
        );
        let e = parse_passes("bwd-filter").unwrap_err().to_string();
        assert!(e.contains("bwd-weights") && !e.contains('\n'), "{e}");
    }
}
