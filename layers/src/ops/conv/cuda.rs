//! The CUDA side of the convolution op: cuDNN's three directions on
//! device copies of [`ConvTensors`], in the requested dtype and layout.
//!
//! Descriptors, buffers and workspace are made when the op is built or an
//! algorithm is prepared, never inside [`GpuConv::run`], which only
//! enqueues cuDNN calls on the benchmark stream.

pub use super::cudnn_conv::geometry;
pub use super::cudnn_conv::AlgoInfo;
use super::cudnn_conv::{BiasCx, ConvDescs, ConvPtrs};
use super::graph_conv::{self, ConvGraph, GraphRunner, Refused};
use super::kernels::BiasGrad;
use super::{cudnn_algos, ConvTensors};
use crate::backend::cuda::cudnn;
use crate::backend::cuda::cudnn_graph::ExecutionPlan;
use crate::backend::cuda::memory::Workspace;
use crate::backend::cuda::nvrtc::Kernels;
use crate::backend::cuda::{DeviceBuffer, Gpu, GpuError, GpuResult};
use crate::core::{DType, Layout};
use cnnbench_kernels::conv::{ConvShape, Direction};

/// Device copies of every tensor of a problem, in one dtype and layout.
struct TensorSet {
    src: DeviceBuffer,
    wei: DeviceBuffer,
    bias: DeviceBuffer,
    dst: DeviceBuffer,
    diff_dst: DeviceBuffer,
    diff_src: DeviceBuffer,
    diff_wei: DeviceBuffer,
    diff_bias: DeviceBuffer,
}

/// An algorithm made ready to run: math type set, workspace allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prepared {
    pub dir: Direction,
    /// The legacy API's algorithm (unused on the graph API).
    pub algo: u32,
    pub math: u32,
    pub workspace_bytes: usize,
    pub bias: bool,
    /// On the graph API (`--api graph`): which prepared plan.
    pub graph: Option<GraphChoice>,
}

/// A plan of the graph API made ready by [`GpuConv::prepare_graph`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GraphChoice {
    /// Its index among the prepared plans.
    pub index: usize,
    /// It computes through FFT or Winograd transforms (the fp32 check's
    /// wider threshold, as for the legacy API's).
    pub transform: bool,
}

/// The device tensors' alignment the graph API's tensors promise: each
/// set's tensors are allocations of their own (256-byte aligned).
const GRAPH_ALIGNMENT: usize = 16;

pub struct GpuConv<'g> {
    gpu: &'g Gpu,
    pub shape: ConvShape,
    pub dtype: DType,
    pub layout: Layout,
    d: ConvDescs,
    sets: Vec<TensorSet>,
    next_set: usize,
    workspace: Option<DeviceBuffer>,
    bias_grad: BiasGrad,
    /// `bias_grad.cu` ([`super::kernels::bias_grad_kernels`]), where the
    /// bias gradient needs it.
    kernels: Option<&'g Kernels>,
    /// The graph API's operation graph per direction (Fwd, BwdData,
    /// BwdFilter), made when first asked for.
    graphs: [Option<ConvGraph>; 3],
    /// The graph API's plans made ready to run.
    runners: Vec<GraphRunner>,
}

fn dir_index(dir: Direction) -> usize {
    match dir {
        Direction::Fwd => 0,
        Direction::BwdData => 1,
        Direction::BwdFilter => 2,
    }
}

/// Whether cuDNN takes `p`'s activations (source and destination, and
/// their gradients) as tensors: each under 2^31 elements
/// ([`cudnn::MAX_TENSOR_ELEMENTS`]); if not, why, in one line.
pub fn within_tensor_limit(p: &ConvShape) -> Result<(), String> {
    cudnn::within_tensor_limit([p.mb, p.ic, p.ih, p.iw])
        .and_then(|()| cudnn::within_tensor_limit([p.mb, p.oc, p.oh, p.ow]))
}

/// Bytes of one set of device tensors.
pub fn set_bytes(p: &ConvShape, d: DType) -> u128 {
    ConvTensors::elements_needed(p).unwrap_or(u128::MAX) * d.size_bytes() as u128
}

