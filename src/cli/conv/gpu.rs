//! The GPU side of `cnnbench conv`: cuDNN's algorithms on one device,
//! timed with CUDA events.

use super::{progress_line, write_dump, ConvArgs, Output, Setup, INTERRUPTED};
use crate::bench::timer::CudaEvents;
use crate::bench::{Runner, Stats};
use crate::plan::GpuAlgoChoice;
use crate::results::record::{Ran, Subject, Timing};
use crate::results::{Check, Device, Environment, Record, Skipped};
use anyhow::{bail, Context, Result};
use cnnbench_kernels::conv::{reduction_len, Direction};
use cnnbench_kernels::Isa;
use cnnbench_layers::conv::cuda::{first_usable, rotation_sets, set_bytes, GpuConv};
use cnnbench_layers::conv::{cudnn_algos, reference_outputs, worst_rel_err, ConvTensors};
use cnnbench_layers::cuda::{cudnn, Gpu, GpuError};
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
}

impl GpuSetup {
    pub fn new(
        gpu: Gpu,
        algo: GpuAlgoChoice,
        dtype: DType,
        layout: Layout,
        workspace_limit: Option<usize>,
        cold_cache: bool,
    ) -> Result<GpuSetup> {
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
        })
    }
}

impl GpuSetup {
    /// Whether one set of `shape`'s tensors and the workspace limit fit in
    /// 90% of the free device memory (for `--batch max`).
    pub fn fits(&self, shape: &cnnbench_kernels::conv::ConvShape) -> bool {
        let free = self.gpu.free_memory().unwrap_or(0) as u128;
        set_bytes(shape, self.dtype) + self.workspace_limit as u128 <= free / 10 * 9
    }
}

/// tf32 and bf16 need tensor cores of compute capability 8.0 or later.
pub fn dtype_supported(cc: &str, d: DType) -> Result<()> {
    if !cnnbench_layers::cuda::device::supports_dtype(cc, d) {
        bail!("--dtype {d} needs a GPU of compute capability 8.0 or later (this one is {cc})");
    }
    Ok(())
}

/// One algorithm to time for a direction.
struct Choice {
    algo: u32,
    math: u32,
    cudnn_find_ms: Option<f64>,
    /// What cuDNN's search reported (0 when not searched).
    workspace_bytes: usize,
}

