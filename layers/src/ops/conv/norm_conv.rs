//! NormConv's forward on a GPU (`cudnn_graph::norm_conv`, issue 28 item
//! 4): the batch norm and ReLU before a convolution in its prologue and
//! the next batch norm's statistics in its epilogue, as one graph of
//! cuDNN's runtime fusion. The graph is made on the GPU's handle; up to
//! [`MAX_FUSED_CANDIDATES`] of the configurations cuDNN's heuristics offer
//! that finalize within the workspace limit are candidates (runtime
//! fusion compiles its kernels as a plan finalizes, seconds each, so at
//! most [`MAX_COMPILED`] are compiled), each is timed as `--api graph`
//! times a convolution's, and the fastest is kept. Engines noted as
//! down-converting their inputs are allowed: the prologue's activation is
//! fp32 and the convolution's tensor cores take the data's dtype, as the
//! unfused network stores that activation in it anyway.
//!
//! Used by `conv --norm-conv` and its GPU test; not yet in the network.
//! Not yet run on a GPU.

use super::cudnn_conv::geometry;
use super::graph_conv::{candidates, fastest, Policy, Refused};
use crate::backend::cuda::cudnn_graph::norm_conv::{NormConvFwd, IDS};
use crate::backend::cuda::cudnn_graph::tensor::alignment_of;
use crate::backend::cuda::cudnn_graph::{ExecutionPlan, OperationGraph, VariantPack};
use crate::backend::cuda::{DeviceBuffer, Gpu, GpuError, GpuResult};
use crate::core::{DType, Layout};
use cnnbench_kernels::conv::ConvShape;
use std::ffi::c_void;

/// Most candidates kept: each runtime-fused configuration compiles its
/// kernel when it finalizes (seconds each), so only the heuristics' first
/// few are tried.
pub const MAX_FUSED_CANDIDATES: usize = 4;
/// Most runtime-fused configurations compiled, kept or not.
pub const MAX_COMPILED: usize = 8;

/// What NormConv's planning takes (see the module's header).
const POLICY: Policy = Policy {
    down_convert: true,
    most: MAX_FUSED_CANDIDATES,
    most_compiled: MAX_COMPILED,
};

/// Host values of one NormConv problem: `x` NHWC, `w` as the CPU's
/// convolutions hold weights (gHWIO), `scale` and `shift` per input
/// channel.
pub struct NormConvInputs<'a> {
    pub x: &'a [f32],
    pub w: &'a [f32],
    pub scale: &'a [f32],
    pub shift: &'a [f32],
}

impl<'a> NormConvInputs<'a> {
    /// Views of `[x, w, scale, shift]`.
    pub fn of(v: &'a [Vec<f32>; 4]) -> NormConvInputs<'a> {
        let [x, w, scale, shift] = v;
        NormConvInputs { x, w, scale, shift }
    }
}

/// Seeded uniform `[x, w, scale, shift]` for `p`, rounded to `dtype` (the
/// device stores rounded inputs; the reference sees the same).
pub fn random_inputs(p: &ConvShape, dtype: DType, seed: u64) -> [Vec<f32>; 4] {
    let mut v = [
        vec![0.0; p.src_len()],
        vec![0.0; p.wei_len()],
        vec![0.0; p.ic],
        vec![0.0; p.ic],
    ];
    for (i, t) in v.iter_mut().enumerate() {
        cnnbench_kernels::rng::fill_uniform(t, seed.wrapping_add(i as u64), 1.0);
        dtype.round_in_place(t);
    }
    v
}

/// What one run computed, on the host: `y` NHWC, `sum` and `sqsum` per
/// output channel.
pub struct NormConvOutputs {
    pub y: Vec<f32>,
    pub sum: Vec<f32>,
    pub sqsum: Vec<f32>,
}

/// A NormConv forward on a GPU: its graph and device tensors, and once
/// planned, the fastest plan with its pointers and workspace.
pub struct GpuNormConv<'g> {
    gpu: &'g Gpu,
    pub dtype: DType,
    /// In [`IDS`]' order: x, w, y, scale, shift, sum, sqsum.
    bufs: Vec<DeviceBuffer>,
    graph: OperationGraph,
    // The operations the graph is made of, kept alive with it.
    _fwd: NormConvFwd,
    chosen: Option<Chosen>,
}

