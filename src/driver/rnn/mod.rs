//! `cnnbench rnn`'s pipeline: recurrent layers (DeepBench's RNN kernels)
//! timed forward, backward data and backward weights, as cuDNN splits
//! them: on the CPU through our kernels, on a GPU through cuDNN's RNN API,
//! each pass through the one driver loop.

use super::context::Context;
use crate::bench::timer::{CudaEvents, Timer, WallClock};
use crate::bench::{Samples, Stats};
use crate::driver::{self, Case};
use crate::note::note;
use crate::output::sink::Output;
use crate::problem::rnn::{self as desc, RnnProblem};
use crate::results::memory::Available;
use crate::results::record::{Ran, Subject, Timing};
use crate::results::{self, Check, Dir, Environment, Record};
use anyhow::{bail, Context as _, Result};
use cnnbench_kernels::rnn::{reference, Cell, Direction, Outputs, RnnShape, Workspace};
use cnnbench_kernels::{peak, Isa};
use cnnbench_layers::backend::cuda::rnn_algo::RnnAlgo;
use cnnbench_layers::backend::cuda::Gpu;
use cnnbench_layers::gemm::cuda::ensure_peak;
use cnnbench_layers::ops::recurrent::cudnn_problem::GpuRnn;
use cnnbench_layers::DType;
use std::path::PathBuf;
use tensors::Tensors;

mod tensors;

/// The three passes, in the order they must first run.
pub const PASSES: [Dir; 3] = [Dir::Fwd, Dir::BwdData, Dir::BwdWeights];

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

/// What an RNN run is, parsed (the command line's part).
pub struct Request {
    pub problems: Vec<RnnProblem>,
    /// Each pass once, in pass order.
    pub passes: Vec<Dir>,
    pub dtype: DType,
    /// cuDNN's algorithms (the CPU runs its own kernels).
    pub algos: Vec<RnnAlgo>,
    /// The CPU kernels' instruction set (`--isa`).
    pub isa: Isa,
    /// Compare every output of each pass with a naive f64 reference.
    pub check: bool,
    pub seed: u64,
    /// `--dump`'s folder (the CPU path's tensors).
    pub dump: Option<PathBuf>,
}

impl Request {
    /// Every problem's tensors (with the reference's when checking, and
    /// the workspace on the `cpu`) fit in host memory: refused in one line
    /// before anything runs.
    pub fn check_host_memory(&self, cpu: bool, avail: Option<Available>) -> Result<()> {
        let (problems, check) = (&self.problems, self.check);
        for p in problems {
            let need = Tensors::bytes_needed(&shape_of(p), check, cpu);
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
        Ok(())
    }

    /// The timed runs: every pass of every problem, on every cuDNN
    /// algorithm on a GPU.
    pub fn runs(&self, on_gpu: bool) -> usize {
        let runs_per_problem = self.passes.len() * if on_gpu { self.algos.len() } else { 1 };
        self.problems.len() * runs_per_problem
    }
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
            Engine::Cpu(isa, ws) => {
                // Everything runs on `isa`, except that with `--isa scalar`
                // the sequence-long products (`gemm::sgemm`: the `gemm`
                // crate's tiles) run on the crate's own pick, named apart.
                let gemm_isa = cnnbench_kernels::gemm::nearest(*isa);
                let gemm = if gemm_isa == *isa {
                    format!("gemm_f32({isa})")
                } else {
                    format!("gemm_f32({isa}; gemm crate {gemm_isa})")
                };
                (
                    results::Device::Cpu,
                    format!("{gemm} + {} gates({isa})", cell_name(self.shape.cell)),
                    ws.bytes(),
                )
            }
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

/// Times every pass of every problem on `gpu` (cuDNN, on each of the
/// request's algorithms) or, without one, on the CPU's kernels; the
/// output, to finish.
pub fn run(
    req: &Request,
    mut gpu: Option<Gpu>,
    ctx: &Context,
    open: impl FnOnce(Environment, DType) -> Result<Output>,
) -> Result<Output> {
    let (problems, passes, dtype, algos) = (&req.problems, &req.passes, req.dtype, &req.algos);
    // With several cuDNN algorithms, one that fails does not stop the
    // others.
    let several = gpu.is_some() && algos.len() > 1;
    let total = req.runs(gpu.is_some());
    let (threads, bar, runner) = (ctx.threads, ctx.bar, &ctx.runner);
    let isa = req.isa;
    let (peak_gflops, timer_text, gpu_info) = match &mut gpu {
        Some(g) => (
            ensure_peak(g, dtype)?.tflops * 1e3,
            CudaEvents::DESCRIPTION,
            Some(g.info.clone()),
        ),
        // The best ISA's peak, as conv's, whatever `--isa` runs.
        None => (
            crate::bench::timer::cpu_peak_gflops(Isa::detect(), threads, peak::DEFAULT_REPS)?,
            WallClock.describe(),
            None,
        ),
    };
    let env = Environment {
        gpu: gpu_info,
        ..Environment::here(threads, isa.name().into(), Some(peak_gflops), timer_text)
    };
    let mut out = open(env, dtype)?;
    let mut done = 0;
    'problems: for (index, p) in problems.iter().enumerate() {
        let shape = shape_of(p);
        let problem = reproducer(p);
        let mut t = Tensors::new(&shape, req.seed);
        // The device computes on what its dtype can hold: so does the
        // reference.
        t.round_to(dtype);
        let want = req.check.then(|| {
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
                let rec = match driver::drive(&mut case, runner, timer.as_mut()) {
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
            if let Some(root) = &req.dump {
                let folder = if problems.len() == 1 {
                    root.clone()
                } else {
                    root.join(dump_folder_name(index, p))
                };
                t.dump(&folder, p, &shape, req.seed, passes)
                    .context("--dump")?;
            }
        }
    }
    Ok(out)
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
