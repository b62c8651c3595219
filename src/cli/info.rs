//! `cnnbench info`: the machine and the build, with the FP32 peak measured
//! by a register-only FMA loop per ISA.

use super::Format;
use crate::results::environment::{self, BuildInfo};
use anyhow::Result;
use clap::Args;
use cnnbench_kernels::{peak, Isa};
use serde::Serialize;
use std::process::ExitCode;

#[derive(Args)]
pub struct InfoArgs {
    /// Output format (table, json)
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Threads for the all-threads peak [default: all logical CPUs]
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
}

#[derive(Serialize)]
struct IsaPeak {
    isa: String,
    gflops_1_thread: f64,
    gflops_all_threads: f64,
}

#[derive(Serialize)]
struct Info {
    cpu: String,
    host: String,
    os: String,
    cores: usize,
    threads: usize,
    isa_detected: String,
    isa_used: String,
    isa_supported: Vec<String>,
    /// Peak FP32 GFLOP/s per ISA: an FMA = 2 FLOPs, register-only loop, best of `peak::DEFAULT_REPS`.
    peak: Vec<IsaPeak>,
    gpu: String,
    cnnbench: BuildInfo,
}

pub fn run(args: InfoArgs) -> Result<ExitCode> {
    let threads = super::thread_count(args.threads)?;
    let mut peak = Vec::new();
    for isa in Isa::supported() {
        let measure =
            |t| peak::measure_gflops(isa, t, peak::DEFAULT_REPS).map_err(anyhow::Error::msg);
        peak.push(IsaPeak {
            isa: isa.name().into(),
            gflops_1_thread: measure(1)?,
            gflops_all_threads: measure(threads)?,
        });
    }
    let info = Info {
        cpu: environment::cpu_model(),
        host: environment::host_name(),
        os: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
        cores: environment::logical_cores(),
        threads,
        isa_detected: Isa::detect().name().into(),
        isa_used: Isa::detect().name().into(),
        isa_supported: Isa::supported().iter().map(|i| i.name().into()).collect(),
        peak,
        gpu: "not probed: the GPU path is not built yet".into(),
        cnnbench: BuildInfo::current(),
    };
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&info)?),
        Format::Table | Format::Md | Format::Csv => print!("{}", text(&info)),
    }
    Ok(ExitCode::SUCCESS)
}

fn text(i: &Info) -> String {
    let mut s = String::new();
    let b = &i.cnnbench;
    s += &format!(
        "cnnbench      {} (git {}, {} build)\n",
        b.version, b.git, b.profile
    );
    s += &format!("cpu           {}\n", i.cpu);
    s += &format!("host          {} ({})\n", i.host, i.os);
    s += &format!("logical cpus  {}\n", i.cores);
    s += &format!(
        "isa           {} (supported: {})\n",
        i.isa_detected,
        i.isa_supported.join(", ")
    );
    s += &format!("gpu           {}\n", i.gpu);
    s += &format!(
        "\nFP32 peak, measured (register-only FMA loop, FMA = 2 FLOPs, best of {}):\n",
        peak::DEFAULT_REPS
    );
    s += &format!(
        "{:<8} {:>16} {:>20}\n",
        "isa",
        "1 thread GFLOP/s",
        format!("{} threads GFLOP/s", i.threads)
    );
    for p in &i.peak {
        s += &format!(
            "{:<8} {:>16.1} {:>20.1}\n",
            p.isa, p.gflops_1_thread, p.gflops_all_threads
        );
    }
    s
}
