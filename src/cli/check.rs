//! `cnnbench check`: verify a whole model's numerics. On the CPU the fast
//! layers run against the naive reference layers (f64-accumulating
//! convolution and GEMM, textbook batch norm, pooling and LRN): one
//! training step each, from the same weights and data, compared on the
//! logits, the loss and every parameter gradient.

use super::model::{cpu_only, resolve};
use super::{init_threads, Device};
use crate::report::table::{aligned, Align};
use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use cnnbench_kernels::conv::reference::rel_l2_error;
use cnnbench_kernels::Isa;
use cnnbench_layers::net::cpu::{CpuNet, CpuOptions};
use cnnbench_layers::net::Graph;
use serde::Serialize;
use std::process::ExitCode;

#[derive(Args, Debug)]
#[command(after_help = "Examples:
    cnnbench check --model resnet50
    cnnbench check --model all --batch 2 --format json")]
pub struct CheckArgs {
    /// Models to check, or `all`
    #[arg(long = "model", value_name = "NAME", default_value = "all")]
    pub models: Vec<String>,
    /// Images per step
    #[arg(long, default_value_t = 2)]
    pub batch: usize,
    /// Which backend to check (the GPU backend for whole models is not built yet)
    #[arg(long, value_enum, default_value_t = Device::Cpu)]
    pub device: Device,
    /// Worker threads [default: all logical CPUs]
    #[arg(long, value_name = "N", env = "CNNBENCH_THREADS")]
    pub threads: Option<usize>,
    /// Seed of the weights, images and labels
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Every compared tensor, not only the worst per model
    #[arg(long, short)]
    pub verbose: bool,
    #[arg(long, value_enum, default_value_t = CheckFormat::Table)]
    pub format: CheckFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CheckFormat {
    Table,
    Json,
}

/// Relative L2 error allowed per layer output and per parameter gradient,
/// each computed from the same inputs: the fp32 threshold of one layer
/// (`conv --check`: 1e-5), times 10 for the end-to-end loss and for the
/// long sums of batch norm and the classifier. Correct layers here show
/// 1e-7 to 1e-5; a real mistake gives errors of order 1.
pub const NETWORK_TOLERANCE: f64 = 1e-4;

#[derive(Serialize)]
struct Compared {
    model: String,
    tensor: String,
    rel_err: f64,
    tolerance: f64,
    passed: bool,
}

pub fn run(args: CheckArgs) -> Result<ExitCode> {
    let graphs = resolve(&args.models)?;
    if args.batch == 0 {
        bail!("--batch must be at least 1");
    }
    if let Some(why) = cpu_only(args.device)? {
        eprintln!("cnnbench: device auto: {why}; checking the CPU");
    }
    let threads = init_threads(args.threads)?;
    let mut all = Vec::new();
    for g in &graphs {
        eprintln!(
            "cnnbench: checking {} at batch {} on the CPU ({threads} threads; the reference is slow)",
            g.name, args.batch
        );
        all.extend(compare_cpu(g, args.batch, args.seed));
    }
    let failed = all.iter().filter(|c| !c.passed).count();
    match args.format {
        CheckFormat::Json => println!("{}", serde_json::to_string_pretty(&all)?),
        CheckFormat::Table => print!("{}", table(&all, args.verbose)),
    }
    if failed > 0 {
        eprintln!("cnnbench: {failed} tensor(s) failed the check");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// One training step of the fast network and of the reference network,
/// compared tensor by tensor.
fn compare_cpu(g: &Graph, batch: usize, seed: u64) -> Vec<Compared> {
    let opts = |reference| CpuOptions {
        isa: Isa::detect(),
        reference,
        seed,
    };
    let mut fast = CpuNet::new(g, batch, opts(false));
    let mut slow = CpuNet::new(g, batch, opts(true));
    let mut out = Vec::new();
    let mut push = |tensor: String, rel_err: f64| {
        out.push(Compared {
            model: g.name.clone(),
            tensor,
            rel_err,
            tolerance: NETWORK_TOLERANCE,
            // NaN (a tensor left unwritten) fails.
            passed: rel_err <= NETWORK_TOLERANCE,
        })
    };
    // End to end: the loss of each network run on its own.
    let lf = fast.forward();
    let ls = slow.forward();
    push("loss (end to end)".into(), rel_l2_error(&[lf], &[ls]));
    // Layer by layer: each reference layer reads the fast network's inputs
    // and output gradients (see `CpuNet::forward_from`).
    let errs = slow.forward_from(&fast);
    for (i, e) in errs.iter().enumerate().skip(1) {
        push(format!("{}.output", g.nodes[i].name), *e);
    }
    fast.backward();
    slow.backward_from(&fast);
    let want: Vec<Vec<f32>> = slow.params_mut().iter().map(|p| p.grad.clone()).collect();
    let rms = rms_of(&want);
    for ((name, p), w) in fast.named_params().into_iter().zip(&want) {
        push(format!("{name}.grad"), grad_error(&p.grad, w, rms));
    }
    out
}

/// The root mean square of every element of every gradient.
fn rms_of(grads: &[Vec<f32>]) -> f64 {
    let (sq, n) = grads
        .iter()
        .flatten()
        .fold((0.0, 0usize), |(s, n), &g| (s + (g as f64).powi(2), n + 1));
    (sq / n.max(1) as f64).sqrt()
}

/// A gradient's L2 error relative to the larger of its own norm and the
/// norm it would have at the network's RMS gradient. The floor matters
/// for sums that cancel (a batch norm's bias gradient sums dy over the
/// batch, and the next batch norm's backward makes dy sum to nearly zero):
/// their tiny true value would turn rounding noise into a large relative
/// error, while the error against the gradients training sees stays small.
fn grad_error(got: &[f32], want: &[f32], rms: f64) -> f64 {
    let diff: f64 = got
        .iter()
        .zip(want)
        .map(|(&g, &w)| (g as f64 - w as f64).powi(2))
        .sum::<f64>()
        .sqrt();
    let norm: f64 = want.iter().map(|&w| (w as f64).powi(2)).sum::<f64>().sqrt();
    diff / norm
        .max(rms * (want.len() as f64).sqrt())
        .max(f64::MIN_POSITIVE)
}

fn table(all: &[Compared], verbose: bool) -> String {
    let fmt = |c: &Compared| {
        vec![
            c.model.clone(),
            c.tensor.clone(),
            format!("{:.2e}", c.rel_err),
            format!("{:.0e}", c.tolerance),
            if c.passed { "pass" } else { "FAIL" }.into(),
        ]
    };
    let mut rows = Vec::new();
    let mut models: Vec<&str> = all.iter().map(|c| c.model.as_str()).collect();
    models.dedup();
    for m in models {
        let of: Vec<&Compared> = all.iter().filter(|c| c.model == m).collect();
        if verbose {
            rows.extend(of.iter().map(|c| fmt(c)));
            continue;
        }
        // The loss, then the worst layer output and the worst gradient,
        // with how many were compared.
        rows.push(fmt(of[0]));
        for (what, suffix) in [("layer outputs", ".output"), ("gradients", ".grad")] {
            let part: Vec<&Compared> = of
                .iter()
                .copied()
                .filter(|c| c.tensor.ends_with(suffix))
                .collect();
            if let Some(worst) = part.iter().max_by(|a, b| a.rel_err.total_cmp(&b.rel_err)) {
                let mut row = fmt(worst);
                row[1] = format!("worst of {} {what}: {}", part.len(), worst.tensor);
                let failed = part.iter().filter(|c| !c.passed).count();
                if failed > 0 {
                    row[4] = format!("FAIL ({failed})");
                }
                rows.push(row);
            }
        }
    }
    use Align::{Left as L, Right as R};
    aligned(
        &["model", "compared", "rel. L2 error", "tolerance", "result"],
        &[L, L, R, R, L],
        &rows,
        false,
    )
}
