//! `conv --norm-conv`: each problem's convolution as NormConv, MLPerf
//! ResNet-50's runtime-fused convolution, through cuDNN's graph API
//! whatever `--api` says, in each direction asked for:
//! - `fwd`: `y = conv(relu(x·scale + shift), w)` with the per-channel sum
//!   and sum of squares of `y` in the same kernel;
//! - `bwd-data`: the data gradient with ReLU's backward and the batch norm's
//!   weight backward (dγ, dβ and the coefficients of its data gradient);
//! - `bwd-filter`: the weight gradient of `relu(x·scale + shift)`.
//!
//! Up to 4 of the configurations cuDNN's heuristics offer first are
//! planned and timed, and the fastest is timed as any convolution is;
//! `--check` runs it once more from poisoned outputs and compares every
//! output with the host's reference. Not yet run on a GPU.

use super::{status_of, GpuSetup};
use crate::bench::timer::CudaEvents;
use crate::bench::{Samples, Stats};
use crate::driver::context::Context;
use crate::driver::{self, Case};
use crate::output::sink::Output;
use crate::plan::{DirSpec, GpuAlgoChoice};
use crate::problem::ConvProblem;
use crate::results::record::{Ran, Subject, Timing};
use crate::results::{Check, Device, Environment, Record, Skipped};
use anyhow::{bail, Context as _, Result};
use cnnbench_kernels::conv::{reduction_len, Direction};
use cnnbench_layers::conv::norm_conv::{errors, random_inputs, reference, GpuNormConv, Tensors};
use cnnbench_layers::cuda::cudnn_graph::descriptor::not_supported;
use cnnbench_layers::cuda::cudnn_graph::norm_conv::refusal;
use cnnbench_layers::gemm::cuda::ensure_peak;
use cnnbench_layers::{DType, Layout};

/// The algorithm column of its records: `norm-conv:` and the engine
/// configuration.
pub fn record_name(config: &str) -> String {
    format!("norm-conv:{config}")
}

/// What `--norm-conv` cannot take, refused in one line before anything
/// runs: f16 or bf16, NHWC, one group, the fastest plan (`--algo auto`),
/// on one set of tensors (no `--cold-cache`), no dump. NormConv has no
/// bias: `fwd` (`FWD_B`) and `FWD_D` time the same graph, as do
/// `bwd-filter` (`BWD_WB`) and `BWD_W`.
pub fn allowed(
    dtype: DType,
    layout: Layout,
    algo: &GpuAlgoChoice,
    dump: bool,
    cold_cache: bool,
    problems: &[ConvProblem],
) -> Result<()> {
    if *algo != GpuAlgoChoice::Auto {
        bail!("--norm-conv takes --algo auto (the fastest of the configurations runtime fusion offers)");
    }
    if dump {
        bail!("--norm-conv writes no --dump");
    }
    if cold_cache {
        bail!("--norm-conv runs on one set of tensors: no --cold-cache");
    }
    for p in problems {
        if let Some(why) = refusal(&p.shape, dtype, layout) {
            bail!("--norm-conv: problem {p}: {why}");
        }
    }
    Ok(())
}

/// The directions of `dirs` (each at most once: `--dir` refuses one
/// given twice), in order.
pub fn directions(dirs: &[DirSpec]) -> Vec<Direction> {
    dirs.iter().map(|d| d.dir).collect()
}

/// What each direction's graph computes, for the kernel column.
fn pattern(dir: Direction) -> &'static str {
    match dir {
        Direction::Fwd => "scale, shift, relu | conv | sum, sqsum",
        Direction::BwdData => "dgrad | scale, shift, relu bwd | bn bwd weights",
        Direction::BwdFilter => "scale, shift, relu | wgrad",
    }
}

/// One problem's NormConv in one direction, planned.
struct NormConvCase<'a, 'g> {
    nc: &'a mut GpuNormConv<'g>,
    want: Option<&'a Tensors>,
    prob: &'a ConvProblem,
    peak_gflops: Option<f64>,
}

impl Case for NormConvCase<'_, '_> {
    type Record = Record;

    fn run(&mut self) -> Result<()> {
        self.nc.run().map_err(Into::into)
    }

    fn check(&mut self) -> Result<Option<Check>> {
        let Some(want) = self.want else {
            return Ok(None);
        };
        // One run from poisoned outputs, fp32 sums zeroed (whether the
        // statistics operations add to them is not known yet).
        self.nc.poison()?;
        self.nc.run()?;
        let got = self.nc.download()?;
        let rel_err = errors(&got, want)
            .into_iter()
            .map(|(_, e)| e)
            .fold(0f64, f64::max);
        let n = reduction_len(&self.prob.shape, self.nc.dir);
        let tolerance = super::graph::tolerance(self.nc.dtype, false, n);
        Ok(Some(Check {
            rel_err,
            passed: rel_err <= tolerance,
        }))
    }

    fn record(&mut self, samples: &Samples, check: Option<Check>) -> Result<Record> {
        let ms = Stats::of(&samples.ms).context("no timed runs")?;
        // The plan's engine configuration, that with its numerical notes,
        // and its lowest time while planning (`cudnn_find_ms`).
        let (engine, described, search_ms) = self.nc.chosen().context("planned")?;
        Ok(Record::new(
            Subject {
                problem: self.prob.canonical(),
                dir: self.nc.dir.into(),
                device: Device::Gpu,
                dtype: self.nc.dtype,
                layout: Layout::Nhwc.name().into(),
                algo: record_name(&engine),
            },
            Timing {
                ms,
                runs: samples.ms.len(),
                // The convolution's; the prologue and epilogue add a few
                // operations per element.
                flops: self.prob.shape.flops(),
                peak_gflops: self.peak_gflops,
            },
            Ran {
                check,
                kernel: format!(
                    "cudnn runtime fusion {described} ({})",
                    pattern(self.nc.dir)
                ),
                bias: false,
                workspace_bytes: self.nc.workspace_bytes(),
                cudnn_find_ms: Some(search_ms),
            },
        ))
    }
}