pub fn run(
    args: &ConvArgs,
    s: &Setup,
    g: GpuSetup,
    threads: usize,
    bar: &indicatif::ProgressBar,
) -> Result<Output> {
    let GpuSetup {
        mut gpu,
        algo,
        dtype,
        layout,
        workspace_limit,
        cold_cache,
    } = g;
    ensure_peak(&mut gpu, dtype).context("measuring the GPU's peak")?;
    let env = Environment {
        gpu: Some(gpu.info.clone()),
        ..Environment::here(
            threads,
            Isa::detect().name().into(),
            gpu.peak_tflops(dtype).map(|t| t * 1e3),
            CudaEvents::DESCRIPTION,
        )
    };
    let mut out = args.output.open(env, "conv", dtype)?;
    let runner = Runner {
        policy: s.policy,
        interrupted: &INTERRUPTED,
    };
    let total = s.problems.len() * s.dirs.len();
    let mut done = 0;
    let list_all = algo == GpuAlgoChoice::All;

    'problems: for (pi, prob) in s.problems.iter().enumerate() {
        let skip = |dir: Direction, algo: &str, status: &str, ws: Option<usize>| Skipped {
            problem: prob.canonical(),
            dir: dir.into(),
            device: Device::Gpu,
            dtype,
            layout: layout.name().into(),
            algo: algo.into(),
            status: status.into(),
            workspace_bytes: ws,
        };
        let mut t = ConvTensors::random(&prob.shape, args.timing.seed);
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
        let mut conv = match GpuConv::new(&gpu, &t, dtype, layout, sets) {
            Ok(c) => c,
            Err(e) if e.oom => {
                for d in &s.dirs {
                    done += 1;
                    out.push_skipped(skip(d.dir, "-", "out of memory", None))?;
                }
                continue;
            }
            Err(e) => return Err(e).with_context(|| format!("problem {prob}")),
        };
        let mut algo_per_dir = Vec::new();
        for d in &s.dirs {
            done += 1;
            let want = args.check.then(|| reference_outputs(&t, d.dir, d.bias));
            let mut choices = Vec::new();
            match &algo {
                GpuAlgoChoice::Heuristic | GpuAlgoChoice::Auto => {
                    let ranked = if algo == GpuAlgoChoice::Auto {
                        conv.find(d.dir, workspace_limit)
                    } else {
                        conv.heuristic(d.dir)
                    }
                    .with_context(|| format!("problem {prob}"))?;
                    match first_usable(&ranked, dtype, workspace_limit) {
                        Some(a) => choices.push(Choice {
                            algo: a.id,
                            math: a.math,
                            cudnn_find_ms: a.cudnn_ms,
                            workspace_bytes: a.workspace_bytes,
                        }),
                        None => out.push_skipped(skip(d.dir, "-", "no usable algorithm", None))?,
                    }
                }
                GpuAlgoChoice::Named(name) => choices.push(Choice {
                    algo: cudnn_algos::lookup(d.dir, name).context("algorithm checked in setup")?,
                    math: cudnn::math_for(dtype),
                    cudnn_find_ms: None,
                    workspace_bytes: 0,
                }),
                GpuAlgoChoice::All => {
                    conv.reset_math()?;
                    for id in 0..conv.algo_count(d.dir)? {
                        let name = cudnn_algos::name(d.dir, id);
                        match conv.workspace_size(d.dir, id) {
                            Err(e) => out.push_skipped(skip(d.dir, &name, &status_of(&e), None))?,
                            Ok(ws) if ws > workspace_limit => out.push_skipped(skip(
                                d.dir,
                                &name,
                                "over workspace limit",
                                Some(ws),
                            ))?,
                            Ok(_) => choices.push(Choice {
                                algo: id,
                                math: cudnn::math_for(dtype),
                                cudnn_find_ms: None,
                                workspace_bytes: 0,
                            }),
                        }
                    }
                }
            }
            for c in choices {
                let name = cudnn_algos::name(d.dir, c.algo);
                let prepared = match conv.prepare(d.dir, c.algo, c.math, d.bias, c.workspace_bytes)
                {
                    Ok(p) if p.workspace_bytes > workspace_limit => {
                        out.push_skipped(skip(
                            d.dir,
                            &name,
                            "over workspace limit",
                            Some(p.workspace_bytes),
                        ))?;
                        continue;
                    }
                    Ok(p) => p,
                    Err(e) if list_all || e.oom => {
                        out.push_skipped(skip(d.dir, &name, &status_of(&e), None))?;
                        continue;
                    }
                    Err(e) => return Err(e).with_context(|| format!("problem {prob} {}", d.dir)),
                };
                conv.poison(d.dir)?;
                let mut timer = CudaEvents(gpu.event_pair()?);
                let samples = match runner
                    .run(&mut timer, &mut || conv.run(&prepared).map_err(Into::into))
                {
                    Ok(s) => s,
                    Err(e) if list_all => {
                        let status = e
                            .downcast_ref::<GpuError>()
                            .map_or(e.to_string(), status_of);
                        out.push_skipped(skip(
                            d.dir,
                            &name,
                            &status,
                            Some(prepared.workspace_bytes),
                        ))?;
                        continue;
                    }
                    Err(e) => return Err(e).with_context(|| format!("problem {prob} {}", d.dir)),
                };
                if samples.interrupted {
                    break 'problems;
                }
                let stats = Stats::of(&samples.ms).context("no timed runs")?;
                if want.is_some() || args.dump.is_some() {
                    conv.download(d.dir, &mut t)?;
                }
                let check = want.as_ref().map(|w| {
                    let rel_err = worst_rel_err(&t, d.dir, d.bias, w);
                    Check {
                        rel_err,
                        passed: rel_err <= dtype.tolerance(reduction_len(&prob.shape, d.dir)),
                    }
                });
                let rec = Record::new(
                    Subject {
                        problem: prob.canonical(),
                        dir: d.dir.into(),
                        device: Device::Gpu,
                        dtype,
                        layout: layout.name().into(),
                        algo: name.clone(),
                    },
                    Timing {
                        ms: stats,
                        runs: samples.ms.len(),
                        flops: prob.shape.flops(),
                        // The dtype's peak, measured before any record.
                        peak_gflops: out.env.peak_gflops,
                    },
                    Ran {
                        check,
                        kernel: GpuConv::kernel_name(&prepared),
                        bias: d.bias,
                        workspace_bytes: prepared.workspace_bytes,
                        cudnn_find_ms: c.cudnn_find_ms,
                    },
                );
                progress_line(bar, done, total, &rec);
                out.push(rec)?;
                algo_per_dir.push((d.dir, name));
            }
        }
        write_dump(args, s, pi, &t, &algo_per_dir)?;
    }
    Ok(out)
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