/// What planning found: the configurations refused on the way, and
/// `(name, lowest ms)` of every candidate timed (`None`: it failed to run).
#[derive(Debug)]
pub struct Planned {
    pub refused: Vec<Refused>,
    pub timed: Vec<(String, Option<f64>)>,
}

struct Chosen {
    plan: ExecutionPlan,
    pack: VariantPack,
    _workspace: Option<DeviceBuffer>,
    ms: f64,
}

impl<'g> GpuNormConv<'g> {
    /// Uploads `inp` in `dtype` (NHWC) and makes the graph on the GPU's
    /// handle; refused in one line where runtime fusion cannot take `p`.
    pub fn new(
        gpu: &'g Gpu,
        p: &ConvShape,
        dtype: DType,
        inp: &NormConvInputs,
    ) -> GpuResult<GpuNormConv<'g>> {
        let lens = [p.src_len(), p.wei_len(), p.ic, p.ic];
        let got = [inp.x.len(), inp.w.len(), inp.scale.len(), inp.shift.len()];
        if lens != got {
            return Err(GpuError::invalid(
                "NormConv graph",
                format!("inputs of {got:?} values for a problem of {lens:?}"),
            ));
        }
        let s = &gpu.stream;
        let up = |v: &[f32]| DeviceBuffer::from_bytes(s, &dtype.encode(v));
        let f32s = |n: usize| DeviceBuffer::alloc(s, 4 * n);
        let wei = Layout::Nhwc.filter_from_ghwio(inp.w, p);
        let bufs = vec![
            up(inp.x)?,
            up(&wei)?,
            DeviceBuffer::alloc(s, p.dst_len() * dtype.size_bytes())?,
            up(inp.scale)?,
            up(inp.shift)?,
            f32s(p.oc)?,
            f32s(p.oc)?,
        ];
        let alignment = alignment_of(&bufs.iter().map(|b| b.ptr()).collect::<Vec<_>>());
        let fwd = NormConvFwd::new(p, &geometry(p), dtype, alignment)?;
        let graph = OperationGraph::new(&gpu.cudnn, &fwd.ops())?;
        Ok(GpuNormConv {
            gpu,
            dtype,
            bufs,
            graph,
            _fwd: fwd,
            chosen: None,
        })
    }

    fn ptrs(&self) -> Vec<*mut c_void> {
        self.bufs.iter().map(DeviceBuffer::as_void).collect()
    }

    /// Plans the candidates within `workspace_limit`, times each on this
    /// problem's tensors and keeps the fastest; stops timing when `stop`
    /// says so (Ctrl-C). No candidate that ran is an error naming what
    /// was refused and why.
    pub fn plan(&mut self, workspace_limit: usize, stop: &dyn Fn() -> bool) -> GpuResult<Planned> {
        let h = &self.gpu.cudnn;
        let (plans, refused) = candidates(h, &self.graph, self.dtype, workspace_limit, &POLICY)?;
        let events = self.gpu.event_pair()?;
        let ptrs = self.ptrs();
        // One workspace, the largest any candidate needs (each is within
        // the limit), for timing them all.
        let most = plans.iter().map(|p| p.workspace_bytes).max().unwrap_or(0);
        let search = self.workspace(most)?;
        let ws_ptr = search
            .as_ref()
            .map_or(std::ptr::null_mut(), DeviceBuffer::as_void);
        let mut timed = Vec::with_capacity(plans.len());
        for plan in &plans {
            if stop() {
                timed.push((plan.describe(), None));
                continue;
            }
            let pack = VariantPack::new(&IDS, &ptrs, ws_ptr)?;
            // SAFETY: the tensors are this problem's, in its dtype; the
            // workspace holds at least the plan's.
            let ms = events.lowest_time(&mut || unsafe { plan.execute(h, &pack) });
            timed.push((plan.describe(), ms.as_ref().ok().copied()));
        }
        let times: Vec<Option<f64>> = timed.iter().map(|t| t.1).collect();
        let Some(best) = fastest(&times) else {
            let why: Vec<String> = refused
                .iter()
                .map(|r| format!("{}: {}", r.name, r.status))
                .collect();
            return Err(GpuError::invalid(
                "NormConv graph",
                format!(
                    "no engine configuration for {} ran ({} timed, {} refused{}{})",
                    self.dtype,
                    plans.len(),
                    refused.len(),
                    if why.is_empty() { "" } else { ": " },
                    why.join("; ")
                ),
            ));
        };
        let plan = plans.into_iter().nth(best).expect("one of the plans");
        // The one kept runs in a workspace of its own size.
        drop(search);
        let workspace = self.workspace(plan.workspace_bytes)?;
        let ws_ptr = workspace
            .as_ref()
            .map_or(std::ptr::null_mut(), DeviceBuffer::as_void);
        let pack = VariantPack::new(&IDS, &ptrs, ws_ptr)?;
        self.chosen = Some(Chosen {
            plan,
            pack,
            _workspace: workspace,
            ms: times[best].expect("the fastest ran"),
        });
        Ok(Planned { refused, timed })
    }

    fn workspace(&self, bytes: usize) -> GpuResult<Option<DeviceBuffer>> {
        match bytes {
            0 => Ok(None),
            n => DeviceBuffer::alloc(&self.gpu.stream, n).map(Some),
        }
    }

    /// The chosen plan's workspace (0 before planning).
    pub fn workspace_bytes(&self) -> usize {
        self.chosen.as_ref().map_or(0, |c| c.plan.workspace_bytes)
    }

    /// The chosen plan: its engine configuration's name, that name with
    /// its numerical notes, and its lowest time (ms) while planning.
    pub fn chosen(&self) -> Option<(String, String, f64)> {
        self.chosen
            .as_ref()
            .map(|c| (c.plan.name.clone(), c.plan.describe(), c.ms))
    }

    /// Enqueues one run of the chosen plan.
    pub fn run(&self) -> GpuResult<()> {
        let c = self
            .chosen
            .as_ref()
            .ok_or_else(|| GpuError::invalid("NormConv graph", "run before plan".to_string()))?;
        // SAFETY: the pack binds this problem's tensors and the plan's
        // workspace.
        unsafe { c.plan.execute(&self.gpu.cudnn, &c.pack) }
    }

    /// Fills `y` with NaN, so that what a run leaves unwritten shows as an
    /// error, and zeroes the sums: whether the statistics operation
    /// overwrites or adds to them is not known yet (it has not run), and
    /// a check after one run from zero holds either way.
    pub fn poison(&mut self) -> GpuResult<()> {
        self.bufs[2].fill_bytes(0xFF)?;
        for i in [5, 6] {
            self.bufs[i].fill_bytes(0)?;
        }
        Ok(())
    }

    /// The outputs, on the host (after the stream's work).
    pub fn download(&self) -> GpuResult<NormConvOutputs> {
        self.gpu.synchronize()?;
        let f32s =
            |b: &DeviceBuffer| -> GpuResult<Vec<f32>> { Ok(DType::F32.decode(&b.download()?)) };
        Ok(NormConvOutputs {
            y: self.dtype.decode(&self.bufs[2].download()?),
            sum: f32s(&self.bufs[5])?,
            sqsum: f32s(&self.bufs[6])?,
        })
    }
}

/// The reference on the host: `y = conv(relu(x·scale + shift), w)` with
/// the activation in f32 (the graph's virtual tensors are fp32), and the
/// sums of `y` per channel in f64.
pub fn reference(p: &ConvShape, inp: &NormConvInputs) -> NormConvOutputs {
    let c = p.ic;
    let act: Vec<f32> = inp
        .x
        .iter()
        .enumerate()
        .map(|(i, &v)| (v * inp.scale[i % c] + inp.shift[i % c]).max(0.0))
        .collect();
    let mut y = vec![0.0; p.dst_len()];
    cnnbench_kernels::conv::reference::fwd(p, &act, inp.w, None, &mut y);
    let (mut sum, mut sqsum) = (vec![0f64; p.oc], vec![0f64; p.oc]);
    for (i, &v) in y.iter().enumerate() {
        sum[i % p.oc] += v as f64;
        sqsum[i % p.oc] += v as f64 * v as f64;
    }
    NormConvOutputs {
        y,
        sum: sum.into_iter().map(|v| v as f32).collect(),
        sqsum: sqsum.into_iter().map(|v| v as f32).collect(),
    }
}