pub fn run(
    s: &super::super::Setup,
    g: GpuSetup,
    ctx: &Context,
    open: impl FnOnce(Environment, DType) -> Result<Output>,
) -> Result<Output> {
    let GpuSetup {
        mut gpu,
        dtype,
        workspace_limit,
        ..
    } = g;
    ensure_peak(&mut gpu, dtype).context("measuring the GPU's peak")?;
    let (env, peak_gflops) = super::environment(&gpu, dtype, ctx);
    let mut out = open(env, dtype)?;
    let dirs = directions(&s.dirs);
    let total = s.problems.len() * dirs.len();
    // A problem not timed still moves the progress bar.
    let skip = |out: &mut Output, prob: &ConvProblem, dir: Direction, status: String| {
        ctx.bar.inc(1);
        out.push_skipped(Skipped {
            problem: prob.canonical(),
            dir: dir.into(),
            device: Device::Gpu,
            dtype,
            layout: Layout::Nhwc.name().into(),
            algo: "norm-conv".into(),
            status,
            workspace_bytes: None,
        })
    };
    let mut done = 0;
    'problems: for prob in &s.problems {
        for &dir in &dirs {
            // Ctrl-C: what finished is kept, nothing more is planned (each
            // plan compiles for seconds).
            if crate::signals::stopped() {
                break 'problems;
            }
            done += 1;
            let p = &prob.shape;
            let inp = random_inputs(dir, p, dtype, s.seed);
            let want = s.check.then(|| reference(dir, p, &inp));
            let mut nc = match GpuNormConv::new(&gpu, dir, p, dtype, &inp) {
                Ok(nc) => nc,
                // Out of memory, or a graph cuDNN does not take here (its
                // operation graph finalizes on the GPU's handle only).
                Err(e) if e.oom || not_supported(&e) => {
                    skip(&mut out, prob, dir, status_of(&e))?;
                    continue;
                }
                Err(e) => return Err(e).with_context(|| format!("problem {prob} {dir}")),
            };
            // No configuration of runtime fusion takes it here: a skip that
            // says why, not the end of the run.
            if let Err(e) = nc.plan(workspace_limit, &crate::signals::stopped) {
                skip(&mut out, prob, dir, status_of(&e))?;
                continue;
            }
            let mut timer = CudaEvents(gpu.event_pair()?);
            let mut case = NormConvCase {
                nc: &mut nc,
                want: want.as_ref(),
                prob,
                peak_gflops,
            };
            let Some(rec) = driver::drive(&mut case, &ctx.runner, &mut timer)
                .with_context(|| format!("problem {prob} {dir} (--norm-conv)"))?
            else {
                break 'problems;
            };
            super::super::progress_line(ctx.bar, done, total, &rec);
            out.push(rec)?;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prob(d: &str) -> ConvProblem {
        ConvProblem::parse(d).unwrap()
    }

    #[test]
    fn what_norm_conv_refuses_is_one_line() {
        let one = [prob("mb2ic32ih8oc64oh8kh1ph0")];
        let ok = |dtype, layout, algo: &GpuAlgoChoice, dump, ps: &[ConvProblem]| {
            allowed(dtype, layout, algo, dump, false, ps).map_err(|e| e.to_string())
        };
        let auto = GpuAlgoChoice::Auto;
        assert!(ok(DType::F16, Layout::Nhwc, &auto, false, &one).is_ok());
        assert!(ok(DType::Bf16, Layout::Nhwc, &auto, false, &one).is_ok());
        // Every direction has its graph; `fwd` (FWD_B) and FWD_D are the
        // same one, NormConv having no bias.
        let all = crate::plan::parse_dirs("all").unwrap();
        assert_eq!(directions(&all), Direction::ALL);
        let fwd_d = crate::plan::parse_dirs("FWD_D,BWD_W").unwrap();
        assert_eq!(directions(&fwd_d), [Direction::Fwd, Direction::BwdFilter]);
        for (e, word) in [
            (
                ok(DType::F16, Layout::Nhwc, &GpuAlgoChoice::All, false, &one),
                "--algo auto",
            ),
            (ok(DType::F16, Layout::Nhwc, &auto, true, &one), "--dump"),
            (
                ok(DType::F32, Layout::Nhwc, &auto, false, &one),
                "f16 or bf16",
            ),
            (ok(DType::F16, Layout::Nchw, &auto, false, &one), "NHWC"),
            (
                ok(
                    DType::F16,
                    Layout::Nhwc,
                    &auto,
                    false,
                    &[prob("g2mb2ic32ih8oc64oh8kh1ph0")],
                ),
                "groups",
            ),
        ] {
            let e = e.expect_err(word);
            assert!(e.contains(word) && !e.contains('\n'), "{e}");
        }
        let e = allowed(DType::F16, Layout::Nhwc, &auto, false, true, &one)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "--norm-conv runs on one set of tensors: no --cold-cache");
        assert_eq!(record_name("eng9_k2=1"), "norm-conv:eng9_k2=1");
    }
}
