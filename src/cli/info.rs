//! `cnnbench info`: the machine and the build, with the FP32 peak measured
//! by a register-only FMA loop per ISA; on a GPU machine, the GPU, the
//! libraries as loaded, and its peak per precision (from its properties,
//! and measured with cuBLAS).

use crate::output::{self, Format, TABLE_OR_JSON};
use anyhow::Result;
use clap::Args;
use std::process::ExitCode;

#[derive(Args)]
pub struct InfoArgs {
    #[arg(long, default_value = "table", value_parser = output::parser(TABLE_OR_JSON))]
    format: Format,
    /// Threads for the all-threads peak [default: all logical CPUs]
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
}

pub fn run(args: InfoArgs) -> Result<ExitCode> {
    let threads = super::thread_count(args.threads)?;
    let info = crate::driver::info::gather(threads)?;
    crate::output::print(&crate::output::info::render(&info, args.format)?)?;
    Ok(ExitCode::SUCCESS)
}
