//! `model --project-gpus`: data-parallel steps on more GPUs projected from
//! a measured single-GPU record's per-layer backward times
//! ([`crate::dist::project`]).

use crate::dist::interconnect::{self, Interconnect};
use crate::dist::project;
use crate::results::{ModelRecord, ProjectionSet};
use anyhow::{bail, Context, Result};
use cnnbench_layers::net::buckets;
use cnnbench_layers::net::Graph;

/// What `--project-gpus` asks for, checked before anything runs.
pub struct ProjectionPlan {
    gpus: Vec<usize>,
    links: Interconnect,
    gpus_per_node: usize,
}

impl ProjectionPlan {
    /// The plan of `--project-gpus list`, over `--interconnect links` with
    /// `--gpus-per-node gpus_per_node`; a one-line error for a list or
    /// links that do not parse, or GPUs that do not fill whole nodes.
    pub fn parse(list: &str, links: &str, gpus_per_node: usize) -> Result<ProjectionPlan> {
        let gpus = project::parse_gpu_list(list)?;
        let links = interconnect::parse_pair(links)?;
        let g = gpus_per_node;
        if g == 0 || g > project::MAX_GPUS {
            bail!("--gpus-per-node {g}: expected 1 to {}", project::MAX_GPUS);
        }
        if let Some(n) = gpus.iter().find(|&&n| n > g && n % g != 0) {
            bail!("--project-gpus: {n} GPUs do not fill whole nodes of {g} (--gpus-per-node)");
        }
        for &n in &gpus {
            project::finite_links(&project::Topology {
                gpus: n,
                gpus_per_node: g,
                links: links.clone(),
            })?;
        }
        Ok(ProjectionPlan {
            gpus,
            links,
            gpus_per_node: g,
        })
    }

    /// The projections of `rec`, a measured single-GPU record with its
    /// layer table (none for an OOM or a data-parallel record).
    pub fn project(&self, g: &Graph, rec: &ModelRecord) -> Result<Option<ProjectionSet>> {
        let (Some(f), Some(b), true, None) = (
            rec.forward_ms,
            rec.backward_ms,
            rec.status == "ok",
            &rec.data_parallel,
        ) else {
            return Ok(None);
        };
        // The layer table holds nodes 1.. in graph order; node 0 is the image.
        let node_backward_ms = std::iter::once(0.0)
            .chain(rec.layers.iter().map(|l| l.backward_ms))
            .collect();
        let measured = project::Measured {
            batch: rec.batch,
            forward_ms: f.median,
            backward_ms: b.median,
            update_ms: rec.update_ms.map_or(0.0, |u| u.median),
            node_backward_ms,
            grads: buckets::graph_params(g, project::GRAD_BYTES),
        };
        let rows = self
            .gpus
            .iter()
            .map(|&n| {
                project::project(
                    &measured,
                    &project::Topology {
                        gpus: n,
                        gpus_per_node: self.gpus_per_node,
                        links: self.links.clone(),
                    },
                )
            })
            .collect::<Result<Vec<_>>>()
            .with_context(|| format!("projecting {}", g.name))?;
        Ok(Some(ProjectionSet {
            interconnect: self.links.clone(),
            gpus_per_node: self.gpus_per_node,
            assumptions: project::assumptions(&self.links, self.gpus_per_node),
            rows,
        }))
    }
}