/// How many input sets to rotate through so that no run finds its data in
/// L2 left by the previous runs: one when a set is bigger than L2 (it
/// evicts itself) unless `cold_cache`; otherwise enough sets that at least
/// two L2s' worth of other data passes between two uses of the same set,
/// capped at 256 sets and at half of the free device memory.
pub fn rotation_sets(
    set_bytes: u128,
    l2_bytes: usize,
    cold_cache: bool,
    free_bytes: usize,
) -> usize {
    let set = set_bytes.max(1);
    if !cold_cache && set > l2_bytes as u128 {
        return 1;
    }
    let want = (2 * l2_bytes as u128).div_ceil(set) + 1;
    let fit = (free_bytes as u128 / 2) / set;
    want.clamp(2, 256).min(fit.max(1)) as usize
}

impl<'g> GpuConv<'g> {
    /// Uploads `t` (converted to `dtype` and `layout`) into `sets` copies.
    /// `kernels` must hold `bias_grad.cu` when the dtype's bias gradient is
    /// cnnbench's (bf16) and a run asks for it.
    pub fn new(
        gpu: &'g Gpu,
        t: &ConvTensors,
        dtype: DType,
        layout: Layout,
        sets: usize,
        kernels: Option<&'g Kernels>,
    ) -> GpuResult<Self> {
        let p = t.shape;
        let d = ConvDescs::new(p, dtype, layout)?;
        let enc_act = |v: &[f32], h, w, c| dtype.encode(&layout.from_nhwc(v, p.mb, h, w, c));
        let src = enc_act(&t.src, p.ih, p.iw, p.ic);
        let diff_dst = enc_act(&t.diff_dst, p.oh, p.ow, p.oc);
        let wei = dtype.encode(&layout.filter_from_ghwio(&t.wei, &p));
        let bias = dtype.encode(&t.bias);
        let s = &gpu.stream;
        let mut all = Vec::with_capacity(sets);
        for _ in 0..sets.max(1) {
            let mut set = TensorSet {
                src: DeviceBuffer::from_bytes(s, &src)?,
                wei: DeviceBuffer::from_bytes(s, &wei)?,
                bias: DeviceBuffer::from_bytes(s, &bias)?,
                dst: DeviceBuffer::alloc(s, p.dst_len() * dtype.size_bytes())?,
                diff_dst: DeviceBuffer::from_bytes(s, &diff_dst)?,
                diff_src: DeviceBuffer::alloc(s, p.src_len() * dtype.size_bytes())?,
                diff_wei: DeviceBuffer::alloc(s, p.wei_len() * dtype.size_bytes())?,
                diff_bias: DeviceBuffer::alloc(s, p.oc * dtype.size_bytes())?,
            };
            for out in [
                &mut set.dst,
                &mut set.diff_src,
                &mut set.diff_wei,
                &mut set.diff_bias,
            ] {
                out.fill_bytes(0xFF)?;
            }
            all.push(set);
        }
        let bias_grad = BiasGrad::new(&gpu.stream, dtype, [p.mb, p.oc, p.oh * p.ow], layout)?;
        gpu.synchronize()?;
        Ok(GpuConv {
            gpu,
            shape: p,
            dtype,
            layout,
            d,
            sets: all,
            next_set: 0,
            workspace: None,
            bias_grad,
            kernels,
            graphs: [None, None, None],
            runners: Vec::new(),
        })
    }

    pub fn sets(&self) -> usize {
        self.sets.len()
    }

    /// How many algorithms cuDNN has for `dir`.
    pub fn algo_count(&self, dir: Direction) -> GpuResult<u32> {
        self.d.algo_count(&self.gpu.cudnn, dir)
    }

    /// Workspace bytes algorithm `id` needs for `dir`, or why it cannot run.
    pub fn workspace_size(&self, dir: Direction, id: u32) -> GpuResult<usize> {
        self.d.workspace_size(&self.gpu.cudnn, dir, id)
    }

    /// cuDNN's heuristic ranking (`Get_v7`), best first.
    pub fn heuristic(&self, dir: Direction) -> GpuResult<Vec<AlgoInfo>> {
        self.d.heuristic(&self.gpu.cudnn, dir)
    }

