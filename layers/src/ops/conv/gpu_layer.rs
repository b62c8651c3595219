//! A network's convolution layer on cuDNN: per direction, the fastest
//! algorithm that cuDNN's exhaustive search (FindEx) finds on the layer's
//! own tensors within the workspace limit, as PyTorch's
//! `cudnn.benchmark=True` does. The search runs once, before any timed
//! step; each direction keeps its own descriptors with its chosen math
//! type, so nothing is set or rebuilt while timing.
//!
//! With `--api graph` ([`ConvApi::Graph`]) each direction runs through
//! cuDNN's graph API instead: the engine configurations its heuristics
//! offer, each timed on the layer's own tensors while planning, the
//! fastest kept ([`super::graph_conv`]). With `--api auto`
//! ([`ConvApi::Auto`]) each direction plans both ways, times FindEx's
//! algorithm as the graph plans are timed, and keeps the faster. The bias
//! stays on the legacy calls (`cudnnAddTensor`, the bias gradient) either
//! way. Each choice is kept for the process ([`super::memo`]): a later
//! layer or network with the same problem takes it without a search.

use super::cuda::first_usable;
use super::cudnn_algos;
use super::cudnn_conv::{BiasCx, ConvDescs, ConvPtrs};
use super::graph_conv::{self, ConvGraph, GraphRunner};
use super::kernels::BiasGrad;
use super::memo;
use crate::backend::cuda::backend::{void, Cuda, DevPtr, GpuCtx, GpuParam};
use crate::backend::cuda::cudnn_graph::tensor::alignment_of;
use crate::backend::cuda::{cudnn, ConvApi, GpuError, GpuResult};
use crate::core::backend::Layer;
use crate::core::{DType, Layout};
use cnnbench_kernels::conv::{ConvShape, Direction};
use cudarc::driver::CudaStream;
use std::sync::Arc;

#[derive(Clone, Copy, Debug)]
struct Choice {
    algo: u32,
    math: u32,
}

pub struct ConvGpuLayer {
    /// One set per direction (Fwd, BwdData, BwdFilter).
    descs: [ConvDescs; 3],
    choice: [Option<Choice>; 3],
    weight: GpuParam,
    /// The bias and who computes its gradient.
    bias: Option<(GpuParam, BiasGrad)>,
    input_grad: bool,
    layout: Layout,
    /// `--api graph` (or `auto` where it won): per direction, the chosen
    /// plan and the operation graph it was made from (the legacy `choice`
    /// is then unused). In
    /// that order: a tuple drops its fields in order, so the plan goes
    /// before the graph it came from, as cudnn-frontend keeps them.
    graph: [Option<(GraphRunner, ConvGraph)>; 3],
}

fn index(dir: Direction) -> usize {
    match dir {
        Direction::Fwd => 0,
        Direction::BwdData => 1,
        Direction::BwdFilter => 2,
    }
}

impl ConvGpuLayer {
    pub fn new(
        stream: &Arc<CudaStream>,
        shape: ConvShape,
        dtype: DType,
        layout: Layout,
        weight: GpuParam,
        bias: Option<GpuParam>,
        input_grad: bool,
    ) -> GpuResult<ConvGpuLayer> {
        let d = || ConvDescs::new(shape, dtype, layout);
        let dy = [shape.mb, shape.oc, shape.oh * shape.ow];
        let bias = match bias {
            Some(b) => Some((b, BiasGrad::new(stream, dtype, dy, layout)?)),
            None => None,
        };
        Ok(ConvGpuLayer {
            descs: [d()?, d()?, d()?],
            choice: [None; 3],
            weight,
            bias,
            input_grad,
            layout,
            graph: [None, None, None],
        })
    }

    fn dirs(&self) -> Vec<Direction> {
        let mut d = vec![Direction::Fwd, Direction::BwdFilter];
        if self.input_grad {
            d.insert(1, Direction::BwdData);
        }
        d
    }

