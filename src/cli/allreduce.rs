//! `cnnbench allreduce`: NCCL's all-reduce over message sizes (DeepBench's
//! by default), f32/f16/bf16, in place and out of place, over this
//! machine's GPUs (`--gpus`) or the ranks a launcher started
//! (`--launcher`). What is measured and how: [`crate::driver::allreduce`];
//! its output: [`crate::output::allreduce`].

use super::output::StoreArgs;
use super::session::Session;
use super::TimingArgs;
use crate::dist::launch::{self, LauncherChoice};
use crate::driver::allreduce::{self as measure, DEEPBENCH_SIZES, DEFAULT_RUNS, DEFAULT_WARMUP};
use crate::driver::replicas::{self, Replicas};
use crate::output::{self, Format, RECORD_FORMATS};
use anyhow::{bail, Result};
use clap::Args;
use cnnbench_layers::DType;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args, Debug)]
#[command(after_help = "Examples:
    cnnbench allreduce --gpus 8
    cnnbench allreduce --gpus 2 --sizes 1048576,268435456 --dtype f32,bf16 --placement out
    torchrun --nnodes 2 --nproc-per-node 8 --no-python cnnbench allreduce --launcher torchrun")]
pub struct AllreduceArgs {
    /// Elements per message: `deepbench` (its seven sizes, 100K to 64.5M floats) or a comma list
    #[arg(long, default_value = "deepbench", value_name = "LIST")]
    sizes: String,
    /// Element types, comma-separated: f32, f16, bf16
    #[arg(long, default_value = "f32", value_name = "LIST")]
    dtype: String,
    /// in (the result overwrites the input), out (a separate output), or both
    #[arg(long, default_value = "both", value_name = "WHERE")]
    placement: String,
    /// This machine's GPUs, one rank each in this process: a count or device ids (0,2,3)
    #[arg(long, value_name = "N|IDS", conflicts_with = "launcher")]
    gpus: Option<String>,
    /// One rank per process, started by torchrun --no-python or srun (see `model --launcher`)
    #[arg(long, value_enum, value_name = "WHICH")]
    launcher: Option<LauncherChoice>,
    /// With --launcher: how long ranks wait for each other [default: 300]
    #[arg(long, value_name = "SECS", requires = "launcher")]
    rendezvous_timeout: Option<f64>,
    #[command(flatten)]
    timing: TimingArgs,
    #[arg(long, default_value = "table", value_parser = output::parser(RECORD_FORMATS))]
    format: Format,
    #[command(flatten)]
    store: StoreArgs,
    #[arg(long, short)]
    quiet: bool,
}

fn parse_sizes(s: &str) -> Result<Vec<usize>> {
    if s == "deepbench" {
        return Ok(DEEPBENCH_SIZES.to_vec());
    }
    s.split(',')
        .map(|p| match p.trim().parse::<usize>() {
            Ok(n) if n > 0 && n <= 1 << 31 => Ok(n),
            _ => bail!("--sizes '{s}': expected deepbench or element counts from 1 to 2^31"),
        })
        .collect()
}

fn parse_dtypes(s: &str) -> Result<Vec<DType>> {
    s.split(',')
        .map(|p| match DType::parse(p.trim()) {
            Ok(d @ (DType::F32 | DType::F16 | DType::Bf16)) => Ok(d),
            _ => bail!("--dtype '{s}': NCCL all-reduces f32, f16 or bf16"),
        })
        .collect()
}

fn parse_placement(s: &str) -> Result<Vec<bool>> {
    match s {
        "in" => Ok(vec![true]),
        "out" => Ok(vec![false]),
        "both" => Ok(vec![true, false]),
        _ => bail!("--placement '{s}': expected in, out or both"),
    }
}

pub fn run(args: AllreduceArgs) -> Result<ExitCode> {
    let sizes = parse_sizes(&args.sizes)?;
    let dtypes = parse_dtypes(&args.dtype)?;
    let placements = parse_placement(&args.placement)?;
    let runs = args.timing.iters.unwrap_or(DEFAULT_RUNS);
    let warmup = args.timing.warmup.unwrap_or(DEFAULT_WARMUP);
    args.timing.policy()?;
    if args.timing.min_time.is_some() {
        bail!("--min-time: allreduce runs a fixed count (--iters), the same on every rank");
    }
    let replicas = match (&args.gpus, args.launcher) {
        (Some(s), _) => {
            let ids = replicas::parse_gpus(s)?;
            replicas::check_devices(&format!("--gpus {s}"), &ids)?;
            Replicas::InProcess(ids)
        }
        (None, Some(choice)) => {
            let secs = args.rendezvous_timeout.unwrap_or(300.0);
            if !(secs.is_finite() && secs > 0.0 && secs <= 86_400.0) {
                bail!("--rendezvous-timeout must be more than 0 and at most 86400 seconds, got {secs}");
            }
            let world = launch::from_process_env(choice)?;
            replicas::launched_device(&world)?;
            Replicas::Launched {
                world,
                timeout: Duration::from_secs_f64(secs),
            }
        }
        (None, None) => Replicas::InProcess(replicas::all_devices("allreduce")?),
    };
    let cases = measure::cases(&sizes, &dtypes, &placements);
    let session = Session::start(Some(1), cases.len() as u64, args.quiet || !replicas.leads())?;
    let measured = measure::run(
        &replicas,
        &cases,
        (warmup, runs),
        session.threads,
        &session.bar,
    )?;
    let Some(file) = measured else {
        return Ok(ExitCode::SUCCESS);
    };
    let failed = file.records.iter().any(|r| r.status != "ok");
    let store = args.store.create("allreduce", &file.environment)?;
    let rendered = output::allreduce::render(&file, args.format)?;
    output::sink::save_run(
        args.store.out.as_deref(),
        || Ok(rendered.clone()),
        store.as_ref(),
        &file,
        true,
    )?;
    output::sink::end_run(
        args.store.out.as_deref(),
        rendered,
        file.records.len(),
        store.as_ref(),
        false,
    )?;
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deepbench_sizes_and_bad_lists() {
        assert_eq!(parse_sizes("deepbench").unwrap().len(), 7);
        assert_eq!(parse_sizes("1,2").unwrap(), vec![1, 2]);
        for bad in ["", "0", "x", "1,,2", "4294967296"] {
            let e = parse_sizes(bad).unwrap_err().to_string();
            assert!(e.starts_with("--sizes"), "{e}");
        }
        assert!(parse_dtypes("tf32").is_err());
        assert_eq!(parse_dtypes("f32,bf16").unwrap().len(), 2);
        assert!(parse_placement("sideways").is_err());
    }
}
