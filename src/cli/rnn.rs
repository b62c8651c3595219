//! `cnnbench rnn`: time recurrent layers (DeepBench's RNN kernels)
//! forward, backward data and backward weights, as cuDNN splits them: on
//! the CPU through our kernels, on a GPU through cuDNN's RNN API.

use super::output::OutputArgs;
use super::session::{self, Needs, Session, Target};
use super::{Device, TimingArgs};
use crate::bench::timer::{CudaEvents, Timer, WallClock};
use crate::bench::{Samples, Stats};
use crate::driver::{self, Case};
use crate::note::note;
use crate::problem::rnn::{self as desc, RnnProblem};
use crate::results::record::{Ran, Subject, Timing};
use crate::results::{self, Check, Dir, Environment, Record};
use anyhow::{bail, Context, Result};
use clap::Args;
use cnnbench_kernels::rnn::{reference, Cell, Direction, Outputs, RnnShape, Workspace};
use cnnbench_kernels::{peak, Isa};
use cnnbench_layers::backend::cuda::Gpu;
use cnnbench_layers::gemm::cuda::ensure_peak;
use cnnbench_layers::ops::recurrent::cudnn_algos::RnnAlgo;
use cnnbench_layers::ops::recurrent::cudnn_problem::GpuRnn;
use cnnbench_layers::DType;
use std::path::PathBuf;
use std::process::ExitCode;
use tensors::Tensors;

mod tensors;

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
    /// Read problems from a batch file (one per line, `--cell=`/`--direction=` may lead a line) or builtin:deepbench-rnn
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

/// The three passes, in the order they must first run.
const PASSES: [Dir; 3] = [Dir::Fwd, Dir::BwdData, Dir::BwdWeights];

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

/// The kernels' shape of a parsed problem.
pub fn shape_of(p: &RnnProblem) -> RnnShape {
    RnnShape {
        cell: match p.cell {
            desc::Cell::RnnRelu => Cell::RnnRelu,
            desc::Cell::RnnTanh => Cell::RnnTanh,
            desc::Cell::Lstm => Cell::Lstm,
            desc::Cell::Gru => Cell::Gru,
        },
        direction: match p.direction {
            desc::Direction::Left2Right => Direction::Left2Right,
            desc::Direction::Right2Left => Direction::Right2Left,
            desc::Direction::BidirectionalConcat => Direction::Concat,
            desc::Direction::BidirectionalSum => Direction::Sum,
        },
        layers: p.layers,
        t: p.t,
        mb: p.mb,
        input: p.slc,
        hidden: p.dhc,
    }
}

/// A problem as a line `--from` reads back.
pub fn reproducer(p: &RnnProblem) -> String {
    let mut s = format!("--cell={}", p.cell.name());
    if p.direction != desc::Direction::Left2Right {
        s += &format!(" --direction={}", p.direction.name());
    }
    format!("{s} {p}")
}

/// Where the passes run.
enum Engine<'g> {
    /// Our kernels, on the ISA chosen at run time, with their workspace
    /// (what a pass leaves for the next one).
    Cpu(Isa, Box<Workspace>),
    /// cuDNN, on one algorithm.
    Gpu(Box<GpuRnn<'g>>),
}

/// One pass of one problem.
struct PassCase<'a, 'g> {
    t: &'a mut Tensors,
    engine: &'a mut Engine<'g>,
    shape: RnnShape,
    problem: String,
    pass: Dir,
    dtype: DType,
    algo: &'static str,
    want: Option<&'a Outputs>,
    peak_gflops: f64,
}

impl Case for PassCase<'_, '_> {
    type Record = Record;

    fn run(&mut self) -> Result<()> {
        run_pass(self.engine, self.t, &self.shape, self.pass)
    }

    fn check(&mut self) -> Result<Option<Check>> {
        let Some(want) = self.want else {
            return Ok(None);
        };
        if let Engine::Gpu(g) = &self.engine {
            // The device's outputs into the host tensors the check reads.
            let o = g.download_outputs()?;
            let t = &mut *self.t;
            match self.pass {
                Dir::Fwd => (t.out.y, t.out.hy, t.out.cy) = (o.y, o.hy, o.cy),
                Dir::BwdData => (t.out.dx, t.out.dhx, t.out.dcx) = (o.dx, o.dhx, o.dcx),
                _ => t.out.dw = g.download_weight_grads()?,
            }
        }
        let rel_err = self.t.worst_error(self.pass, want);
        Ok(Some(Check {
            rel_err,
            passed: rel_err <= tolerance(&self.shape, self.dtype),
        }))
    }