    fn ptrs(&self, x: DevPtr, y: DevPtr, dy: DevPtr, dx: Option<DevPtr>) -> ConvPtrs {
        ConvPtrs {
            src: void(x),
            wei: void(self.weight.compute()),
            bias: self
                .bias
                .as_ref()
                .map_or(std::ptr::null_mut(), |(b, _)| void(b.compute())),
            dst: void(y),
            diff_dst: void(dy),
            diff_src: dx.map_or(std::ptr::null_mut(), void),
            diff_wei: void(self.weight.compute_grad()),
            diff_bias: self
                .bias
                .as_ref()
                .map_or(std::ptr::null_mut(), |(b, _)| void(b.compute_grad())),
        }
    }

    unsafe fn run(&mut self, cx: &GpuCtx, dir: Direction, t: &ConvPtrs) -> GpuResult<()> {
        if let Some((runner, _)) = &mut self.graph[index(dir)] {
            runner.run(&cx.gpu.cudnn, t, cx.workspace)?;
            return match &self.bias {
                Some((_, grad)) if dir != Direction::BwdData => self.descs[index(dir)].run_bias(
                    &cx.gpu.cudnn,
                    dir,
                    BiasCx {
                        grad,
                        kernels: Some(cx.kernels),
                        stream: &cx.gpu.stream,
                    },
                    t,
                ),
                _ => Ok(()),
            };
        }
        let c = self.choice[index(dir)].ok_or_else(|| GpuError {
            call: "cnnbench conv layer",
            status: "run before its algorithms were chosen".into(),
            oom: false,
        })?;
        let bias = match &self.bias {
            Some((_, grad)) if dir != Direction::BwdData => Some(BiasCx {
                grad,
                kernels: Some(cx.kernels),
                stream: &cx.gpu.stream,
            }),
            _ => None,
        };
        self.descs[index(dir)].run(&cx.gpu.cudnn, dir, c.algo, bias, t, cx.workspace)
    }
}

impl ConvGpuLayer {
    /// Keeps this search's choice `mine` (already applied to direction
    /// `i`, needing `mine_ws` bytes) for the process, or, where a search
    /// that ran at the same time kept another, runs that one instead, so
    /// that every layer with `key` runs the same; `earlier` was a choice
    /// that could not be planned again (cuDNN no longer offers it), which
    /// `mine` replaces. The workspace the kept choice needs.
    #[allow(clippy::too_many_arguments)]
    fn keep_choice(
        &mut self,
        cx: &GpuCtx,
        i: usize,
        dir: Direction,
        ptrs: &ConvPtrs,
        limit: usize,
        key: memo::Key,
        earlier: Option<memo::Chosen>,
        mine: memo::Chosen,
        mine_ws: usize,
    ) -> GpuResult<usize> {
        if earlier.is_some() {
            memo::replace(key, mine);
            return Ok(mine_ws);
        }
        let kept = memo::put(key, mine.clone());
        if kept == mine {
            return Ok(mine_ws);
        }
        let (d, layout) = (&self.descs[i], self.layout);
        let (mut choice, mut graph) = (None, None);
        match adopt(
            cx.gpu,
            d,
            layout,
            dir,
            ptrs,
            limit,
            &kept,
            &mut choice,
            &mut graph,
        )? {
            Some(ws) => {
                self.choice[i] = choice.or(self.choice[i]);
                self.graph[i] = graph;
                Ok(ws)
            }
            // The other search's plan does not build here: this one stays.
            None => {
                if let memo::Chosen::Legacy { math, .. } = mine {
                    d.conv.set_math(math)?;
                }
                Ok(mine_ws)
            }
        }
    }
}

