//! `cnnbench conv`'s pipeline: the problems planned for the device the
//! command line chose (batch sizes, algorithms that can run), then timed
//! direction by direction, on the CPU (here) or the GPU ([`gpu`]), each
//! case through the one driver loop.

pub mod gpu;

use super::context::Context;
use crate::bench::timer::{Timer, WallClock};
use crate::bench::{RunPolicy, Samples, Stats};
use crate::driver::{self, Case};
use crate::output::sink::Output;
use crate::plan::{self, AlgoChoice, DirSpec};
use crate::problem::ConvProblem;
use crate::results::dump::{self, DumpInfo};
use crate::results::memory::Available;
use crate::results::record::{Ran, Subject, Timing};
use crate::results::{self, Check, Environment, Record};
use anyhow::{bail, Context as _, Result};
use cnnbench_kernels::conv::{ConvAlgo, ConvShape, Direction};
use cnnbench_kernels::{peak, Isa};
use cnnbench_layers::conv::{
    autotune, cpu::CpuConv, reference_outputs, worst_rel_err, ConvTensors,
};
use cnnbench_layers::cuda::{ConvApi, Gpu};
use cnnbench_layers::{DType, Layout};
use indicatif::ProgressBar;
use std::path::PathBuf;

pub use gpu::DEFAULT_WORKSPACE_LIMIT;

/// What `conv` was asked, parsed (the command line's part): the problems
/// (with a fixed `--batch` applied), and the options whose meaning
/// depends on the device as given.
pub struct Request {
    pub problems: Vec<ConvProblem>,
    pub batch: Option<plan::BatchChoice>,
    pub dirs: Vec<DirSpec>,
    pub dtype: DType,
    pub layout: Layout,
    pub workspace_limit: Option<usize>,
    /// `--algo`: its names differ between the CPU and cuDNN.
    pub algo: String,
    /// `--isa`, for the CPU.
    pub isa: String,
    pub cold_cache: bool,
    /// `--api`: cuDNN's legacy or graph API (GPU only).
    pub api: ConvApi,
    /// `--norm-conv`: each direction as NormConv (GPU only).
    pub norm_conv: bool,
    pub check: bool,
    pub seed: u64,
    pub dump: Option<PathBuf>,
    pub policy: RunPolicy,
    /// Host memory: the f32 tensors (and the reference when checking) live
    /// on the host for either device.
    pub avail: Option<Available>,
    /// The threads the run will start: the CPU plans' workspace depends on
    /// them.
    pub threads: usize,
}

impl Request {
    /// Every problem's tensors fit in host memory (unless `--batch max`
    /// will choose the batch): refused in one line before the device is
    /// chosen.
    pub fn check_host_memory(&self) -> Result<()> {
        if self.batch != Some(plan::BatchChoice::Max) {
            for p in &self.problems {
                plan::check_fits(&p.shape, self.check, 0, self.avail)
                    .with_context(|| format!("problem {p}"))?;
            }
        }
        Ok(())
    }
}

/// FMA-loop repetitions between records (a few ms): on a shared machine the
/// start-up measurement may have caught a slow spell, and a peak that is
/// too low would inflate every "% of peak".
const PEAK_REPS_BETWEEN_RECORDS: usize = 3;

/// Everything decided before the first run.
pub struct Setup {
    pub problems: Vec<ConvProblem>,
    pub dirs: Vec<DirSpec>,
    pub policy: RunPolicy,
    /// Compare every output with the naive reference.
    check: bool,
    /// Seed of the random tensors.
    seed: u64,
    /// `--dump`'s folder.
    dump: Option<PathBuf>,
}

/// Where the problems run, with what was decided for that device.
pub enum Target {
    Cpu {
        algo: AlgoChoice,
        isa: Isa,
        /// Why `--device auto` chose the CPU.
        no_gpu: Option<String>,
        /// The algorithms that can run, per problem and direction: the
        /// plan, made once.
        candidates: Vec<Vec<Vec<&'static dyn ConvAlgo>>>,
    },
    Gpu(Box<gpu::GpuSetup>),
}

