//! `cnnbench conv`: time convolution problems, direction by direction, on
//! the CPU (here) or the GPU ([`gpu`]).

mod gpu;
pub(super) use gpu::{dtype_supported, DEFAULT_WORKSPACE_LIMIT};

use super::output::{Output, OutputArgs};
use super::session::{self, Needs, Session};
use super::{Device, TimingArgs};
use crate::bench::timer::{Timer, WallClock};
use crate::bench::{RunPolicy, Samples, Stats};
use crate::driver::{self, Case};
use crate::note::note;
use crate::plan::{self, AlgoChoice, DirSpec};
use crate::problem::{self, ConvProblem};
use crate::results::dump::{self, DumpInfo};
use crate::results::record::{Ran, Subject, Timing};
use crate::results::{self, Check, Environment, Record};
use anyhow::{bail, Context, Result};
use clap::Args;
use cnnbench_kernels::conv::{ConvAlgo, ConvShape, Direction};
use cnnbench_kernels::{peak, Isa};
use cnnbench_layers::conv::{
    autotune, cpu::CpuConv, reference_outputs, worst_rel_err, ConvTensors,
};
use cnnbench_layers::{DType, Layout};
use indicatif::ProgressBar;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
#[command(after_help = "Examples:\n  \
    cnnbench conv mb16ic64ih56oc64oh56kh3ph1 --check\n  \
    cnnbench conv --from builtin:resnet50 --dir fwd --format csv --out r50.csv\n  \
    cnnbench conv g2mb2ic96ih27oc256kh5ph2 --algo all --iters 20\n  \
    cnnbench conv --from builtin:resnet50 --device gpu --dtype f16 --layout nhwc --algo auto --check")]
pub struct ConvArgs {
    /// Problems in benchdnn syntax, e.g. mb16ic64ih56oc64oh56kh3ph1
    #[arg(value_name = "DESC")]
    problems: Vec<String>,
    /// Read problems from a batch file (one per line, # comments) or builtin:resnet50
    #[arg(long, value_name = "FILE")]
    from: Option<String>,
    /// Directions: fwd, bwd-data, bwd-filter, all (or FWD_B, FWD_D, BWD_D, BWD_W, BWD_WB)
    #[arg(long, default_value = "all", value_name = "LIST")]
    dir: String,
    /// auto, all, or a name. CPU: auto tries each briefly and times the fastest; names direct,
    /// im2col_gemm, ref. GPU: auto is cuDNN's exhaustive FindEx, then the winner is timed;
    /// heuristic is cuDNN's first choice; all times every algorithm cuDNN knows; names
    /// implicit_gemm, implicit_precomp_gemm, winograd, fft_tiling, algo_1, ... (or algo#N)
    #[arg(long, default_value = "auto", value_name = "ALGO")]
    algo: String,
    /// f32 (true fp32), or on the GPU tf32 (tensor cores on fp32 data), f16 or bf16 (half
    /// storage, fp32 accumulation)
    #[arg(long, default_value = "f32", value_name = "DTYPE")]
    dtype: String,
    /// nhwc, or nchw (GPU)
    #[arg(long, default_value = "nhwc", value_name = "LAYOUT")]
    layout: String,
    /// Most cuDNN workspace an algorithm may use, in bytes (K/M/G suffixes) [default: 4G, and
    /// at most 90% of the free GPU memory]
    #[arg(long, value_name = "BYTES")]
    workspace_limit: Option<String>,
    /// GPU: rotate between copies of the tensors even when a problem is bigger than L2 (by
    /// default only problems that fit in L2 rotate, so no run reads data a previous run left
    /// in cache)
    #[arg(long)]
    cold_cache: bool,
    /// Worker threads [default: all logical CPUs]. A comma list sweeps, as do lists in --batch,
    /// --dtype, --layout and --isa: one run per combination
    #[arg(long, value_name = "N", env = "CNNBENCH_THREADS")]
    threads: Option<usize>,
    /// Batch size for every problem (replaces mb), or max: the largest that fits in memory
    #[arg(long, value_name = "N|max")]
    batch: Option<String>,
    /// Instruction set for the kernels: auto, avx512, avx2, scalar
    #[arg(long, default_value = "auto", value_name = "ISA", env = "CNNBENCH_ISA")]
    isa: String,
    #[command(flatten)]
    timing: TimingArgs,
    /// Compare every output with the naive reference; exit 1 on a mismatch
    #[arg(long)]
    check: bool,
    /// Write inputs and outputs as float32 .npy (logical N,C,H,W / K,C/g,R,S) plus problem.json
    #[arg(long, value_name = "DIR", value_parser = super::output::writable_folder)]
    dump: Option<PathBuf>,
    #[command(flatten)]
    output: OutputArgs,
    /// cpu, gpu, or auto: the GPU when one is usable, else the CPU (it says which)
    #[arg(long, value_enum, default_value_t = Device::Auto)]
    device: Device,
    /// No progress lines on stderr
    #[arg(long, short)]
    quiet: bool,
}

/// FMA-loop repetitions between records (a few ms): on a shared machine the
/// start-up measurement may have caught a slow spell, and a peak that is
/// too low would inflate every "% of peak".
const PEAK_REPS_BETWEEN_RECORDS: usize = 3;

/// Everything decided before the first run.
struct Setup {
    problems: Vec<ConvProblem>,
    dirs: Vec<DirSpec>,
    policy: RunPolicy,
}