/// Applies a choice kept by an earlier search to one direction: its
/// algorithm and math type (legacy), or its engine configuration planned
/// again by name (graph). The workspace it needs, or `None` where cuDNN no
/// longer offers that configuration.
#[allow(clippy::too_many_arguments)]
fn adopt(
    gpu: &crate::backend::cuda::Gpu,
    d: &ConvDescs,
    layout: Layout,
    dir: Direction,
    ptrs: &ConvPtrs,
    limit: usize,
    chosen: &memo::Chosen,
    choice: &mut Option<Choice>,
    graph: &mut Option<(GraphRunner, ConvGraph)>,
) -> GpuResult<Option<usize>> {
    match chosen {
        memo::Chosen::Legacy {
            algo,
            math,
            workspace,
        } => {
            d.conv.set_math(*math)?;
            *choice = Some(Choice {
                algo: *algo,
                math: *math,
            });
            *graph = None;
            Ok(Some(*workspace))
        }
        memo::Chosen::Graph { config } => {
            let named =
                graph_conv::plan_named(gpu, &d.shape, d.dtype, layout, dir, ptrs, limit, config);
            Ok(named.ok().map(|(g, runner)| {
                let ws = runner.plan.workspace_bytes;
                *graph = Some((runner, g));
                ws
            }))
        }
    }
}

impl<'g> Layer<Cuda<'g>> for ConvGpuLayer {
    fn plan(
        &mut self,
        cx: &mut GpuCtx<'g>,
        x: &[DevPtr],
        y: DevPtr,
        dy: Option<DevPtr>,
        dx: &mut [Option<DevPtr>],
    ) -> GpuResult<usize> {
        // While planning, the context's workspace is the search space.
        let (search, limit) = (cx.workspace, cx.workspace_limit);
        let h = &cx.gpu.cudnn;
        let ptrs = self.ptrs(x[0], y, dy.unwrap_or(0), dx[0]);
        let api = cx.paths.conv_api;
        let deterministic = cx.paths.deterministic;
        let mut need = 0;
        let device = format!("{}#{}", cx.gpu.info.name, cx.gpu.ctx.ordinal());
        for dir in self.dirs() {
            let i = index(dir);
            let d = &self.descs[i];
            let (_, bound) = graph_conv::bindings(dir, &ptrs);
            let alignment = alignment_of(&bound.map(|p| p as u64));
            let key = memo::Key::new(
                &device,
                &d.shape,
                d.dtype,
                self.layout,
                dir,
                api,
                deterministic,
                limit,
                alignment,
            );
            // What an earlier layer or network chose for the same problem.
            let earlier = memo::get(&key);
            if let Some(c) = &earlier {
                let (choice, graph) = (&mut self.choice[i], &mut self.graph[i]);
                let adopted = adopt(cx.gpu, d, self.layout, dir, &ptrs, limit, c, choice, graph)?;
                if let Some(ws) = adopted {
                    need = need.max(ws);
                    continue;
                }
            }
            // FindEx's algorithm (legacy and auto) and its workspace. With
            // auto, none usable (more likely with `--deterministic`) leaves
            // the graph API's plan, or its error.
            let mut legacy = None;
            let found = match api {
                ConvApi::Graph => None,
                _ => Some(d.find(h, dir, &ptrs, search)?),
            };
            let usable = found
                .as_deref()
                .and_then(|f| first_usable(f, d.dtype, limit, deterministic));
            if found.is_some() && usable.is_none() && api == ConvApi::Legacy {
                return Err(GpuError {
                    call: "cudnnFind*AlgorithmEx",
                    status: format!(
                        "no {}{} algorithm for {} ran within the workspace limit",
                        if deterministic { "deterministic " } else { "" },
                        dir.name(),
                        d.dtype
                    ),
                    oom: false,
                });
            }
            if let Some(best) = usable {
                d.conv.set_math(best.math)?;
                let ws = d.workspace_size(h, dir, best.id)?.max(best.workspace_bytes);
                self.choice[i] = Some(Choice {
                    algo: best.id,
                    math: best.math,
                });
                legacy = Some((best.id, ws));
            }
            // The graph API's fastest plan (graph and auto): with auto, kept
            // only where it ran faster than FindEx's algorithm, each timed
            // the same way here (a graph that cannot plan leaves the legacy
            // algorithm in place).
            if api != ConvApi::Legacy {
                let planned = graph_conv::plan_fastest(
                    cx.gpu,
                    &d.shape,
                    d.dtype,
                    self.layout,
                    dir,
                    &ptrs,
                    search,
                    limit,
                    deterministic,
                );
                let keep = match (planned, legacy) {
                    (Ok(p), None) => Some(p),
                    (Err(e), None) => return Err(e),
                    (Err(_), Some(_)) => None,
                    (Ok((g, runner, graph_ms)), Some((algo, _))) => {
                        let events = cx.gpu.event_pair()?;
                        // SAFETY: the layer's own tensors and the search
                        // workspace, which FindEx's algorithm ran in.
                        let legacy_ms = events.lowest_time(&mut || unsafe {
                            d.run(h, dir, algo, None, &ptrs, search)
                        });
                        // A legacy run that fails to time leaves the plan.
                        if legacy_ms.map_or(true, |ms| graph_ms < ms) {
                            Some((g, runner, graph_ms))
                        } else {
                            // The plan before the graph it came from.
                            drop(runner);
                            drop(g);
                            None
                        }
                    }
                };
                if let Some((g, runner, _)) = keep {
                    let mine_ws = runner.plan.workspace_bytes;
                    let config = runner.plan.name.clone();
                    self.graph[i] = Some((runner, g));
                    let mine = memo::Chosen::Graph { config };
                    need = need.max(
                        self.keep_choice(cx, i, dir, &ptrs, limit, key, earlier, mine, mine_ws)?,
                    );
                    continue;
                }
            }
            if let (Some((algo, ws)), Some(c)) = (legacy, self.choice[i]) {
                let mine = memo::Chosen::Legacy {
                    algo,
                    math: c.math,
                    workspace: ws,
                };
                need =
                    need.max(self.keep_choice(cx, i, dir, &ptrs, limit, key, earlier, mine, ws)?);
            }
        }
        Ok(need)
    }