/// The run planned on `gpu`, or on the CPU (`no_gpu`: why not the GPU,
/// with `--device auto`): batch sizes chosen, and every algorithm that
/// cannot run refused before anything runs.
pub fn plan(req: Request, gpu: Option<Gpu>, no_gpu: Option<String>) -> Result<(Setup, Target)> {
    let Request {
        mut problems,
        batch,
        dirs,
        dtype,
        layout,
        workspace_limit,
        algo,
        isa,
        cold_cache,
        api,
        norm_conv,
        check,
        seed,
        dump,
        policy,
        avail,
        threads,
    } = req;
    let target = match gpu {
        Some(g) => {
            let algo = plan::GpuAlgoChoice::parse(&algo, &dirs)?;
            if norm_conv {
                gpu::norm_conv::allowed(
                    dtype,
                    layout,
                    &algo,
                    dump.is_some(),
                    cold_cache,
                    &problems,
                )?;
            }
            Target::Gpu(Box::new(gpu::GpuSetup::new(
                g,
                algo,
                dtype,
                layout,
                workspace_limit,
                cold_cache,
                api,
                norm_conv,
            )?))
        }
        None => {
            if norm_conv {
                bail!(
                    "--norm-conv: GPU only: {}",
                    no_gpu.as_deref().unwrap_or("add --device gpu")
                );
            }
            if api != ConvApi::Legacy {
                bail!(
                    "--api {}: GPU only: {}",
                    api.name(),
                    no_gpu.as_deref().unwrap_or("add --device gpu")
                );
            }
            if dtype != DType::F32 || layout != Layout::Nhwc {
                bail!(
                    "--dtype {dtype} --layout {layout}: the CPU path runs f32 in nhwc only{}",
                    no_gpu.map_or(String::new(), |w| format!(" ({w})"))
                );
            }
            let algo = plan::parse_algo(&algo)?;
            let isa = plan::resolve_isa(&isa)?;
            Target::Cpu {
                algo,
                isa,
                no_gpu,
                // Planned below, once the batch is known.
                candidates: Vec::new(),
            }
        }
    };
    if let (Target::Gpu(_), Some(plan::BatchChoice::Max)) = (&target, batch) {
        // Not even batch 1 within cuDNN's tensor limit: say that, not
        // "does not fit in memory".
        for p in &problems {
            cnnbench_layers::conv::cuda::within_tensor_limit(&ConvShape { mb: 1, ..p.shape })
                .map_err(|e| anyhow::anyhow!("problem {p} at batch 1: {e}"))?;
        }
    }
    // The CPU plans' workspace, on a pool of the run's size (the global
    // pool starts later): what they hold beside the tensors.
    let cpu = match &target {
        Target::Cpu { algo, isa, .. } => {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .with_context(|| format!("cannot start {threads} threads"))?;
            Some((pool, *algo, *isa))
        }
        Target::Gpu(_) => None,
    };
    let workspace = |shape: &ConvShape| match &cpu {
        Some((pool, algo, isa)) => pool.install(|| plan::cpu_workspace(*algo, shape, &dirs, *isa)),
        None => 0,
    };
    if batch == Some(plan::BatchChoice::Max) {
        // The largest batch whose tensors fit: in host memory (which holds
        // the f32 tensors and, with --check, the reference, and on the CPU
        // the plans) and, on a GPU, in device memory beside the workspace
        // limit.
        for p in &mut problems {
            let host_fits = |mb: usize| {
                let shape = ConvShape { mb, ..p.shape };
                plan::check_fits(&shape, check, workspace(&shape), avail).is_ok()
            };
            let found = match &target {
                Target::Gpu(g) => plan::max_batch(
                    |mb| host_fits(mb) && g.fits(&ConvShape { mb, ..p.shape }),
                    plan::MAX_BATCH_CAP,
                ),
                Target::Cpu { .. } => plan::max_batch(host_fits, plan::MAX_BATCH_CAP),
            };
            let Some(mb) = found else {
                bail!("problem {p}: not even batch 1 fits in memory");
            };
            p.shape.mb = mb;
        }
    }
    if let Target::Gpu(_) = &target {
        // cuDNN refuses tensors of 2^31 elements or more: say so before
        // running anything.
        for p in &problems {
            cnnbench_layers::conv::cuda::within_tensor_limit(&p.shape)
                .map_err(|e| anyhow::anyhow!("problem {p}: {e}"))?;
        }
    }
    let mut target = target;
    if let Target::Cpu {
        algo,
        isa,
        candidates,
        ..
    } = &mut target
    {
        // Fail before running anything on algorithms that cannot run.
        for p in &problems {
            let per_dir = dirs
                .iter()
                .map(|d| plan::candidates(*algo, &p.shape, d.dir, *isa))
                .collect::<Result<Vec<_>>>()
                .with_context(|| format!("problem {p}"))?;
            candidates.push(per_dir);
        }
    }
    if let Target::Cpu { .. } = &target {
        // Tensors that fit but plans that would not: refused here, not
        // by an aborted allocation in the middle of the run.
        for p in &problems {
            plan::check_fits(&p.shape, check, workspace(&p.shape), avail)
                .with_context(|| format!("problem {p}"))?;
        }
    }
    Ok((
        Setup {
            problems,
            dirs,
            policy,
            check,
            seed,
            dump,
        },
        target,
    ))
}