/// Where the problems run, with what was decided for that device.
enum Target {
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

fn setup(args: &ConvArgs) -> Result<(Setup, Target)> {
    let policy = args.timing.policy()?;
    let mut problems = Vec::new();
    for d in &args.problems {
        problems.push(ConvProblem::parse(d)?);
    }
    if let Some(src) = &args.from {
        problems.extend(problem::load_batch(src)?);
    }
    if problems.is_empty() {
        bail!("no problem given: pass a descriptor such as mb16ic64ih56oc64oh56kh3ph1, or --from FILE");
    }
    let batch = args.batch.as_deref().map(plan::parse_batch).transpose()?;
    if let Some(plan::BatchChoice::Fixed(mb)) = batch {
        for p in &mut problems {
            p.shape.mb = mb;
        }
    }
    let dirs = plan::parse_dirs(&args.dir)?;
    let dtype = DType::parse(&args.dtype)?;
    let layout = Layout::parse(&args.layout)?;
    let workspace_limit = args
        .workspace_limit
        .as_deref()
        .map(plan::parse_bytes)
        .transpose()
        .context("--workspace-limit")?;
    // Host memory: the f32 tensors (and the reference when checking) live
    // on the host for either device.
    let avail = crate::results::memory::available(super::thread_count(args.threads).unwrap_or(1));
    if batch != Some(plan::BatchChoice::Max) {
        for p in &problems {
            plan::check_fits(&p.shape, args.check, avail)
                .with_context(|| format!("problem {p}"))?;
        }
    }
    let target = match session::choose_device(args.device, Needs::Cudnn)? {
        session::Target::Gpu(g) => {
            let algo = plan::GpuAlgoChoice::parse(&args.algo, &dirs)?;
            Target::Gpu(Box::new(gpu::GpuSetup::new(
                *g,
                algo,
                dtype,
                layout,
                workspace_limit,
                args.cold_cache,
            )?))
        }
        session::Target::Cpu(no_gpu) => {
            if dtype != DType::F32 || layout != Layout::Nhwc {
                bail!(
                    "--dtype {dtype} --layout {layout}: the CPU path runs f32 in nhwc only{}",
                    no_gpu.map_or(String::new(), |w| format!(" ({w})"))
                );
            }
            let algo = plan::parse_algo(&args.algo)?;
            let isa = plan::resolve_isa(&args.isa)?;
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
    if batch == Some(plan::BatchChoice::Max) {
        // The largest batch whose tensors fit: in host memory (which holds
        // the f32 tensors and, with --check, the reference) and, on a GPU,
        // in device memory beside the workspace limit.
        for p in &mut problems {
            let host_fits = |mb: usize| {
                let shape = ConvShape { mb, ..p.shape };
                plan::check_fits(&shape, args.check, avail).is_ok()
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
    Ok((
        Setup {
            problems,
            dirs,
            policy,
        },
        target,
    ))
}

pub fn run(args: ConvArgs) -> Result<ExitCode> {
    let (s, target) = setup(&args)?;
    let work = (s.problems.len() * s.dirs.len()) as u64;
    let session = Session::start(args.threads, work, args.quiet)?;
    let threads = session.threads;
    let out = match target {
        Target::Gpu(g) => {
            if args.device == Device::Auto && !args.quiet {
                note!("cnnbench: device auto: using the GPU ({})", g.gpu.info.name);
            }
            gpu::run(&args, &s, *g, &session)?
        }
        Target::Cpu {
            algo,
            isa,
            no_gpu,
            candidates,
        } => {
            if let (Device::Auto, Some(why), false) = (args.device, &no_gpu, args.quiet) {
                note!("cnnbench: device auto: {why}; using the CPU ({threads} threads, {isa})");
            }
            run_cpu(&args, &s, algo, isa, &candidates, &session)?
        }
    };
    session.bar.finish_and_clear();
    out.finish(session.interrupted())
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
    args: &ConvArgs,
    s: &Setup,
    algo_choice: AlgoChoice,
    isa: Isa,
    candidates: &[Vec<Vec<&'static dyn ConvAlgo>>],
    session: &Session,
) -> Result<Output> {
    let mut peak = BestPeak::measure(session.threads)?;
    let env = Environment::here(
        session.threads,
        isa.name().into(),
        Some(peak.best),
        WallClock.describe(),
    );
    let mut out = args.output.open(env, "conv", DType::F32)?;
    let runner = session.runner(s.policy);
    let total = s.problems.len() * s.dirs.len();
    let mut done = 0;

    'problems: for (pi, prob) in s.problems.iter().enumerate() {
        let mut t = ConvTensors::random(&prob.shape, args.timing.seed);
        let mut algo_per_dir = Vec::new();
        for (di, d) in s.dirs.iter().enumerate() {
            done += 1;
            let want = args.check.then(|| reference_outputs(&t, d.dir, d.bias));
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
                let Some(rec) = driver::drive(&mut case, &runner, &mut WallClock)? else {
                    break 'problems;
                };
                out.note_peak(peak.best);
                progress_line(&session.bar, done, total, &rec);
                out.push(rec)?;
                algo_per_dir.push((d.dir, algo.name().to_string()));
            }
        }
        write_dump(args, s, pi, &t, &algo_per_dir)?;
    }
    Ok(out)
}

/// `--dump`: the problem's tensors (inputs and the outputs of the last
/// timed runs) as f32 .npy in logical order.
fn write_dump(
    args: &ConvArgs,
    s: &Setup,
    index: usize,
    t: &ConvTensors,
    algo_per_dir: &[(Direction, String)],
) -> Result<()> {
    let Some(root) = &args.dump else {
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
        seed: args.timing.seed,
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
        &session::interrupted,
    );
    candidates[won]
}

/// `003_resnet50-layer1.0.conv2` or `003_mb16ic64...` for unnamed problems.
fn dump_folder_name(index: usize, p: &ConvProblem) -> String {
    dump::folder_name(index, p.name.as_deref(), || p.canonical())
}