    /// cuDNN's exhaustive search (`FindEx`) on set 0, with at most
    /// `workspace_limit` bytes of workspace; sorted by cuDNN's time.
    pub fn find(&mut self, dir: Direction, workspace_limit: usize) -> GpuResult<Vec<AlgoInfo>> {
        let h = &self.gpu.cudnn;
        let ws = self.d.search_workspace(h, dir, workspace_limit)?;
        self.ensure_workspace(ws)?;
        let found = self.d.find(h, dir, &self.ptrs(0), self.workspace())?;
        self.gpu.synchronize()?;
        // FindEx wrote set 0's output: poison it again for the check.
        self.poison(dir)?;
        Ok(found)
    }

    /// Sets the math type and allocates the workspace for `algo` (outside
    /// any timed loop). The workspace is the size cuDNN asks for under that
    /// math type, and at least `at_least` (what FindEx or Get_v7 reported).
    pub fn prepare(
        &mut self,
        dir: Direction,
        algo: u32,
        math: u32,
        bias: bool,
        at_least: usize,
    ) -> GpuResult<Prepared> {
        // The workspace size depends on the math type: set it first.
        self.d.conv.set_math(math)?;
        let workspace_bytes = self.workspace_size(dir, algo)?.max(at_least);
        self.ensure_workspace(workspace_bytes)?;
        Ok(Prepared {
            dir,
            algo,
            math,
            workspace_bytes,
            bias,
            graph: None,
        })
    }

    fn graph(&mut self, dir: Direction) -> GpuResult<&ConvGraph> {
        let slot = &mut self.graphs[dir_index(dir)];
        if slot.is_none() {
            *slot = Some(ConvGraph::new(
                &self.gpu.cudnn,
                &self.shape,
                self.dtype,
                self.layout,
                dir,
                GRAPH_ALIGNMENT,
            )?);
        }
        Ok(slot.as_ref().expect("made above"))
    }

    /// The graph API's plans for `dir` that the dtype allows, finalize and
    /// fit `workspace_limit`, best guess first; and those refused.
    pub fn graph_candidates(
        &mut self,
        dir: Direction,
        workspace_limit: usize,
    ) -> GpuResult<(Vec<ExecutionPlan>, Vec<Refused>)> {
        let gpu = self.gpu;
        self.graph(dir)?
            .candidates(&gpu.cudnn, workspace_limit, false)
    }

    /// Each plan's lowest time over a few runs on set 0, or `None` where
    /// it failed to run (the autotuning of `--algo auto`; untimed by the
    /// benchmark). Set 0's output is poisoned again after.
    pub fn graph_times(
        &mut self,
        dir: Direction,
        plans: &[ExecutionPlan],
        stop: &dyn Fn() -> bool,
    ) -> GpuResult<Vec<Option<f64>>> {
        let ws = plans.iter().map(|p| p.workspace_bytes).max().unwrap_or(0);
        self.ensure_workspace(ws)?;
        let times =
            graph_conv::time_plans(self.gpu, plans, dir, &self.ptrs(0), self.workspace(), stop)?;
        self.gpu.synchronize()?;
        self.poison(dir)?;
        Ok(times)
    }

    /// Makes `plan` ready to run: its workspace allocated and a variant
    /// pack made for every tensor set (outside any timed loop).
    pub fn prepare_graph(
        &mut self,
        dir: Direction,
        plan: ExecutionPlan,
        bias: bool,
    ) -> GpuResult<Prepared> {
        let workspace_bytes = plan.workspace_bytes;
        let transform = plan.transform;
        self.ensure_workspace(workspace_bytes)?;
        let mut runner = GraphRunner::new(dir, plan);
        for set in 0..self.sets.len() {
            runner.bind(&self.ptrs(set), self.workspace())?;
        }
        self.runners.push(runner);
        Ok(Prepared {
            dir,
            algo: 0,
            math: 0,
            workspace_bytes,
            bias,
            graph: Some(GraphChoice {
                index: self.runners.len() - 1,
                transform,
            }),
        })
    }

    /// Puts the descriptor back to the dtype's math type (`prepare` leaves
    /// the last choice's math type set).
    pub fn reset_math(&self) -> GpuResult<()> {
        self.d.reset_math()
    }

    fn ensure_workspace(&mut self, bytes: usize) -> GpuResult<()> {
        if self.workspace.as_ref().is_none_or(|w| w.bytes() < bytes) {
            // Free the old one first, so that a larger one can fit.
            self.workspace = None;
            self.workspace = Some(DeviceBuffer::alloc(&self.gpu.stream, bytes)?);
        }
        Ok(())
    }