/// Runs the planned problems on their target; the output, to finish.
pub fn run(
    s: &Setup,
    target: Target,
    ctx: &Context,
    open: impl FnOnce(Environment, DType) -> Result<Output>,
) -> Result<Output> {
    match target {
        Target::Gpu(g) => gpu::run(s, *g, ctx, open),
        Target::Cpu {
            algo,
            isa,
            candidates,
            ..
        } => run_cpu(s, algo, isa, &candidates, ctx, open),
    }
}

/// The FP32 peak of the best ISA at the run's thread count: what "% of
/// peak" means on the CPU. Measured at the start and again before every
/// record; the best so far is what a record is of.
struct BestPeak {
    threads: usize,
    best: f64,
}

impl BestPeak {
    fn measure(threads: usize) -> Result<BestPeak> {
        let best =
            crate::bench::timer::cpu_peak_gflops(Isa::detect(), threads, peak::DEFAULT_REPS)?;
        Ok(BestPeak { threads, best })
    }

    fn remeasure(&mut self) -> Result<f64> {
        let p = crate::bench::timer::cpu_peak_gflops(
            Isa::detect(),
            self.threads,
            PEAK_REPS_BETWEEN_RECORDS,
        )?;
        self.best = self.best.max(p);
        Ok(self.best)
    }
}

/// One direction of one problem with one algorithm on the CPU, planned.
struct CpuCase<'a> {
    conv: CpuConv,
    t: &'a mut ConvTensors,
    want: Option<&'a [(&'static str, Vec<f32>)]>,
    prob: &'a ConvProblem,
    d: DirSpec,
    algo: &'static dyn ConvAlgo,
    peak: &'a mut BestPeak,
}

impl Case for CpuCase<'_> {
    type Record = Record;

    fn run(&mut self) -> Result<()> {
        self.conv.run(self.t);
        Ok(())
    }

    fn check(&mut self) -> Result<Option<Check>> {
        Ok(self.want.map(|w| {
            let rel_err = worst_rel_err(self.t, self.d.dir, self.d.bias, w);
            Check {
                rel_err,
                passed: rel_err <= self.algo.tolerance(&self.prob.shape, self.d.dir),
            }
        }))
    }

    fn record(&mut self, samples: &Samples, check: Option<Check>) -> Result<Record> {
        let ms = Stats::of(&samples.ms).context("no timed runs")?;
        // Measured again before the record is made: the record is of the
        // best peak so far.
        let peak = self.peak.remeasure()?;
        Ok(Record::new(
            Subject {
                problem: self.prob.canonical(),
                dir: self.d.dir.into(),
                device: results::Device::Cpu,
                dtype: DType::F32,
                layout: "nhwc".into(),
                algo: self.algo.name().into(),
            },
            Timing {
                ms,
                runs: samples.ms.len(),
                flops: self.prob.shape.flops(),
                peak_gflops: Some(peak),
            },
            Ran {
                check,
                kernel: self.conv.kernel_name(),
                bias: self.d.bias,
                workspace_bytes: self.conv.workspace_bytes(),
                cudnn_find_ms: None,
            },
        ))
    }
}

