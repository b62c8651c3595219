//! `conv --norm-conv`: each problem's forward as NormConv, MLPerf
//! ResNet-50's runtime-fused convolution (`y = conv(relu(x·scale +
//! shift), w)` with the per-channel sum and sum of squares of `y` in the
//! same kernel), through cuDNN's graph API whatever `--api` says. Up to 4
//! of the configurations cuDNN's heuristics offer first are planned and
//! timed, and the fastest is timed as any convolution is; `--check` runs
//! it once more from zeroed sums and compares `y`, the sums and the sums
//! of squares with the host's reference. Not yet run on a GPU.

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
use cnnbench_layers::conv::norm_conv::{
    random_inputs, reference, GpuNormConv, NormConvInputs, NormConvOutputs,
};
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
/// runs: it times the forward (`fwd`, `FWD_B` or `FWD_D`: NormConv has no
/// bias), in f16 or bf16, NHWC, one group, the fastest plan (`--algo
/// auto`), on one set of tensors (no `--cold-cache`), and writes no dump.
#[allow(clippy::too_many_arguments)]
pub fn allowed(
    dirs: &[DirSpec],
    dtype: DType,
    layout: Layout,
    algo: &GpuAlgoChoice,
    dump: bool,
    cold_cache: bool,
    problems: &[ConvProblem],
) -> Result<()> {
    if dirs.len() != 1 || dirs[0].dir != Direction::Fwd {
        bail!("--norm-conv times the forward pass only: add --dir fwd");
    }
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

/// One problem's NormConv, planned.
struct NormConvCase<'a, 'g> {
    nc: &'a mut GpuNormConv<'g>,
    want: Option<&'a NormConvOutputs>,
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
        // One run from zeroed sums (whether the statistics operation adds
        // to them is not known yet) and a poisoned output.
        self.nc.poison()?;
        self.nc.run()?;
        let got = self.nc.download()?;
        let rel = cnnbench_kernels::conv::reference::rel_l2_error;
        let rel_err = [
            rel(&got.y, &want.y),
            rel(&got.sum, &want.sum),
            rel(&got.sqsum, &want.sqsum),
        ]
        .into_iter()
        .fold(0f64, f64::max);
        let n = reduction_len(&self.prob.shape, Direction::Fwd);
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
                dir: Direction::Fwd.into(),
                device: Device::Gpu,
                dtype: self.nc.dtype,
                layout: Layout::Nhwc.name().into(),
                algo: record_name(&engine),
            },
            Timing {
                ms,
                runs: samples.ms.len(),
                // The convolution's; the prologue and statistics add one
                // multiply-add or two per element.
                flops: self.prob.shape.flops(),
                peak_gflops: self.peak_gflops,
            },
            Ran {
                check,
                kernel: format!(
                    "cudnn runtime fusion {} (scale, shift, relu | conv | sum, sqsum)",
                    described
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
    let total = s.problems.len();
    // A problem not timed still moves the progress bar.
    let skip = |out: &mut Output, prob: &ConvProblem, status: String| {
        ctx.bar.inc(1);
        out.push_skipped(Skipped {
            problem: prob.canonical(),
            dir: Direction::Fwd.into(),
            device: Device::Gpu,
            dtype,
            layout: Layout::Nhwc.name().into(),
            algo: "norm-conv".into(),
            status,
            workspace_bytes: None,
        })
    };
    for (pi, prob) in s.problems.iter().enumerate() {
        // Ctrl-C: what finished is kept, nothing more is planned (each plan
        // compiles for seconds).
        if crate::signals::stopped() {
            break;
        }
        let p = &prob.shape;
        let v = random_inputs(p, dtype, s.seed);
        let inp = NormConvInputs::of(&v);
        let want = s.check.then(|| reference(p, &inp));
        let mut nc = match GpuNormConv::new(&gpu, p, dtype, &inp) {
            Ok(nc) => nc,
            // Out of memory, or a graph cuDNN does not take here (its
            // operation graph finalizes on the GPU's handle only).
            Err(e) if e.oom || not_supported(&e) => {
                skip(&mut out, prob, status_of(&e))?;
                continue;
            }
            Err(e) => return Err(e).with_context(|| format!("problem {prob}")),
        };
        // No configuration of runtime fusion takes it here: a skip that
        // says why, not the end of the run.
        if let Err(e) = nc.plan(workspace_limit, &crate::signals::stopped) {
            skip(&mut out, prob, status_of(&e))?;
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
            .with_context(|| format!("problem {prob} fwd (--norm-conv)"))?
        else {
            break;
        };
        super::super::progress_line(ctx.bar, pi + 1, total, &rec);
        out.push(rec)?;
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
        let fwd = [DirSpec {
            dir: Direction::Fwd,
            bias: false,
        }];
        let one = [prob("mb2ic32ih8oc64oh8kh1ph0")];
        let ok =
            |dirs: &[DirSpec], dtype, layout, algo: &GpuAlgoChoice, dump, ps: &[ConvProblem]| {
                allowed(dirs, dtype, layout, algo, dump, false, ps).map_err(|e| e.to_string())
            };
        let auto = GpuAlgoChoice::Auto;
        assert!(ok(&fwd, DType::F16, Layout::Nhwc, &auto, false, &one).is_ok());
        assert!(ok(&fwd, DType::Bf16, Layout::Nhwc, &auto, false, &one).is_ok());
        // `fwd` is benchdnn's FWD_B: NormConv has no bias, so either will do.
        let fwd_b = crate::plan::parse_dirs("fwd").unwrap();
        assert!(ok(&fwd_b, DType::F16, Layout::Nhwc, &auto, false, &one).is_ok());
        for (e, word) in [
            (
                ok(
                    &crate::plan::parse_dirs("all").unwrap(),
                    DType::F16,
                    Layout::Nhwc,
                    &auto,
                    false,
                    &one,
                ),
                "--dir fwd",
            ),
            (
                ok(
                    &fwd,
                    DType::F16,
                    Layout::Nhwc,
                    &GpuAlgoChoice::All,
                    false,
                    &one,
                ),
                "--algo auto",
            ),
            (
                ok(&fwd, DType::F16, Layout::Nhwc, &auto, true, &one),
                "--dump",
            ),
            (
                ok(&fwd, DType::F32, Layout::Nhwc, &auto, false, &one),
                "f16 or bf16",
            ),
            (
                ok(&fwd, DType::F16, Layout::Nchw, &auto, false, &one),
                "NHWC",
            ),
            (
                ok(
                    &fwd,
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
        let e = allowed(&fwd, DType::F16, Layout::Nhwc, &auto, false, true, &one)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "--norm-conv runs on one set of tensors: no --cold-cache");
        assert_eq!(record_name("eng9_k2=1"), "norm-conv:eng9_k2=1");
    }
}
