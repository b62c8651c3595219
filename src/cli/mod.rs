//! Command-line interface: one file per subcommand.

mod allreduce;
mod check;
mod children;
mod compare;
mod conv;
mod data;
mod gemm;
mod gpu_paths;
mod info;
mod model;
mod output;
mod progress;
#[cfg(test)]
mod proptests;
mod report;
mod rnn;
mod session;
mod sweep;

use crate::output::{Format, RECORD_FORMATS};
use anyhow::Result;
use clap::{Parser, Subcommand, ValueEnum};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "cnnbench",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("CNNBENCH_GIT"), ", ", env!("CNNBENCH_PROFILE"), ")"),
    about = "Honest, fast benchmarks of convolutional networks, layer by layer",
    long_about = "Honest, fast benchmarks of convolutional networks, layer by layer.\n\n\
        Every timed kernel can be checked against a naive reference (--check); \
        times are medians with their spread, over seeded random (never zero) data."
)]
pub(super) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Time convolution problems (benchdnn descriptors) in all three directions
    Conv(Box<conv::ConvArgs>),
    /// Time dense GEMMs (MxNxK) on the CPU or through cuBLAS
    Gemm(Box<gemm::GemmArgs>),
    /// Time recurrent layers (LSTM, GRU, vanilla RNN; benchdnn RNN descriptors): forward, backward data, backward weights
    Rnn(Box<rnn::RnnArgs>),
    /// Run the same benchmark once per cuDNN folder (or environment variant), side by side
    Compare(compare::CompareArgs),
    /// Merge results (any machines, and peers' CSV) into a markdown report with charts
    Report(report::ReportArgs),
    /// Time whole-model training steps (forward, backward) with a per-layer breakdown, or describe a model
    Model(Box<model::ModelArgs>),
    /// Verify a whole model's numerics: fast layers against the reference layers
    Check(check::CheckArgs),
    /// Describe this machine: CPU, ISA, measured FP32 peak, GPU and its libraries, build
    Info(info::InfoArgs),
    /// Time NCCL's all-reduce over message sizes (DeepBench's), on this machine's GPUs or launched ranks
    Allreduce(Box<allreduce::AllreduceArgs>),
    /// Input data: write a synthetic JPEG tree, time the loader alone, dump one transformed image
    Data(data::DataArgs),
}

/// Where to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Device {
    Cpu,
    Gpu,
    /// The GPU when one is usable, else the CPU
    Auto,
}

/// `CNNBENCH_*` variables that stand for options, checked before anything
/// runs so that a bad value is named as the variable it came from (clap
/// would name the option, which the user never passed).
fn check_env() -> Result<()> {
    for (var, option) in [("CNNBENCH_THREADS", "--threads"), ("CNNBENCH_ISA", "--isa")] {
        match std::env::var(var) {
            Ok(v) => check_option_value(option, &v).map_err(|e| {
                // Said of the variable, not of an option never passed.
                let e = e.to_string().replace(&format!("{option} "), "");
                anyhow::anyhow!("{var}='{}': {e}", v.escape_debug())
            })?,
            Err(std::env::VarError::NotUnicode(v)) => {
                anyhow::bail!("{var}='{}': not valid UTF-8", v.to_string_lossy())
            }
            Err(std::env::VarError::NotPresent) => {}
        }
    }
    Ok(())
}

/// A value of an option that takes more than clap checks (thread counts,
/// batches, dtypes, layouts, ISAs), checked as the run would check it: for
/// values that come from elsewhere than the command line (a variable, an
/// item of a sweep's list).
fn check_option_value(option: &str, value: &str) -> Result<()> {
    match option {
        "--threads" => match value.parse::<usize>() {
            Ok(n) if n > 0 => thread_count(Some(n)).map(|_| ()),
            _ => anyhow::bail!("expected a positive number of threads"),
        },
        "--batch" => crate::plan::parse_batch(value).map(|_| ()),
        "--dtype" => cnnbench_layers::DType::parse(value).map(|_| ()),
        "--layout" => cnnbench_layers::Layout::parse(value).map(|_| ()),
        "--isa" if value != "auto" && cnnbench_kernels::Isa::parse(value).is_none() => {
            anyhow::bail!("expected auto, avx512, avx2 or scalar")
        }
        _ => Ok(()),
    }
}

/// clap's error message, without `error: ` and the usage and tips after
/// it. The message may span lines where a value holds a newline: `main`
/// escapes it into one.
fn clap_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let text = text.strip_prefix("error: ").unwrap_or(&text);
    let end = ["\n\n", "\n  [", "\n  tip:", "\nUsage:"]
        .iter()
        .filter_map(|m| text.find(m))
        .min()
        .unwrap_or(text.len());
    match text[..end].trim_end() {
        "" => "bad arguments".to_string(),
        line => line.to_string(),
    }
}

/// A clap error as one line (exit 2), or help and version as clap prints
/// them.
fn clap_error(e: clap::Error) -> Result<ExitCode> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        // clap's own printing keeps its colours; a closed or full stdout
        // ends as any other output would (141, or one line).
        match e.print() {
            Ok(()) => return Ok(ExitCode::from(e.exit_code() as u8)),
            Err(io) if io.kind() == std::io::ErrorKind::BrokenPipe => {
                return Err(crate::output::ClosedStdout.into())
            }
            Err(io) => anyhow::bail!("writing to stdout: {io}"),
        }
    }
    let arg = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        _ => None,
    };
    if e.kind() == ErrorKind::UnknownArgument {
        if let Some(a) = arg.filter(|a| a.starts_with('-') && a[1..].parse::<f64>().is_ok()) {
            anyhow::bail!("unexpected value '{a}': negative numbers are not accepted");
        }
    }
    anyhow::bail!("{}", clap_line(&e))
}

