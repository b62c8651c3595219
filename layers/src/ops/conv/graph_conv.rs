//! One direction of one convolution through cuDNN's graph API
//! (`--api graph`): the one-node operation graph, the engine
//! configurations cuDNN's heuristics offer that the dtype allows, that
//! finalize and that fit the workspace limit, each timed on the real
//! tensors when asked (as PyTorch's `cudnn.benchmark`: a warm-up run, then
//! a few runs between CUDA events, the lowest kept), and the chosen plan
//! with the variant packs of the pointers it runs on. Shared by the
//! single-layer benchmark ([`super::cuda::GpuConv`]) and the network's
//! convolution layers ([`super::gpu_layer`]).

use super::cudnn_conv::{geometry, ConvPtrs};
use crate::backend::cuda::cudnn::CudnnHandle;
use crate::backend::cuda::cudnn_graph::convolution::{W, X, Y};
use crate::backend::cuda::cudnn_graph::descriptor::not_supported;
use crate::backend::cuda::cudnn_graph::engine::{engine_configs, refused_by};
use crate::backend::cuda::cudnn_graph::tensor::alignment_of;
use crate::backend::cuda::cudnn_graph::{
    ConvOperation, ExecutionPlan, OperationGraph, VariantPack,
};
use crate::backend::cuda::loader::cudnn_sys::cudnnBackendNumericalNote_t as Note;
use crate::backend::cuda::memory::Workspace;
use crate::backend::cuda::{Gpu, GpuError, GpuResult};
use crate::core::{DType, Layout};
use cnnbench_kernels::conv::{ConvShape, Direction};
use std::ffi::c_void;

/// Most candidate plans timed per direction (PyTorch's
/// `cudnn.benchmark_limit` is 10): heuristics mode A's best first, then
/// the fallback list.
pub const MAX_CANDIDATES: usize = 16;

/// A configuration that could not be a candidate, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Refused {
    pub name: String,
    /// `not supported`, `over workspace limit`, what the dtype refuses.
    pub status: String,
    pub workspace_bytes: Option<usize>,
}

/// The operation graph of one direction (it needs a handle).
pub struct ConvGraph {
    pub dir: Direction,
    pub dtype: DType,
    graph: OperationGraph,
    // The operation the graph is made of, kept alive with it.
    _op: ConvOperation,
}

/// The tensor ids and, in the same order, the pointers `dir` binds.
pub fn bindings(dir: Direction, t: &ConvPtrs) -> ([i64; 3], [*mut c_void; 3]) {
    let ptrs = match dir {
        Direction::Fwd => [t.src, t.wei, t.dst],
        Direction::BwdData => [t.diff_src, t.wei, t.diff_dst],
        Direction::BwdFilter => [t.src, t.diff_wei, t.diff_dst],
    };
    ([X, W, Y], ptrs)
}

impl ConvGraph {
    /// Direction `dir` of `p`, its pointers aligned to `alignment` bytes.
    pub fn new(
        h: &CudnnHandle,
        p: &ConvShape,
        dtype: DType,
        layout: Layout,
        dir: Direction,
        alignment: usize,
    ) -> GpuResult<ConvGraph> {
        let op = ConvOperation::new(p, &geometry(p), dtype, layout, dir, alignment)?;
        let graph = OperationGraph::new(h, &[&op.op])?;
        Ok(ConvGraph {
            dir,
            dtype,
            graph,
            _op: op,
        })
    }

    /// The plans to try, best guess first (at most [`MAX_CANDIDATES`];
    /// maybe none), and the configurations refused on the way; with
    /// `deterministic`, only configurations without cuDNN's
    /// nondeterministic note.
    pub fn candidates(
        &self,
        h: &CudnnHandle,
        workspace_limit: usize,
        deterministic: bool,
    ) -> GpuResult<(Vec<ExecutionPlan>, Vec<Refused>)> {
        let policy = Policy {
            nondeterministic: !deterministic,
            ..Policy::CONVOLUTION
        };
        candidates(h, &self.graph, self.dtype, workspace_limit, &policy)
    }
}

/// Which engine configurations [`candidates`] takes, and how many.
pub struct Policy {
    /// Engines noted as down-converting their inputs.
    pub down_convert: bool,
    /// Most plans kept.
    pub most: usize,
    /// Most configurations of engines that compile their kernels at run
    /// time (a behaviour note; seconds each while a plan finalizes)
    /// finalized, kept or not: 0 refuses them all.
    pub most_compiled: usize,
    /// Engines noted as nondeterministic (atomics whose order varies from
    /// run to run).
    pub nondeterministic: bool,
}

impl Policy {
    /// A convolution's directions: each layer plans its own, so an engine
    /// compiled at run time could cost seconds per layer and direction.
    pub const CONVOLUTION: Policy = Policy {
        down_convert: false,
        most: MAX_CANDIDATES,
        most_compiled: 0,
        nondeterministic: true,
    };
}