    fn record(&mut self, samples: &Samples, check: Option<Check>) -> Result<Record> {
        let (device, kernel, workspace_bytes) = match &self.engine {
            Engine::Cpu(isa, ws) => (
                results::Device::Cpu,
                format!(
                    "gemm_f32({}) + {} gates({isa})",
                    cnnbench_kernels::gemm::gemm_isa(),
                    cell_name(self.shape.cell)
                ),
                ws.bytes(),
            ),
            Engine::Gpu(g) => {
                let (weights, work, reserve) = g.sizes();
                let call = match self.pass {
                    Dir::Fwd => "cudnnRNNForward",
                    Dir::BwdData => "cudnnRNNBackwardData_v8",
                    _ => "cudnnRNNBackwardWeights_v8",
                };
                (
                    results::Device::Gpu,
                    format!(
                        "{call} ({}, {}): weight space {weights} B, reserve {reserve} B",
                        self.algo,
                        self.dtype.math()
                    ),
                    work,
                )
            }
        };
        Ok(Record::new(
            Subject {
                problem: self.problem.clone(),
                dir: self.pass,
                device,
                dtype: self.dtype,
                layout: "time-major".into(),
                algo: self.algo.into(),
            },
            Timing {
                ms: Stats::of(&samples.ms).context("no timed runs")?,
                runs: samples.ms.len(),
                flops: self.shape.flops(),
                peak_gflops: Some(self.peak_gflops),
            },
            Ran {
                check,
                kernel,
                bias: true,
                workspace_bytes,
                cudnn_find_ms: None,
            },
        ))
    }
}

fn cell_name(c: Cell) -> &'static str {
    match c {
        Cell::RnnRelu => "rnn-relu",
        Cell::RnnTanh => "rnn-tanh",
        Cell::Lstm => "lstm",
        Cell::Gru => "gru",
    }
}

/// How far a pass may drift from the f64 reference. In f32, rounding grows
/// with the length of each dot product and with the steps it is carried
/// through (about the square root of their product, as for a
/// convolution's reduction), never below 1e-5; TF32 and half precision as
/// the other subcommands allow them.
fn tolerance(s: &RnnShape, dtype: DType) -> f64 {
    let reduction = (s.input.max(s.output()) + s.hidden) * s.t.max(1);
    match dtype {
        DType::F32 => cnnbench_kernels::conv::f32_tolerance_for_len(reduction),
        other => other.tolerance(reduction),
    }
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
    let mut gpu = match session::choose_device(args.device, Needs::Cudnn)? {
        Target::Gpu(g) => Some(*g),
        Target::Cpu(why) => {
            if let (Some(why), false) = (why, args.quiet) {
                note!("cnnbench: device auto: {why}; using the CPU");
            }
            None
        }
    };
    if gpu.is_some() && args.dump.is_some() {
        bail!("--dump writes the CPU path's tensors; run it with --device cpu");
    }
    if let Some(root) = &args.dump {
        std::fs::create_dir_all(root)
            .with_context(|| format!("--dump: cannot create '{}'", root.display()))?;
    }
    let avail = crate::results::memory::available(super::thread_count(args.threads).unwrap_or(1));
    for p in &problems {
        let need = Tensors::bytes_needed(&shape_of(p), args.check, gpu.is_none());
        match (need, avail) {
            (None, _) => bail!("problem {} is too large to address", reproducer(p)),
            (Some(n), Some(a)) if n as u128 > a.bytes => bail!(
                "problem {} needs {} of host memory, but only {}",
                reproducer(p),
                crate::results::memory::size(n as u128),
                a.describe()
            ),
            _ => {}
        }
    }
    // With several cuDNN algorithms, one that fails does not stop the
    // others.
    let several = gpu.is_some() && algos.len() > 1;
    if gpu.is_none() && dtype != DType::F32 {
        bail!("--dtype {dtype}: the CPU RNN path is f32 only");
    }
    if gpu.is_none() && args.algo != "standard" {
        bail!(
            "--algo {}: cuDNN's algorithms need a GPU (the CPU runs its own kernels)",
            args.algo
        );
    }
    let runs_per_problem = passes.len() * if gpu.is_some() { algos.len() } else { 1 };
    let total = problems.len() * runs_per_problem;
    let session = Session::start(args.threads, total as u64, args.quiet)?;
    let (threads, bar) = (session.threads, &session.bar);
    let runner = session.runner(policy);
    let isa = Isa::detect();
    let (peak_gflops, timer_text, gpu_info) = match &mut gpu {
        Some(g) => (
            ensure_peak(g, dtype)?.tflops * 1e3,
            CudaEvents::DESCRIPTION,
            Some(g.info.clone()),
        ),
        None => (
            crate::bench::timer::cpu_peak_gflops(isa, threads, peak::DEFAULT_REPS)?,
            WallClock.describe(),
            None,
        ),
    };
    let env = Environment {
        gpu: gpu_info,
        ..Environment::here(threads, isa.name().into(), Some(peak_gflops), timer_text)
    };
    let mut out = args.output.open(env, "rnn", dtype)?;
    let mut done = 0;
    'problems: for (index, p) in problems.iter().enumerate() {
        let shape = shape_of(p);
        let problem = reproducer(p);
        let mut t = Tensors::new(&shape, args.timing.seed);
        // The device computes on what its dtype can hold: so does the
        // reference.
        t.round_to(dtype);
        let want = args.check.then(|| {
            bar.set_message(format!("{problem}: the f64 reference"));
            reference::run(
                &shape, &t.x, &t.hx, &t.cx, &t.weights, &t.dy, &t.dhy, &t.dcy,
            )
        });
        let names: Vec<&'static str> = match &gpu {
            None => vec!["gemm+fused-gates"],
            Some(_) => algos.iter().map(|a| a.name()).collect(),
        };
        'engines: for (ai, algo) in names.into_iter().enumerate() {
            // One engine at a time: each holds its own device buffers.
            let engine = match &gpu {
                None => Workspace::try_new(&shape)
                    .map(|ws| Engine::Cpu(isa, Box::new(ws)))
                    .ok_or_else(|| anyhow::anyhow!("out of host memory for the workspace")),
                Some(g) => gpu_engine(g, &shape, dtype, algos[ai], &t),
            };
            let mut engine = match engine {
                Ok(e) => e,
                Err(e) if several => {
                    // One algorithm cuDNN refuses does not stop the others.
                    note!("cnnbench: {problem} --algo {algo}: {e:#}");
                    done += passes.len();
                    bar.set_position(done as u64);
                    continue;
                }
                Err(e) => return Err(e.context(format!("{problem} --algo {algo}"))),
            };
            let mut ran = [false; 3];
            for (pi, &pass) in passes.iter().enumerate() {
                // A backward pass reads what the passes before it left in
                // the workspace: run those once, untimed, if they were not
                // timed.
                let k = PASSES.iter().position(|&d| d == pass).unwrap_or(0);
                for (j, &before) in PASSES[..k].iter().enumerate() {
                    if !ran[j] {
                        match run_pass(&mut engine, &mut t, &shape, before) {
                            Ok(()) => ran[j] = true,
                            Err(e) if several => {
                                note!("cnnbench: {problem} --algo {algo}: {e:#}");
                                done += passes.len() - pi;
                                continue 'engines;
                            }
                            Err(e) => return Err(e.context(problem.clone())),
                        }
                    }
                }
                ran[k] = true;
                bar.set_message(format!("{problem} {} {algo}", pass.name()));
                let mut timer: Box<dyn Timer> = match &gpu {
                    Some(g) => Box::new(CudaEvents(g.event_pair()?)),
                    None => Box::new(WallClock),
                };
                let mut case = PassCase {
                    t: &mut t,
                    engine: &mut engine,
                    shape,
                    problem: problem.clone(),
                    pass,
                    dtype,
                    algo,
                    want: want.as_ref(),
                    peak_gflops,
                };
                let rec = match driver::drive(&mut case, &runner, timer.as_mut()) {
                    Ok(Some(rec)) => rec,
                    Ok(None) => break 'problems,
                    Err(e) if several => {
                        note!("cnnbench: {problem} --algo {algo}: {e:#}");
                        done += passes.len() - pi;
                        continue 'engines;
                    }
                    Err(e) => return Err(e),
                };
                done += 1;
                bar.set_position(done as u64);
                bar.println(format!(
                    "[{done}/{total}] {} {} {algo}: {:.3} ms median, {:.1} GFLOP/s{}",
                    rec.problem,
                    pass.name(),
                    rec.ms.median,
                    rec.gflops,
                    rec.check.map_or(String::new(), |c| format!(
                        ", check {}",
                        if c.passed { "ok" } else { "FAILED" }
                    ))
                ));
                out.push(rec)?;
            }
            if let Some(root) = &args.dump {
                let folder = if problems.len() == 1 {
                    root.clone()
                } else {
                    root.join(dump_folder_name(index, p))
                };
                t.dump(&folder, p, &shape, args.timing.seed, &passes)
                    .context("--dump")?;
            }
        }
    }
    bar.finish_and_clear();
    out.finish(session.interrupted())
}

