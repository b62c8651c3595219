//! Command-line interface: one file per subcommand.

mod conv;
mod gemm;
mod info;
mod output;
mod report;

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
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Time convolution problems (benchdnn descriptors) in all three directions
    Conv(Box<conv::ConvArgs>),
    /// Time dense GEMMs (MxNxK) on the CPU or through cuBLAS
    Gemm(Box<gemm::GemmArgs>),
    /// Merge results (any machines, and peers' CSV) into a markdown report with charts
    Report(report::ReportArgs),
    /// Describe this machine: CPU, ISA, measured FP32 peak, GPU and its libraries, build
    Info(info::InfoArgs),
}

/// Output formats shared by the subcommands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned text for people
    Table,
    /// One row per record, fixed header
    Csv,
    /// {"environment": ..., "records": [...]}
    Json,
    /// A markdown table
    Md,
}

/// Where to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Device {
    Cpu,
    Gpu,
    /// The GPU when one is usable, else the CPU
    Auto,
}

pub fn run() -> Result<ExitCode> {
    let cli = Cli::parse();
    match cli.command {
        Command::Conv(args) => conv::run(*args),
        Command::Gemm(args) => gemm::run(*args),
        Command::Info(args) => info::run(args),
        Command::Report(args) => report::run(args),
    }
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