pub fn run() -> Result<ExitCode> {
    // Lossy: a non-UTF-8 argument is clap's to refuse (or to take, as a
    // path), never a panic here.
    let raw: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    // Help and version never depend on the environment.
    let asks_for_help = raw
        .iter()
        .any(|a| ["--help", "-h", "--version", "-V", "help"].contains(&a.as_str()));
    if !asks_for_help {
        check_env()?;
    }
    if raw.first().is_some_and(|c| c == "conv" || c == "gemm")
        && !raw.iter().any(|a| a == "--help" || a == "-h")
        && !sweep::lists(&raw).is_empty()
    {
        crate::signals::install()?;
        let format = option_value(&raw, "--format")
            .map(|f| crate::output::parse(&f, RECORD_FORMATS))
            .transpose()?
            .unwrap_or(Format::Table);
        let quiet = raw.iter().any(|a| a == "--quiet" || a == "-q");
        // Checked with every child's command line before the first runs.
        let out = option_value(&raw, "--out").map(std::path::PathBuf::from);
        return sweep::run(
            &raw,
            format,
            out.as_deref(),
            quiet,
            crate::signals::stop_flag(),
        );
    }
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => return clap_error(e),
    };
    match cli.command {
        Command::Conv(args) => conv::run(*args),
        Command::Gemm(args) => gemm::run(*args),
        Command::Rnn(args) => rnn::run(*args),
        Command::Model(args) => model::run(*args),
        Command::Check(args) => check::run(args),
        Command::Info(args) => info::run(args),
        Command::Allreduce(args) => allreduce::run(*args),
        Command::Data(args) => data::run(args),
        Command::Report(args) => report::run(args),
        Command::Compare(args) => compare::run(args),
    }
}

/// Timing and data options shared by the measuring subcommands.
#[derive(clap::Args, Clone, Debug)]
pub struct TimingArgs {
    /// Untimed runs before timing [default: 3]
    #[arg(long, value_name = "N")]
    pub warmup: Option<usize>,
    /// Timed runs; alone it means exactly N [default: at least 10, and at least --min-time]
    #[arg(long, value_name = "N")]
    pub iters: Option<usize>,
    /// Keep timing until this many seconds were spent [default: 1]
    #[arg(long, value_name = "SECS")]
    pub min_time: Option<f64>,
    /// Seed of the random input data
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

impl TimingArgs {
    /// The run policy, or a one-line error for values that make no sense.
    pub fn policy(&self) -> Result<crate::bench::RunPolicy> {
        use crate::bench::RunPolicy;
        if let Some(t) = self.min_time {
            if !(t.is_finite() && t >= 0.0) {
                anyhow::bail!("--min-time must be a non-negative number of seconds, got {t}");
            }
            if t > RunPolicy::MAX_MIN_TIME {
                anyhow::bail!(
                    "--min-time {t:e} is more than the most cnnbench takes, {} seconds (a day)",
                    RunPolicy::MAX_MIN_TIME
                );
            }
        }
        if self.iters == Some(0) {
            anyhow::bail!("--iters must be at least 1");
        }
        for (name, n) in [("--iters", self.iters), ("--warmup", self.warmup)] {
            if let Some(n) = n.filter(|&n| n > RunPolicy::MAX_RUNS) {
                anyhow::bail!(
                    "{name} {n} is more than the most cnnbench takes, {} runs",
                    RunPolicy::MAX_RUNS
                );
            }
        }
        Ok(crate::bench::RunPolicy::from_options(
            self.warmup,
            self.iters,
            self.min_time,
        ))
    }
}

/// The value of `--name V` or `--name=V` in raw arguments.
fn option_value(args: &[String], name: &str) -> Option<String> {
    args.iter().enumerate().find_map(|(i, a)| {
        if a == name {
            args.get(i + 1).cloned()
        } else {
            a.strip_prefix(name)
                .and_then(|r| r.strip_prefix('='))
                .map(String::from)
        }
    })
}

/// The thread count to use: all logical CPUs by default; at least 1, and at
/// most 64 per logical CPU (enough for oversubscription experiments, short
/// of spending minutes spawning threads).
pub fn thread_count(threads: Option<usize>) -> Result<usize> {
    let cores = crate::results::environment::logical_cores();
    match threads {
        None => Ok(cores),
        Some(0) => anyhow::bail!("--threads must be at least 1"),
        Some(n) if n > 64 * cores => {
            anyhow::bail!("--threads {n} is more than 64 per logical CPU ({cores} here)")
        }
        Some(n) => Ok(n),
    }
}

/// Builds rayon's one global pool with [`thread_count`] threads and returns
/// the count.
pub fn init_threads(threads: Option<usize>) -> Result<usize> {
    let n = thread_count(threads)?;
    rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .build_global()
        .map_err(|e| anyhow::anyhow!("cannot start {n} threads: {e}"))?;
    Ok(n)
}