/// cuDNN on `algo` for a problem, its weights and inputs uploaded.
fn gpu_engine<'g>(
    g: &'g Gpu,
    shape: &RnnShape,
    dtype: DType,
    algo: RnnAlgo,
    t: &Tensors,
) -> Result<Engine<'g>> {
    let mut r = GpuRnn::new(g, *shape, dtype, algo)?;
    r.set_weights(&t.weights)?;
    r.upload_inputs(&t.x, &t.hx, &t.cx, &t.dy, &t.dhy, &t.dcy)?;
    Ok(Engine::Gpu(Box::new(r)))
}

/// One pass: timed by the driver, or once before a later pass that reads
/// what it leaves.
fn run_pass(engine: &mut Engine, t: &mut Tensors, shape: &RnnShape, pass: Dir) -> Result<()> {
    match engine {
        Engine::Cpu(isa, ws) => {
            t.run(*isa, ws, shape, pass);
            Ok(())
        }
        Engine::Gpu(g) => match pass {
            Dir::Fwd => g.forward(),
            Dir::BwdData => g.backward_data(),
            _ => g.backward_weights(),
        }
        .map_err(Into::into),
    }
}

/// `003_deepbench-lstm-h512-mb16-t25`, or `003_lstm-l1t25...` for unnamed
/// problems.
fn dump_folder_name(index: usize, p: &RnnProblem) -> String {
    crate::results::dump::folder_name(index, p.name.as_deref(), || {
        format!("{}-{p}", p.cell.name())
    })
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