    fn forward(&mut self, cx: &mut GpuCtx<'g>, x: &[DevPtr], y: DevPtr) -> GpuResult<()> {
        let t = self.ptrs(x[0], y, 0, None);
        // SAFETY: the executor sized x and y for this shape; the shared
        // workspace holds what the chosen algorithm needs (`plan`).
        unsafe { self.run(cx, Direction::Fwd, &t) }
    }

    fn backward(
        &mut self,
        cx: &mut GpuCtx<'g>,
        x: &[DevPtr],
        y: DevPtr,
        dy: &[DevPtr],
        dx: &mut [Option<DevPtr>],
    ) -> GpuResult<()> {
        let dy = dy[0];
        let t = self.ptrs(x[0], y, dy, dx[0]);
        // SAFETY: as in `forward`; dx is sized like x.
        unsafe {
            if dx[0].is_some() {
                self.run(cx, Direction::BwdData, &t)?;
            }
            self.run(cx, Direction::BwdFilter, &t)?;
        }
        self.weight.finish_grad(cx.gpu, cx.kernels)?;
        if let Some((b, _)) = &self.bias {
            b.finish_grad(cx.gpu, cx.kernels)?;
        }
        Ok(())
    }

    fn params(&mut self) -> Vec<&mut GpuParam> {
        let mut p = vec![&mut self.weight];
        p.extend(self.bias.as_mut().map(|(b, _)| b));
        p
    }

    fn params_ref(&self) -> Vec<&GpuParam> {
        let mut p = vec![&self.weight];
        p.extend(self.bias.as_ref().map(|(b, _)| b));
        p
    }

    fn kernels(&self) -> String {
        let mut s = self
            .dirs()
            .iter()
            .filter_map(|&dir| {
                if let Some((r, _)) = &self.graph[index(dir)] {
                    return Some(format!("{}:{}", dir.name(), r.plan.describe()));
                }
                self.choice[index(dir)].map(|c| {
                    format!(
                        "{}:{}({})",
                        dir.name(),
                        cudnn_algos::name(dir, c.algo),
                        cudnn::math::name(c.math)
                    )
                })
            })
            .collect::<Vec<_>>()
            .join(" ");
        if let Some((_, g @ BiasGrad::Nvrtc { .. })) = &self.bias {
            s += " + ";
            s += g.name();
        }
        s
    }
}