    fn workspace(&self) -> Workspace {
        self.workspace
            .as_ref()
            .map_or(Workspace::NONE, |w| Workspace {
                ptr: w.as_void(),
                bytes: w.bytes(),
            })
    }

    fn ptrs(&self, set: usize) -> ConvPtrs {
        let s = &self.sets[set];
        ConvPtrs {
            src: s.src.as_void(),
            wei: s.wei.as_void(),
            bias: s.bias.as_void(),
            dst: s.dst.as_void(),
            diff_dst: s.diff_dst.as_void(),
            diff_src: s.diff_src.as_void(),
            diff_wei: s.diff_wei.as_void(),
            diff_bias: s.diff_bias.as_void(),
        }
    }

    /// Enqueues one run of a prepared algorithm on the next tensor set.
    pub fn run(&mut self, p: &Prepared) -> GpuResult<()> {
        let set = self.next_set;
        self.next_set = (self.next_set + 1) % self.sets.len();
        let bias = p.bias.then(|| BiasCx {
            grad: &self.bias_grad,
            kernels: self.kernels,
            stream: &self.gpu.stream,
        });
        if let Some(g) = p.graph {
            let (t, ws) = (self.ptrs(set), self.workspace());
            let runner = self.runners.get_mut(g.index).ok_or_else(|| {
                GpuError::invalid("cudnnBackendExecute", "no such prepared plan".into())
            })?;
            // SAFETY: as below; the plan's workspace was allocated by
            // `prepare_graph`.
            return unsafe {
                runner.run(&self.gpu.cudnn, &t, ws)?;
                match bias {
                    Some(b) => self.d.run_bias(&self.gpu.cudnn, p.dir, b, &t),
                    None => Ok(()),
                }
            };
        }
        // SAFETY: the set's buffers and the workspace are sized for this
        // problem and algorithm (`prepare`); the bias gradient's scratch
        // for this problem (`new`).
        unsafe {
            self.d.run(
                &self.gpu.cudnn,
                p.dir,
                p.algo,
                bias,
                &self.ptrs(set),
                self.workspace(),
            )
        }
    }

    /// Poisons set 0's outputs of `dir` (all-ones bytes: NaN) and makes the
    /// next run use set 0, so the check sees what the timed runs wrote.
    pub fn poison(&mut self, dir: Direction) -> GpuResult<()> {
        let set = &mut self.sets[0];
        match dir {
            Direction::Fwd => set.dst.fill_bytes(0xFF)?,
            Direction::BwdData => set.diff_src.fill_bytes(0xFF)?,
            Direction::BwdFilter => {
                set.diff_wei.fill_bytes(0xFF)?;
                set.diff_bias.fill_bytes(0xFF)?;
            }
        }
        self.next_set = 0;
        Ok(())
    }

    /// Copies set 0's outputs of `dir` into `t`, as f32 in the CPU layouts.
    pub fn download(&self, dir: Direction, t: &mut ConvTensors) -> GpuResult<()> {
        let p = self.shape;
        let set = &self.sets[0];
        let (d, l) = (self.dtype, self.layout);
        match dir {
            Direction::Fwd => {
                t.dst = l.to_nhwc(&d.decode(&set.dst.download()?), p.mb, p.oh, p.ow, p.oc)
            }
            Direction::BwdData => {
                t.diff_src = l.to_nhwc(&d.decode(&set.diff_src.download()?), p.mb, p.ih, p.iw, p.ic)
            }
            Direction::BwdFilter => {
                t.diff_wei = l.filter_to_ghwio(&d.decode(&set.diff_wei.download()?), &p);
                t.diff_bias = d.decode(&set.diff_bias.download()?);
            }
        }
        Ok(())
    }

    /// A short description of what runs, e.g.
    /// `cudnn fwd implicit_precomp_gemm (tensor_op)`, and what computes the
    /// bias gradient when that is not cuDNN (`+ bias_grad.cu`).
    pub fn kernel_name(&self, p: &Prepared) -> String {
        let mut s = match p.graph.and_then(|g| self.runners.get(g.index)) {
            Some(r) => format!("cudnn graph {} {}", p.dir.name(), r.plan.describe()),
            None => format!(
                "cudnn {} {} ({})",
                p.dir.name(),
                cudnn_algos::name(p.dir, p.algo),
                cudnn::math::name(p.math)
            ),
        };
        if p.bias && p.dir == Direction::BwdFilter {
            if let BiasGrad::Nvrtc { .. } = self.bias_grad {
                s += " + ";
                s += self.bias_grad.name();
            }
        }
        s
    }
}

