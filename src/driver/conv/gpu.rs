//! The GPU side of `cnnbench conv`: cuDNN's algorithms on one device,
//! timed with CUDA events; with `--api graph` the graph API's engine
//! configurations instead ([`graph`]).

mod graph;
pub mod norm_conv;

use super::{progress_line, write_dump, Setup};
use crate::bench::timer::CudaEvents;
use crate::bench::{Samples, Stats};
use crate::driver::context::Context;
use crate::driver::gpu::dtype_supported;
use crate::driver::{self, Case};
use crate::output::sink::Output;
use crate::plan::DirSpec;
use crate::plan::GpuAlgoChoice;
use crate::problem::ConvProblem;
use crate::results::record::{Ran, Subject, Timing};
use crate::results::{Check, Device, Environment, Record, Skipped};
use anyhow::{Context as _, Result};
use cnnbench_kernels::conv::{reduction_len, Direction};
use cnnbench_kernels::Isa;
use cnnbench_layers::conv::cuda::{
    first_usable, rotation_sets, set_bytes, within_tensor_limit, GpuConv, Prepared,
};
use cnnbench_layers::conv::kernels::bias_grad_kernels;
use cnnbench_layers::conv::{cudnn_algos, reference_outputs, worst_rel_err, ConvTensors};
use cnnbench_layers::cuda::cudnn_graph::ExecutionPlan;
use cnnbench_layers::cuda::{cudnn, ConvApi, Gpu, GpuError};
use cnnbench_layers::gemm::cuda::ensure_peak;
use cnnbench_layers::{DType, Layout};

/// Most workspace an algorithm may use unless `--workspace-limit` says
/// otherwise (and never more than 90% of the free memory).
pub const DEFAULT_WORKSPACE_LIMIT: usize = 4 << 30;

/// What was decided for the GPU before the first run.
pub struct GpuSetup {
    pub gpu: Gpu,
    algo: GpuAlgoChoice,
    dtype: DType,
    layout: Layout,
    workspace_limit: usize,
    cold_cache: bool,
    api: ConvApi,
    /// `--norm-conv`: each direction as NormConv ([`norm_conv`]).
    norm_conv: bool,
}

impl GpuSetup {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        gpu: Gpu,
        algo: GpuAlgoChoice,
        dtype: DType,
        layout: Layout,
        workspace_limit: Option<usize>,
        cold_cache: bool,
        api: ConvApi,
        norm_conv: bool,
    ) -> Result<GpuSetup> {
        graph::algo_allowed(api, &algo)?;
        dtype_supported(&gpu.info.compute_capability, dtype)?;
        let free = gpu.free_memory()?;
        let workspace_limit =
            workspace_limit.unwrap_or_else(|| DEFAULT_WORKSPACE_LIMIT.min(free / 10 * 9));
        Ok(GpuSetup {
            gpu,
            algo,
            dtype,
            layout,
            workspace_limit,
            cold_cache,
            api,
            norm_conv,
        })
    }
}

impl GpuSetup {
    /// Whether one set of `shape`'s tensors and the workspace limit fit in
    /// 90% of the free device memory, and cuDNN takes its tensors (under
    /// 2^31 elements each): what `--batch max` searches.
    pub fn fits(&self, shape: &cnnbench_kernels::conv::ConvShape) -> bool {
        let free = self.gpu.free_memory().unwrap_or(0) as u128;
        within_tensor_limit(shape).is_ok()
            && set_bytes(shape, self.dtype) + self.workspace_limit as u128 <= free / 10 * 9
    }
}

/// One algorithm to time for a direction.
struct Choice {
    algo: u32,
    math: u32,
    cudnn_find_ms: Option<f64>,
    /// What cuDNN's search reported (0 when not searched).
    workspace_bytes: usize,
    /// `--api graph`: the plan (taken when it is prepared).
    graph: Option<ExecutionPlan>,
    /// `--api graph`: the plan's name.
    graph_name: Option<String>,
}

impl Choice {
    /// The legacy API's algorithm.
    fn legacy(algo: u32, math: u32, cudnn_find_ms: Option<f64>, workspace_bytes: usize) -> Choice {
        Choice {
            algo,
            math,
            cudnn_find_ms,
            workspace_bytes,
            graph: None,
            graph_name: None,
        }
    }

