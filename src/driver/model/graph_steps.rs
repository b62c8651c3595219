//! `model --cuda-graph`: the training step captured once as a CUDA graph
//! and replayed, timed after the eager steps under the same policy, and
//! the record that reports both (the graph's step as the main numbers,
//! the eager step's total beside it). What the command line refuses with
//! it, and why, is [`refuse_conflicts`].

use super::steps::{NetSteps, Steps};
use super::timed::{Phases, Timed};
use crate::bench::Stats;
use crate::results::ModelRecord;
use anyhow::{bail, Result};
use cnnbench_layers::cuda::backend::Cuda;
use cnnbench_layers::net::cuda_graph::StepGraph;

/// `--cuda-graph` with what it cannot take, in one line (exit 2): per-layer
/// timing (`--per-layer`, and `--project-gpus`, which needs it: events
/// inside a captured step are not timing) and a data-parallel step
/// (`--gpus`, `--launcher`: its gradient exchange is not captured).
pub fn refuse_conflicts(
    cuda_graph: bool,
    per_layer: bool,
    projecting: bool,
    data_parallel: bool,
) -> Result<()> {
    if !cuda_graph {
        return Ok(());
    }
    if data_parallel {
        bail!(
            "--cuda-graph runs on one GPU: a data-parallel step's gradient exchange is not captured; \
             drop --gpus/--launcher or --cuda-graph"
        );
    }
    if projecting {
        bail!(
            "--cuda-graph --project-gpus: the projection needs per-layer times, which a captured \
             step does not give; drop one"
        );
    }
    if per_layer {
        bail!(
            "--cuda-graph --per-layer: a captured step's layers cannot be timed apart (events \
             inside a CUDA graph are not timing); drop one"
        );
    }
    Ok(())
}

/// A GPU network's steps replayed from one captured graph (captured in the
/// first warm-up step, after the eager steps): each step first takes the
/// loader's next batch where there is one (its copy stays outside the
/// graph, before the launch), then launches the graph; the loss is read
/// after the steps.
pub struct GraphSteps<'a, 'g> {
    pub steps: &'a mut NetSteps<Cuda<'g>>,
    pub graph: Option<StepGraph<'g>>,
}

impl GraphSteps<'_, '_> {
    /// Device bytes the captured step holds besides the network's.
    pub fn bytes(&self) -> usize {
        self.graph.as_ref().map_or(0, StepGraph::bytes)
    }
}

impl Steps for GraphSteps<'_, '_> {
    fn step(&mut self) -> Result<Phases> {
        let s = &mut *self.steps;
        let input = match &mut s.feed {
            Some(feed) => feed.next_into(&mut s.net)?,
            None => 0.0,
        };
        let update = s.update.then_some((0.01, 0.9));
        let whole = s
            .net
            .graph_step(&mut self.graph, update)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(Phases {
            input,
            whole,
            ..Phases::default()
        })
    }

    /// Not observable inside a graph (`--per-layer` is refused).
    fn layer_ms(&self, _i: usize) -> (f64, f64) {
        (0.0, 0.0)
    }
}

/// The record of a `--cuda-graph` run, made from the graph's steps: the
/// step's total (and throughput) is the graph's; forward, backward and
/// update are left empty (not observable apart inside a graph); the eager
/// steps' total goes beside it.
pub fn graph_record(mut rec: ModelRecord, eager: &Timed) -> ModelRecord {
    rec.forward_ms = None;
    rec.backward_ms = None;
    rec.update_ms = None;
    rec.eager_total_ms = Stats::of(eager.totals());
    rec
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_graph_is_refused_with_per_layer_timing_and_data_parallel_steps() {
        assert!(refuse_conflicts(false, true, true, true).is_ok());
        assert!(refuse_conflicts(true, false, false, false).is_ok());
        let line = |per_layer, projecting, dp| {
            refuse_conflicts(true, per_layer, projecting, dp)
                .unwrap_err()
                .to_string()
        };
        assert!(line(true, false, false).starts_with("--cuda-graph --per-layer: "));
        // A projection turns per-layer timing on: it is named itself.
        assert!(line(true, true, false).starts_with("--cuda-graph --project-gpus: "));
        assert!(line(false, false, true).starts_with("--cuda-graph runs on one GPU"));
        for l in [
            line(true, false, false),
            line(true, true, true),
            line(false, false, true),
        ] {
            assert!(!l.contains('\n'), "{l}");
        }
    }

    fn phases(whole: f64) -> Phases {
        Phases {
            input: 0.25,
            whole,
            ..Phases::default()
        }
    }

    #[test]
    fn a_graph_step_counts_whole_and_its_record_says_both_steps() {
        assert_eq!(phases(2.0).total(), 2.25);
        let mut graph = Timed::empty(2);
        let mut eager = Timed::empty(2);
        for k in 0..3 {
            graph.push(phases(2.0 + k as f64), |_| (0.0, 0.0));
            eager.push(
                Phases {
                    forward: 2.0,
                    backward: 4.0 + k as f64,
                    ..Phases::default()
                },
                |_| (0.0, 0.0),
            );
        }
        let rec = ModelRecord {
            forward_ms: Stats::of(&[1.0]),
            backward_ms: Stats::of(&[1.0]),
            update_ms: Stats::of(&[1.0]),
            total_ms: Stats::of(&[3.25]),
            ..crate::driver::model::record::base_record(
                &cnnbench_layers::zoo::build("imdb-fasttext").expect("a zoo model"),
                8,
                "ok",
                (
                    crate::results::Device::Gpu,
                    cnnbench_layers::DType::F32,
                    "nhwc",
                ),
            )
        };
        let rec = graph_record(rec, &eager);
        assert_eq!(
            (rec.forward_ms, rec.backward_ms, rec.update_ms),
            (None, None, None)
        );
        assert_eq!(rec.eager_total_ms.map(|s| s.median), Some(7.0));
        let row = rec.csv_row();
        assert_eq!(row.last().map(String::as_str), Some("7.000"));
        assert_eq!(
            row.len(),
            crate::results::model_record::MODEL_CSV_HEADER.len()
        );
    }
}