/// The plans of `graph` to try, best guess first (at most `policy.most`;
/// maybe none), and the configurations refused on the way: what `dtype`
/// refuses (down-converting inputs only where the policy allows it), what
/// does not finalize or fit `workspace_limit`, and the engines compiled at
/// run time past the policy's count (or all of them).
pub fn candidates(
    h: &CudnnHandle,
    graph: &OperationGraph,
    dtype: DType,
    workspace_limit: usize,
    policy: &Policy,
) -> GpuResult<(Vec<ExecutionPlan>, Vec<Refused>)> {
    let (mut plans, mut refused) = (Vec::new(), Vec::new());
    let mut refuse = |name: String, status: &str, ws| {
        refused.push(Refused {
            name,
            status: status.into(),
            workspace_bytes: ws,
        })
    };
    let mut compiled = 0;
    for cfg in engine_configs(graph)? {
        if plans.len() == policy.most {
            break;
        }
        let notes: Vec<u32> = if policy.down_convert {
            let down = Note::CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS as u32;
            cfg.notes.iter().copied().filter(|&n| n != down).collect()
        } else {
            cfg.notes.clone()
        };
        if let Some(why) = refused_by(dtype, &notes) {
            refuse(cfg.name(), why, None);
            continue;
        }
        let nondeterministic = Note::CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC as u32;
        if !policy.nondeterministic && notes.contains(&nondeterministic) {
            refuse(cfg.name(), "nondeterministic", None);
            continue;
        }
        if cfg.runtime_compiled {
            if policy.most_compiled == 0 {
                refuse(cfg.name(), "compiles at run time", None);
                continue;
            }
            if compiled == policy.most_compiled {
                refuse(cfg.name(), "past the configurations compiled", None);
                continue;
            }
            compiled += 1;
        }
        let name = cfg.name();
        match ExecutionPlan::new(h, cfg) {
            Ok(p) if p.workspace_bytes > workspace_limit => {
                refuse(name, "over workspace limit", Some(p.workspace_bytes))
            }
            Ok(p) => plans.push(p),
            Err(e) if not_supported(&e) => refuse(name, "not supported", None),
            Err(e) if e.oom => refuse(name, "out of memory", None),
            Err(e) => return Err(e),
        }
    }
    Ok((plans, refused))
}

/// Each plan's lowest time in ms over [`crate::backend::cuda::EventPair::lowest_time`]'s runs
/// on `t`, or `None` for one that failed to run. Runs while
/// planning, never in a timed loop; writes the direction's output.
pub fn time_plans(
    gpu: &Gpu,
    plans: &[ExecutionPlan],
    dir: Direction,
    t: &ConvPtrs,
    ws: Workspace,
    stop: &dyn Fn() -> bool,
) -> GpuResult<Vec<Option<f64>>> {
    let (ids, ptrs) = bindings(dir, t);
    time_bound_plans(gpu, plans, &ids, &ptrs, ws, stop)
}

/// [`time_plans`] for any graph: the tensors `ptrs` bound to the ids
/// `ids` (one variant pack serves every plan).
pub fn time_bound_plans(
    gpu: &Gpu,
    plans: &[ExecutionPlan],
    ids: &[i64],
    ptrs: &[*mut c_void],
    ws: Workspace,
    stop: &dyn Fn() -> bool,
) -> GpuResult<Vec<Option<f64>>> {
    let events = gpu.event_pair()?;
    let pack = VariantPack::new(ids, ptrs, ws.ptr)?;
    let mut times = Vec::with_capacity(plans.len());
    for plan in plans {
        if stop() || plan.workspace_bytes > ws.bytes {
            times.push(None);
            continue;
        }
        // SAFETY: the caller's tensors are sized for this problem and
        // dtype; the workspace holds what the plan needs (checked above).
        let ms = events.lowest_time(&mut || unsafe { plan.execute(&gpu.cudnn, &pack) });
        times.push(ms.ok());
    }
    Ok(times)
}