    /// The record's algorithm: the legacy API's name, or `graph:` and the
    /// engine configuration's.
    fn name(&self, dir: Direction) -> String {
        match &self.graph_name {
            Some(n) => graph::record_name(n),
            None => cudnn_algos::name(dir, self.algo),
        }
    }
}

/// One direction of one problem with one prepared cuDNN algorithm.
struct GpuCase<'a, 'g> {
    conv: &'a mut GpuConv<'g>,
    prepared: Prepared,
    t: &'a mut ConvTensors,
    want: Option<&'a [(&'static str, Vec<f32>)]>,
    /// Download the outputs after the timed runs (`--check`, `--dump`).
    download: bool,
    prob: &'a ConvProblem,
    d: DirSpec,
    name: String,
    choice: Choice,
    dtype: DType,
    layout: Layout,
    peak_gflops: Option<f64>,
    /// The algorithm itself failed (not the download or the check after):
    /// with `--algo all` that is a skip, not the end of the run.
    run_failed: bool,
}

impl Case for GpuCase<'_, '_> {
    type Record = Record;

    fn run(&mut self) -> Result<()> {
        let r = self.conv.run(&self.prepared);
        self.run_failed = r.is_err();
        r.map_err(Into::into)
    }

    fn check(&mut self) -> Result<Option<Check>> {
        if self.download {
            self.conv.download(self.d.dir, self.t)?;
        }
        Ok(self.want.map(|w| {
            let rel_err = worst_rel_err(self.t, self.d.dir, self.d.bias, w);
            let n = reduction_len(&self.prob.shape, self.d.dir);
            let tolerance = match self.prepared.graph {
                Some(g) => graph::tolerance(self.dtype, g.transform, n),
                None => cudnn_algos::check_tolerance(self.dtype, self.d.dir, self.prepared.algo, n),
            };
            Check {
                rel_err,
                passed: rel_err <= tolerance,
            }
        }))
    }

    fn record(&mut self, samples: &Samples, check: Option<Check>) -> Result<Record> {
        let ms = Stats::of(&samples.ms).context("no timed runs")?;
        Ok(Record::new(
            Subject {
                problem: self.prob.canonical(),
                dir: self.d.dir.into(),
                device: Device::Gpu,
                dtype: self.dtype,
                layout: self.layout.name().into(),
                algo: self.name.clone(),
            },
            Timing {
                ms,
                runs: samples.ms.len(),
                flops: self.prob.shape.flops(),
                // The dtype's peak, measured before any record.
                peak_gflops: self.peak_gflops,
            },
            Ran {
                check,
                kernel: self.conv.kernel_name(&self.prepared),
                bias: self.d.bias,
                workspace_bytes: self.prepared.workspace_bytes,
                cudnn_find_ms: self.choice.cudnn_find_ms,
            },
        ))
    }
}

/// The run's fixed facts, and where its records and skips go.
struct GpuRun<'r> {
    gpu: &'r Gpu,
    algo: &'r GpuAlgoChoice,
    dtype: DType,
    layout: Layout,
    workspace_limit: usize,
    api: ConvApi,
    out: &'r mut Output,
}