fn run_cpu(
    s: &Setup,
    algo_choice: AlgoChoice,
    isa: Isa,
    candidates: &[Vec<Vec<&'static dyn ConvAlgo>>],
    ctx: &Context,
    open: impl FnOnce(Environment, DType) -> Result<Output>,
) -> Result<Output> {
    let mut peak = BestPeak::measure(ctx.threads)?;
    let env = Environment::here(
        ctx.threads,
        isa.name().into(),
        Some(peak.best),
        WallClock.describe(),
    );
    let mut out = open(env, DType::F32)?;
    let runner = &ctx.runner;
    let total = s.problems.len() * s.dirs.len();
    let mut done = 0;

    'problems: for (pi, prob) in s.problems.iter().enumerate() {
        let mut t = ConvTensors::random(&prob.shape, s.seed);
        let mut algo_per_dir = Vec::new();
        for (di, d) in s.dirs.iter().enumerate() {
            done += 1;
            let want = s.check.then(|| reference_outputs(&t, d.dir, d.bias));
            let candidates = &candidates[pi][di];
            let chosen: Vec<&dyn ConvAlgo> = match algo_choice {
                AlgoChoice::Auto => vec![pick_fastest(candidates, &mut t, *d, isa)],
                AlgoChoice::All | AlgoChoice::Named(_) => candidates.clone(),
            };
            for algo in chosen {
                let conv = CpuConv::new(algo, &t, d.dir, isa, d.bias);
                // Poisoned before the first run: whatever the timed runs
                // leave unwritten fails the check.
                t.poison(d.dir);
                let mut case = CpuCase {
                    conv,
                    t: &mut t,
                    want: want.as_deref(),
                    prob,
                    d: *d,
                    algo,
                    peak: &mut peak,
                };
                let Some(rec) = driver::drive(&mut case, runner, &mut WallClock)? else {
                    break 'problems;
                };
                out.note_peak(peak.best);
                progress_line(ctx.bar, done, total, &rec);
                out.push(rec)?;
                algo_per_dir.push((d.dir, algo.name().to_string()));
            }
        }
        write_dump(s, pi, &t, &algo_per_dir)?;
    }
    Ok(out)
}

/// `--dump`: the problem's tensors (inputs and the outputs of the last
/// timed runs) as f32 .npy in logical order.
fn write_dump(
    s: &Setup,
    index: usize,
    t: &ConvTensors,
    algo_per_dir: &[(Direction, String)],
) -> Result<()> {
    let Some(root) = &s.dump else {
        return Ok(());
    };
    let prob = &s.problems[index];
    let folder = if s.problems.len() == 1 {
        root.clone()
    } else {
        root.join(dump_folder_name(index, prob))
    };
    let dirs: Vec<(Direction, bool)> = s.dirs.iter().map(|d| (d.dir, d.bias)).collect();
    let canonical = prob.canonical();
    let info = DumpInfo {
        problem: &canonical,
        name: prob.name.as_deref(),
        seed: s.seed,
        dirs: &dirs,
        algo_per_dir,
    };
    dump::dump(&folder, t, &info)
}

/// Moves the progress bar on, with a line above it:
/// `[3/69] mb16ic64... fwd direct: 1.234 ms median, 456.7 GFLOP/s, check ok`
/// (nothing when the bar is hidden: --quiet, or stderr is not a terminal).
fn progress_line(bar: &ProgressBar, done: usize, total: usize, rec: &Record) {
    bar.set_position(done as u64);
    bar.set_message(format!("{} {}", rec.problem, rec.dir));
    bar.println(format!(
        "[{done}/{total}] {} {} {}: {:.3} ms median, {:.1} GFLOP/s{}",
        rec.problem,
        rec.dir,
        rec.algo,
        rec.ms.median,
        rec.gflops,
        rec.check.map_or(String::new(), |c| format!(
            ", check {}",
            if c.passed { "ok" } else { "FAILED" }
        ))
    ));
}

/// `--algo auto`: the one autotuning rule every CPU convolution uses
/// ([`cnnbench_layers::conv::autotune`]), on this problem's tensors.
fn pick_fastest(
    candidates: &[&'static dyn ConvAlgo],
    t: &mut ConvTensors,
    d: DirSpec,
    isa: Isa,
) -> &'static dyn ConvAlgo {
    let mut convs: Vec<CpuConv> = candidates
        .iter()
        .map(|algo| CpuConv::new(*algo, t, d.dir, isa, d.bias))
        .collect();
    let won = autotune::fastest(
        candidates.len(),
        &mut |k| convs[k].run(t),
        &crate::signals::stopped,
    );
    candidates[won]
}

/// `003_resnet50-layer1.0.conv2` or `003_mb16ic64...` for unnamed problems.
fn dump_folder_name(index: usize, p: &ConvProblem) -> String {
    dump::folder_name(index, p.name.as_deref(), || p.canonical())
}