/// The index of the fastest plan that ran, or `None`.
pub fn fastest(times: &[Option<f64>]) -> Option<usize> {
    times
        .iter()
        .enumerate()
        .filter_map(|(i, t)| t.map(|t| (i, t)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(i, _)| i)
}

/// A network layer's direction planned on the graph API: the operation
/// graph of `dir` (tensors aligned as `t`'s pointers are), every
/// candidate within `limit` and the search workspace `ws` timed on `t`,
/// the fastest kept, with its time; what it refused, for an error that
/// says so.
#[allow(clippy::too_many_arguments)]
pub fn plan_fastest(
    gpu: &Gpu,
    p: &ConvShape,
    dtype: DType,
    layout: Layout,
    dir: Direction,
    t: &ConvPtrs,
    ws: Workspace,
    limit: usize,
    deterministic: bool,
) -> GpuResult<(ConvGraph, GraphRunner, f64)> {
    let graph = graph_for(gpu, p, dtype, layout, dir, t)?;
    let (plans, refused) = graph.candidates(&gpu.cudnn, limit.min(ws.bytes), deterministic)?;
    let times = time_plans(gpu, &plans, dir, t, ws, &|| false)?;
    let best = fastest(&times).ok_or_else(|| {
        GpuError::invalid(
            "cudnnBackendExecute",
            format!(
                "no {} engine configuration for {dtype} ran within the workspace limit \
                 ({} candidates, {} refused)",
                dir.name(),
                plans.len(),
                refused.len()
            ),
        )
    })?;
    let ms = times[best].expect("the fastest ran");
    let plan = plans
        .into_iter()
        .nth(best)
        .expect("the fastest is one of the plans");
    Ok((graph, GraphRunner::new(dir, plan), ms))
}

/// The operation graph of `dir`, its tensors aligned as `t`'s pointers
/// are.
fn graph_for(
    gpu: &Gpu,
    p: &ConvShape,
    dtype: DType,
    layout: Layout,
    dir: Direction,
    t: &ConvPtrs,
) -> GpuResult<ConvGraph> {
    let (_, ptrs) = bindings(dir, t);
    let alignment = alignment_of(&ptrs.map(|p| p as u64));
    ConvGraph::new(&gpu.cudnn, p, dtype, layout, dir, alignment)
}

/// The plan of configuration `config` (an earlier search's choice, by
/// name) within `limit`, untimed; an error where cuDNN no longer offers
/// it, so that the caller searches.
#[allow(clippy::too_many_arguments)]
pub fn plan_named(
    gpu: &Gpu,
    p: &ConvShape,
    dtype: DType,
    layout: Layout,
    dir: Direction,
    t: &ConvPtrs,
    limit: usize,
    config: &str,
) -> GpuResult<(ConvGraph, GraphRunner)> {
    let graph = graph_for(gpu, p, dtype, layout, dir, t)?;
    // Only the named configuration is finalized: it passed the dtype's
    // filters when it was chosen.
    let gone = || {
        GpuError::invalid(
            "cudnnBackendFinalize",
            format!(
                "{config} is not among the {} configurations any more",
                dir.name()
            ),
        )
    };
    let cfg = engine_configs(&graph.graph)?
        .into_iter()
        .find(|c| c.name() == config)
        .ok_or_else(gone)?;
    let plan = ExecutionPlan::new(&gpu.cudnn, cfg)?;
    if plan.workspace_bytes > limit {
        return Err(gone());
    }
    Ok((graph, GraphRunner::new(dir, plan)))
}

/// A chosen plan and the variant packs of the pointers it has run on.
pub struct GraphRunner {
    pub dir: Direction,
    pub plan: ExecutionPlan,
    packs: Vec<VariantPack>,
}

impl GraphRunner {
    pub fn new(dir: Direction, plan: ExecutionPlan) -> GraphRunner {
        GraphRunner {
            dir,
            plan,
            packs: Vec::new(),
        }
    }

    /// Makes the variant pack of `t` and `ws` (outside any timed loop:
    /// the single-layer benchmark makes one per tensor set when it
    /// prepares; a network's layer runs on the same buffers every step, so
    /// its first step makes them).
    pub fn bind(&mut self, t: &ConvPtrs, ws: Workspace) -> GpuResult<()> {
        let (ids, ptrs) = bindings(self.dir, t);
        if !self.packs.iter().any(|p| p.binds(&ptrs, ws.ptr)) {
            self.packs.push(VariantPack::new(&ids, &ptrs, ws.ptr)?);
        }
        Ok(())
    }

    /// Enqueues the plan on `t` (bound first if it was not).
    ///
    /// # Safety
    /// `t`'s tensors of the direction and `ws` must be device memory sized
    /// for this problem and dtype, `ws` at least the plan's workspace.
    pub unsafe fn run(&mut self, h: &CudnnHandle, t: &ConvPtrs, ws: Workspace) -> GpuResult<()> {
        if ws.bytes < self.plan.workspace_bytes {
            return Err(GpuError::invalid(
                "cudnnBackendExecute",
                format!(
                    "{} needs {} bytes of workspace, {} given",
                    self.plan.name, self.plan.workspace_bytes, ws.bytes
                ),
            ));
        }
        let (_, ptrs) = bindings(self.dir, t);
        let i = match self.packs.iter().position(|p| p.binds(&ptrs, ws.ptr)) {
            Some(i) => i,
            None => {
                self.bind(t, ws)?;
                self.packs.len() - 1
            }
        };
        self.plan.execute(h, &self.packs[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fastest_that_ran_wins() {
        assert_eq!(fastest(&[None, Some(2.0), Some(1.5), None]), Some(2));
        assert_eq!(fastest(&[None, None]), None);
        assert_eq!(fastest(&[]), None);
    }

    #[test]
    fn each_direction_binds_its_own_tensors() {
        let p = |v: usize| v as *mut c_void;
        let t = ConvPtrs {
            src: p(1),
            wei: p(2),
            bias: p(3),
            dst: p(4),
            diff_dst: p(5),
            diff_src: p(6),
            diff_wei: p(7),
            diff_bias: p(8),
        };
        assert_eq!(bindings(Direction::Fwd, &t).1, [p(1), p(2), p(4)]);
        assert_eq!(bindings(Direction::BwdData, &t).1, [p(6), p(2), p(5)]);
        assert_eq!(bindings(Direction::BwdFilter, &t).1, [p(1), p(7), p(5)]);
        assert_eq!(bindings(Direction::Fwd, &t).0, [X, W, Y]);
    }
}