impl GpuRun<'_> {
    fn skip(
        &mut self,
        prob: &ConvProblem,
        dir: Direction,
        algo: &str,
        status: &str,
        ws: Option<usize>,
    ) -> Result<()> {
        self.out.push_skipped(Skipped {
            problem: prob.canonical(),
            dir: dir.into(),
            device: Device::Gpu,
            dtype: self.dtype,
            layout: self.layout.name().into(),
            algo: algo.into(),
            status: status.into(),
            workspace_bytes: ws,
        })
    }

    /// The algorithms to time for `d`: cuDNN's pick, a named one, or every
    /// one cuDNN has (those that cannot run are recorded as skipped).
    fn choices(
        &mut self,
        conv: &mut GpuConv,
        prob: &ConvProblem,
        d: &DirSpec,
    ) -> Result<Vec<Choice>> {
        if self.api == ConvApi::Graph {
            return self.graph_choices(conv, prob, d);
        }
        let (dtype, limit) = (self.dtype, self.workspace_limit);
        let mut choices = Vec::new();
        match self.algo {
            GpuAlgoChoice::Heuristic | GpuAlgoChoice::Auto => {
                let ranked = if *self.algo == GpuAlgoChoice::Auto {
                    conv.find(d.dir, limit)
                } else {
                    conv.heuristic(d.dir)
                }
                .with_context(|| format!("problem {prob}"))?;
                match first_usable(&ranked, dtype, limit, false) {
                    Some(a) => {
                        choices.push(Choice::legacy(a.id, a.math, a.cudnn_ms, a.workspace_bytes))
                    }
                    None => self.skip(prob, d.dir, "-", "no usable algorithm", None)?,
                }
            }
            GpuAlgoChoice::Named(name) => choices.push(Choice::legacy(
                cudnn_algos::lookup(d.dir, name).context("algorithm checked in setup")?,
                cudnn::math_for(dtype),
                None,
                0,
            )),
            GpuAlgoChoice::All => {
                conv.reset_math()?;
                for id in 0..conv.algo_count(d.dir)? {
                    let name = cudnn_algos::name(d.dir, id);
                    match conv.workspace_size(d.dir, id) {
                        Err(e) => self.skip(prob, d.dir, &name, &status_of(&e), None)?,
                        Ok(ws) if ws > limit => {
                            self.skip(prob, d.dir, &name, "over workspace limit", Some(ws))?
                        }
                        Ok(_) => choices.push(Choice::legacy(id, cudnn::math_for(dtype), None, 0)),
                    }
                }
            }
        }
        Ok(choices)
    }

    /// `c` made ready to run, or `None` when it cannot run here (recorded
    /// as skipped).
    fn prepare(
        &mut self,
        conv: &mut GpuConv,
        prob: &ConvProblem,
        d: &DirSpec,
        c: &mut Choice,
    ) -> Result<Option<Prepared>> {
        let name = c.name(d.dir);
        let list_all = *self.algo == GpuAlgoChoice::All;
        let prepared = match c.graph.take() {
            Some(plan) => conv.prepare_graph(d.dir, plan, d.bias),
            None => conv.prepare(d.dir, c.algo, c.math, d.bias, c.workspace_bytes),
        };
        match prepared {
            Ok(p) if p.workspace_bytes > self.workspace_limit => {
                self.skip(
                    prob,
                    d.dir,
                    &name,
                    "over workspace limit",
                    Some(p.workspace_bytes),
                )?;
                Ok(None)
            }
            Ok(p) => Ok(Some(p)),
            Err(e) if list_all || e.oom => {
                self.skip(prob, d.dir, &name, &status_of(&e), None)?;
                Ok(None)
            }
            Err(e) => Err(e).with_context(|| format!("problem {prob} {}", d.dir)),
        }
    }
}

