//! `conv --api graph`: the directions through cuDNN's graph API. The
//! engine configurations its heuristics offer (mode A, then the fallback
//! list) that the dtype allows, that finalize and fit the workspace limit
//! are the candidates: `--algo auto` times each on the problem's tensors
//! and keeps the fastest (as PyTorch's `cudnn.benchmark`), `heuristic`
//! takes the first, `all` times every one; the others are recorded as
//! skipped.

use super::{Choice, GpuRun};
use crate::plan::{DirSpec, GpuAlgoChoice};
use crate::problem::ConvProblem;
use anyhow::{bail, Context as _, Result};
use cnnbench_layers::conv::cuda::GpuConv;
use cnnbench_layers::conv::cudnn_algos::{family_tolerance, Family};
use cnnbench_layers::conv::graph_conv::fastest;
use cnnbench_layers::cuda::ConvApi;
use cnnbench_layers::DType;

/// `--algo` names the legacy API's algorithms; the graph API has engine
/// configurations instead: refused before anything runs.
pub fn algo_allowed(api: ConvApi, algo: &GpuAlgoChoice) -> Result<()> {
    // A single layer's run compares the APIs; auto (the faster per layer)
    // belongs to a network's layers (the CLI refuses it first).
    if api == ConvApi::Auto {
        bail!("--api auto picks per layer in model and check; conv takes legacy or graph");
    }
    if let (ConvApi::Graph, GpuAlgoChoice::Named(name)) = (api, algo) {
        bail!(
            "--algo {name}: --api graph takes --algo auto, heuristic or all \
             (its engine configurations have no legacy algorithm names)"
        );
    }
    Ok(())
}

/// A graph-API record's algorithm: `graph:eng34_k2=1_k13=0`.
pub fn record_name(config: &str) -> String {
    format!("graph:{config}")
}

/// The `--check` threshold of a graph-API plan: the dtype's, widened for
/// fp32 FFT and Winograd engines as for the legacy API's.
pub fn tolerance(dtype: DType, transform: bool, reduction_len: usize) -> f64 {
    let family = if transform { Family::Fft } else { Family::Gemm };
    family_tolerance(dtype, family, reduction_len)
}

impl GpuRun<'_> {
    /// The plans to time for `d` on the graph API.
    pub(super) fn graph_choices(
        &mut self,
        conv: &mut GpuConv,
        prob: &ConvProblem,
        d: &DirSpec,
    ) -> Result<Vec<Choice>> {
        let (plans, refused) = conv
            .graph_candidates(d.dir, self.workspace_limit)
            .with_context(|| format!("problem {prob} {}", d.dir))?;
        if *self.algo == GpuAlgoChoice::All {
            for r in &refused {
                self.skip(
                    prob,
                    d.dir,
                    &record_name(&r.name),
                    &r.status,
                    r.workspace_bytes,
                )?;
            }
        }
        let mut plans: Vec<_> = plans.into_iter().map(Some).collect();
        let picked: Vec<(usize, Option<f64>)> = match self.algo {
            GpuAlgoChoice::All => (0..plans.len()).map(|i| (i, None)).collect(),
            GpuAlgoChoice::Heuristic => (!plans.is_empty())
                .then_some((0, None))
                .into_iter()
                .collect(),
            GpuAlgoChoice::Auto => {
                let ready: Vec<_> = plans.iter_mut().filter_map(|p| p.take()).collect();
                let times = conv
                    .graph_times(d.dir, &ready, &crate::signals::stopped)
                    .with_context(|| format!("problem {prob} {}", d.dir))?;
                plans = ready.into_iter().map(Some).collect();
                fastest(&times).map(|i| (i, times[i])).into_iter().collect()
            }
            GpuAlgoChoice::Named(_) => {
                bail!("--api graph with a named algorithm (refused in setup)")
            }
        };
        if picked.is_empty() {
            self.skip(prob, d.dir, "graph", "no usable engine configuration", None)?;
        }
        Ok(picked
            .into_iter()
            .filter_map(|(i, ms)| {
                let plan = plans[i].take()?;
                Some(Choice {
                    algo: 0,
                    math: 0,
                    cudnn_find_ms: ms,
                    workspace_bytes: plan.workspace_bytes,
                    graph_name: Some(plan.name.clone()),
                    graph: Some(plan),
                })
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_algorithms_are_refused_on_the_graph_api() {
        let named = GpuAlgoChoice::Named("winograd".into());
        assert!(algo_allowed(ConvApi::Legacy, &named).is_ok());
        assert!(algo_allowed(ConvApi::Auto, &GpuAlgoChoice::Auto).is_err());
        let e = algo_allowed(ConvApi::Graph, &named)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "--algo winograd: --api graph takes --algo auto, heuristic or all \
             (its engine configurations have no legacy algorithm names)"
        );
        for ok in [
            GpuAlgoChoice::Auto,
            GpuAlgoChoice::Heuristic,
            GpuAlgoChoice::All,
        ] {
            assert!(algo_allowed(ConvApi::Graph, &ok).is_ok());
        }
    }

    #[test]
    fn names_and_thresholds() {
        assert_eq!(record_name("eng34_k2=1"), "graph:eng34_k2=1");
        assert_eq!(tolerance(DType::F32, false, 576), 1e-5);
        assert_eq!(
            tolerance(DType::F32, true, 576),
            cnnbench_layers::conv::cudnn_algos::TRANSFORM_F32_TOLERANCE
        );
        assert_eq!(tolerance(DType::F16, true, 576), 1e-2);
    }
}