/// The first of `results` (FindEx's fastest first, or the heuristics' best
/// guess first) that ran, in a math mode `dtype` allows, within
/// `workspace_limit`: what `--algo heuristic` and `--algo auto` take; with
/// `deterministic`, the first of those cuDNN marks deterministic.
pub fn first_usable(
    results: &[AlgoInfo],
    dtype: DType,
    workspace_limit: usize,
    deterministic: bool,
) -> Option<&AlgoInfo> {
    results.iter().find(|a| {
        a.status == "ok"
            && cudnn::math_allowed(dtype, a.math)
            && a.workspace_bytes <= workspace_limit
            && (a.deterministic || !deterministic)
    })
}

#[cfg(test)]
#[path = "graph_tests.rs"]
mod graph_tests;
#[cfg(test)]
#[path = "norm_conv_tests.rs"]
mod norm_conv_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_uses_cudnn_dilation() {
        let p = ConvShape {
            mb: 2,
            g: 4,
            ic: 8,
            ih: 9,
            iw: 9,
            oc: 8,
            oh: 5,
            ow: 5,
            kh: 3,
            kw: 3,
            sh: 2,
            sw: 2,
            ph: 1,
            pw: 1,
            dh: 1,
            dw: 0,
        };
        let g = geometry(&p);
        assert_eq!(g.dilation, [2, 1]);
        assert_eq!(g.stride, [2, 2]);
        assert_eq!(g.groups, 4);
        // src 2·9·9·8, dst 2·5·5·8, wei 9·2·8 (x2 each) + bias 8 (x2), in f16.
        assert_eq!(
            set_bytes(&p, DType::F16),
            2 * (2 * 1296 + 2 * 400 + 2 * 144 + 2 * 8)
        );
    }

    #[test]
    fn rotation_only_when_the_problem_fits_in_l2() {
        let l2 = 50 << 20;
        let big = 200 << 20;
        assert_eq!(rotation_sets(big, l2, false, 80 << 30), 1);
        assert_eq!(rotation_sets(big, l2, true, 80 << 30), 2, "--cold-cache");
        // 10 MB sets: 2·50 MB / 10 MB + 1 = 11.
        let n = rotation_sets(10 << 20, l2, false, 80 << 30);
        assert_eq!(n, 11);
        // Tiny sets stop at 256, and memory caps it too.
        assert_eq!(rotation_sets(1024, l2, false, 80 << 30), 256);
        assert_eq!(rotation_sets(10 << 20, l2, false, 60 << 20), 3);
        assert_eq!(rotation_sets(10 << 20, l2, false, 0), 1);
    }

    #[test]
    fn first_usable_respects_math_and_workspace() {
        let a = |id, status: &str, ws, math| AlgoInfo {
            id,
            status: status.into(),
            cudnn_ms: Some(1.0),
            workspace_bytes: ws,
            math,
            // Algorithm 0 (of the weight gradient) adds with atomics.
            deterministic: id != 0,
        };
        let results = [
            a(6, "not supported", 0, cudnn::math::FMA),
            a(1, "ok", 0, cudnn::math::TENSOR_OP),
            a(7, "ok", 1 << 30, cudnn::math::FMA),
            a(0, "ok", 0, cudnn::math::FMA),
        ];
        assert_eq!(
            first_usable(&results, DType::F32, 1 << 20, false)
                .unwrap()
                .id,
            0
        );
        assert_eq!(
            first_usable(&results, DType::F32, 1 << 31, false)
                .unwrap()
                .id,
            7
        );
        assert_eq!(first_usable(&results, DType::F16, 0, false).unwrap().id, 1);
        assert!(first_usable(&results[..1], DType::F16, 0, false).is_none());
        // Deterministic: past algorithm 0, to the next that fits.
        assert_eq!(
            first_usable(&results, DType::F32, 1 << 31, true)
                .unwrap()
                .id,
            7
        );
        assert!(first_usable(&results, DType::F32, 1 << 20, true).is_none());
    }
}