pub fn run(
    s: &Setup,
    g: GpuSetup,
    ctx: &Context,
    open: impl FnOnce(Environment, DType) -> Result<Output>,
) -> Result<Output> {
    if g.norm_conv {
        return norm_conv::run(s, g, ctx, open);
    }
    let GpuSetup {
        mut gpu,
        algo,
        dtype,
        layout,
        workspace_limit,
        cold_cache,
        api,
        norm_conv: _,
    } = g;
    ensure_peak(&mut gpu, dtype).context("measuring the GPU's peak")?;
    // Compiled once for the run, where cuDNN cannot reduce the bias
    // gradient (bf16) and a direction asks for it.
    let bias_kernels = if s
        .dirs
        .iter()
        .any(|d| d.bias && d.dir == Direction::BwdFilter)
    {
        bias_grad_kernels(&gpu, dtype).context("compiling the bf16 bias gradient (bias_grad.cu)")?
    } else {
        None
    };
    let (env, peak_gflops) = environment(&gpu, dtype, ctx);
    let mut out = open(env, dtype)?;
    let runner = &ctx.runner;
    let total = s.problems.len() * s.dirs.len();
    let mut done = 0;
    let list_all = algo == GpuAlgoChoice::All;
    let mut r = GpuRun {
        gpu: &gpu,
        algo: &algo,
        dtype,
        layout,
        workspace_limit,
        api,
        out: &mut out,
    };

    'problems: for (pi, prob) in s.problems.iter().enumerate() {
        let mut t = ConvTensors::random(&prob.shape, s.seed);
        // The device stores rounded inputs; the reference sees the same.
        for v in [&mut t.src, &mut t.wei, &mut t.bias, &mut t.diff_dst] {
            dtype.round_in_place(v);
        }
        let sets = rotation_sets(
            set_bytes(&prob.shape, dtype),
            gpu.info.l2_bytes,
            cold_cache,
            gpu.free_memory()?,
        );
        let mut conv = match GpuConv::new(&gpu, &t, dtype, layout, sets, bias_kernels.as_ref()) {
            Ok(c) => c,
            Err(e) if e.oom => {
                for d in &s.dirs {
                    done += 1;
                    r.skip(prob, d.dir, "-", "out of memory", None)?;
                }
                continue;
            }
            Err(e) => return Err(e).with_context(|| format!("problem {prob}")),
        };
        let mut algo_per_dir = Vec::new();
        for d in &s.dirs {
            done += 1;
            let want = s.check.then(|| reference_outputs(&t, d.dir, d.bias));
            for mut c in r.choices(&mut conv, prob, d)? {
                let name = c.name(d.dir);
                let Some(prepared) = r.prepare(&mut conv, prob, d, &mut c)? else {
                    continue;
                };
                conv.poison(d.dir)?;
                let mut timer = CudaEvents(r.gpu.event_pair()?);
                let mut case = GpuCase {
                    conv: &mut conv,
                    prepared,
                    t: &mut t,
                    want: want.as_deref(),
                    download: want.is_some() || s.dump.is_some(),
                    prob,
                    d: *d,
                    name: name.clone(),
                    choice: c,
                    dtype,
                    layout,
                    peak_gflops,
                    run_failed: false,
                };
                let rec = match driver::drive(&mut case, runner, &mut timer) {
                    Ok(Some(rec)) => rec,
                    Ok(None) => break 'problems,
                    Err(e) if list_all && case.run_failed => {
                        let status = e
                            .downcast_ref::<GpuError>()
                            .map_or(e.to_string(), status_of);
                        let ws = Some(prepared.workspace_bytes);
                        r.skip(prob, d.dir, &name, &status, ws)?;
                        continue;
                    }
                    Err(e) => return Err(e).with_context(|| format!("problem {prob} {}", d.dir)),
                };
                progress_line(ctx.bar, done, total, &rec);
                r.out.push(rec)?;
                algo_per_dir.push((d.dir, name));
            }
        }
        write_dump(s, pi, &t, &algo_per_dir)?;
    }
    Ok(out)
}

/// The run's environment on `gpu` (its peak for `dtype` measured before),
/// and that peak in GFLOP/s.
fn environment(gpu: &Gpu, dtype: DType, ctx: &Context) -> (Environment, Option<f64>) {
    let peak_gflops = gpu.peak_tflops(dtype).map(|t| t * 1e3);
    let env = Environment {
        gpu: Some(gpu.info.clone()),
        ..Environment::here(
            ctx.threads,
            Isa::detect().name().into(),
            peak_gflops,
            CudaEvents::DESCRIPTION,
        )
    };
    (env, peak_gflops)
}

/// A short status for an algorithm that could not run.
fn status_of(e: &GpuError) -> String {
    if e.oom {
        "out of memory".into()
    } else if e.status.starts_with("CUDNN_STATUS_NOT_SUPPORTED")
        || e.status.ends_with("(not supported)")
    {
        "not supported".into()
    } else {
        e.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduced_precisions_need_ampere() {
        assert!(dtype_supported("9.0", DType::Bf16).is_ok());
        assert!(dtype_supported("7.5", DType::F16).is_ok());
        let e = dtype_supported("7.0", DType::Tf32).unwrap_err().to_string();
        assert_eq!(
            e,
            "--dtype tf32 needs a GPU of compute capability 8.0 or later (this one is 7.0)"
        );
    }

    #[test]
    fn statuses_of_errors() {
        let e = |status: &str, oom| GpuError {
            call: "cudnnGetConvolutionForwardWorkspaceSize",
            status: status.into(),
            oom,
        };
        assert_eq!(
            status_of(&e("CUDNN_STATUS_NOT_SUPPORTED", false)),
            "not supported"
        );
        assert_eq!(
            status_of(&e("CUDNN_STATUS_NOT_SUPPORTED_SHAPE", false)),
            "not supported"
        );
        assert_eq!(
            status_of(&e("CUDA_ERROR_OUT_OF_MEMORY", true)),
            "out of memory"
        );
        assert_eq!(
            status_of(&e("CUDNN_STATUS_BAD_PARAM", false)),
            "cudnnGetConvolutionForwardWorkspaceSize failed: CUDNN_STATUS_BAD_PARAM"
        );
    }
}
