//! NormConv on a GPU (`cudnn_graph::norm_conv`, issue 28 item 4), in each
//! direction: the batch norm and ReLU before a convolution in its
//! prologue, and in its epilogue the next batch norm's statistics
//! (forward) or the batch norm's weight backward (data gradient), as one
//! graph of cuDNN's runtime fusion. The graph is made on the GPU's handle;
//! up to [`MAX_FUSED_CANDIDATES`] of the configurations cuDNN's heuristics
//! offer that finalize within the workspace limit are candidates (runtime
//! fusion compiles its kernels as a plan finalizes, seconds each, so at
//! most [`MAX_COMPILED`] are compiled), each is timed as `--api graph`
//! times a convolution's, and the fastest is kept. Engines noted as
//! down-converting their inputs are allowed: the prologue's activation is
//! fp32 (in the weight gradient, the data's dtype) and the convolution's
//! tensor cores take the data's dtype, as the unfused network stores that
//! activation in it anyway.
//!
//! Used by `conv --norm-conv` and its GPU test; not yet in the network.
//! On an H200 with cuDNN 9.19 the forward and the weight gradient ran and
//! matched in f16; no engine took the data gradient or any bf16 graph
//! (results/reference/gpu-h200-checks-ab-a43e5a7).

use super::cudnn_conv::geometry;
use super::graph_conv::{candidates, fastest, time_bound_plans, Policy, Refused};
use crate::backend::cuda::cudnn_graph::engine::sources;
use crate::backend::cuda::cudnn_graph::norm_conv::{bound, Bound, NormConvGraph};
use crate::backend::cuda::cudnn_graph::tensor::alignment_of;
use crate::backend::cuda::cudnn_graph::{ExecutionPlan, OperationGraph, VariantPack};
use crate::backend::cuda::memory::Workspace;
use crate::backend::cuda::{DeviceBuffer, Gpu, GpuError, GpuResult};
use crate::core::{DType, Layout};
use cnnbench_kernels::conv::{reference as conv_ref, ConvShape, Direction};
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
    nondeterministic: true,
};

/// Host values of some of a graph's tensors, by name (`cudnn_graph::
/// norm_conv::bound`), in its order. Activations are NHWC; weights and
/// their gradient as the CPU's convolutions hold them (gHWIO).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tensors(pub Vec<(&'static str, Vec<f32>)>);

impl Tensors {
    /// The values named `name`; panics on a name the graph has not: a
    /// programming error, the names being fixed per direction.
    pub fn get(&self, name: &str) -> &[f32] {
        self.0
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_slice())
            .unwrap_or_else(|| panic!("no tensor {name}"))
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.0.iter().map(|(n, _)| *n).collect()
    }
}

/// Rounds to `dtype` in place (the device stores rounded inputs; the
/// reference sees the same).
fn rounded(mut v: Vec<f32>, dtype: DType) -> Vec<f32> {
    dtype.round_in_place(&mut v);
    v
}

/// Seeded inputs of direction `dir`'s graph for `p`, each rounded to the
/// dtype the graph binds it in. The data gradient's batch norm is
/// consistent: its mean and 1/σ are `x`'s own per channel (ε = 1e-5), and
/// its scale and shift come from them and a random γ and β, as a
/// training step's would.
pub fn random_inputs(dir: Direction, p: &ConvShape, dtype: DType, seed: u64) -> Tensors {
    let uniform = |n: usize, i: u64| {
        let mut v = vec![0.0; n];
        cnnbench_kernels::rng::fill_uniform(&mut v, seed.wrapping_add(i), 1.0);
        v
    };
    let mut out = Vec::new();
    let (x, gamma, beta) = (
        rounded(uniform(p.src_len(), 0), dtype),
        uniform(p.ic, 4),
        uniform(p.ic, 5),
    );
    let (mean, invstd) = channel_stats(&x, p.ic);
    for b in bound(dir, p, dtype).into_iter().filter(|b| !b.output) {
        let v = match (dir, b.name) {
            (_, "x") => x.clone(),
            (_, "w") => uniform(p.wei_len(), 1),
            (_, "dy") => uniform(p.dst_len(), 2),
            (Direction::BwdData, "scale") => (0..p.ic).map(|c| gamma[c] * invstd[c]).collect(),
            (Direction::BwdData, "shift") => (0..p.ic)
                .map(|c| beta[c] - mean[c] * gamma[c] * invstd[c])
                .collect(),
            (_, "scale") => uniform(p.ic, 6),
            (_, "shift") => uniform(p.ic, 7),
            (_, "mean") => mean.clone(),
            (_, "invstd") => invstd.clone(),
            (_, "gamma") => gamma.clone(),
            (_, name) => unreachable!("input {name}"),
        };
        out.push((b.name, rounded(v, b.dtype)));
    }
    Tensors(out)
}

/// The mean and 1/√(var + 1e-5) per channel of NHWC `x` with `c`
/// channels, in f64 then rounded.
fn channel_stats(x: &[f32], c: usize) -> (Vec<f32>, Vec<f32>) {
    let (mut s, mut sq) = (vec![0f64; c], vec![0f64; c]);
    for (i, &v) in x.iter().enumerate() {
        s[i % c] += v as f64;
        sq[i % c] += v as f64 * v as f64;
    }
    let m = (x.len() / c.max(1)).max(1) as f64;
    let mean: Vec<f64> = s.iter().map(|v| v / m).collect();
    let invstd = (0..c)
        .map(|k| (1.0 / ((sq[k] / m - mean[k] * mean[k]).max(0.0) + 1e-5).sqrt()) as f32)
        .collect();
    (mean.into_iter().map(|v| v as f32).collect(), invstd)
}

/// Per-channel sums of NHWC `v` with `c` channels, in f64.
fn channel_sums(v: &[f32], c: usize, f: impl Fn(usize, f64) -> f64) -> Vec<f64> {
    let mut s = vec![0f64; c];
    for (i, &x) in v.iter().enumerate() {
        s[i % c] += f(i, x as f64);
    }
    s
}

/// `x·scale + shift` per channel (the batch norm's output), in f32.
fn normalised(x: &[f32], scale: &[f32], shift: &[f32]) -> Vec<f32> {
    let c = scale.len();
    x.iter()
        .enumerate()
        .map(|(i, &v)| v * scale[i % c] + shift[i % c])
        .collect()
}

/// The reference on the host for direction `dir`: the prologue's
/// activation in f32 (the graphs keep it in fp32, or in the dtype for the
/// weight gradient, within the dtype's tolerance), convolutions by the
/// CPU's reference, per-channel sums in f64. The data gradient's batch
/// norm coefficients follow `dx = eq_dy·dz + eq_x·x + eq_bias`, that is
/// BN's backward `dx = γ/σ·(dz − mean(dz) − x̂·mean(dz·x̂))` regrouped.
pub fn reference(dir: Direction, p: &ConvShape, inp: &Tensors) -> Tensors {
    let to32 = |v: Vec<f64>| -> Vec<f32> { v.into_iter().map(|x| x as f32).collect() };
    let pre = normalised(inp.get("x"), inp.get("scale"), inp.get("shift"));
    match dir {
        Direction::Fwd => {
            let act: Vec<f32> = pre.iter().map(|v| v.max(0.0)).collect();
            let mut y = vec![0.0; p.dst_len()];
            conv_ref::fwd(p, &act, inp.get("w"), None, &mut y);
            let sum = channel_sums(&y, p.oc, |_, v| v);
            let sqsum = channel_sums(&y, p.oc, |_, v| v * v);
            Tensors(vec![("y", y), ("sum", to32(sum)), ("sqsum", to32(sqsum))])
        }
        Direction::BwdData => {
            let mut dact = vec![0.0; p.src_len()];
            conv_ref::bwd_data(p, inp.get("dy"), inp.get("w"), &mut dact);
            let dz: Vec<f32> = dact
                .iter()
                .zip(&pre)
                .map(|(&d, &z)| if z > 0.0 { d } else { 0.0 })
                .collect();
            let (x, c) = (inp.get("x"), p.ic);
            let (mean, invstd, gamma) = (inp.get("mean"), inp.get("invstd"), inp.get("gamma"));
            let dbeta = channel_sums(&dz, c, |_, v| v);
            let dgamma = channel_sums(&dz, c, |i, v| {
                let k = i % c;
                v * (x[i] as f64 - mean[k] as f64) * invstd[k] as f64
            });
            let m = (p.src_len() / c) as f64;
            let eq_dy: Vec<f64> = (0..c).map(|k| gamma[k] as f64 * invstd[k] as f64).collect();
            let eq_x: Vec<f64> = (0..c)
                .map(|k| -eq_dy[k] * invstd[k] as f64 * dgamma[k] / m)
                .collect();
            let eq_bias: Vec<f64> = (0..c)
                .map(|k| -eq_dy[k] * dbeta[k] / m - eq_x[k] * mean[k] as f64)
                .collect();
            Tensors(vec![
                ("dz", dz),
                ("dgamma", to32(dgamma)),
                ("dbeta", to32(dbeta)),
                ("eq_dy", to32(eq_dy)),
                ("eq_x", to32(eq_x)),
                ("eq_bias", to32(eq_bias)),
            ])
        }
        Direction::BwdFilter => {
            let act: Vec<f32> = pre.iter().map(|v| v.max(0.0)).collect();
            let mut dw = vec![0.0; p.wei_len()];
            conv_ref::bwd_filter(p, &act, inp.get("dy"), &mut dw, None);
            Tensors(vec![("dw", dw)])
        }
    }
}

/// A NormConv graph on a GPU: its device tensors, and once planned, the
/// fastest plan with its pointers and workspace.
pub struct GpuNormConv<'g> {
    gpu: &'g Gpu,
    pub dir: Direction,
    pub dtype: DType,
    p: ConvShape,
    /// What the graph binds, in variant-pack order, and its buffers.
    bound: Vec<Bound>,
    bufs: Vec<DeviceBuffer>,
    graph: OperationGraph,
    // The operations the graph is made of, kept alive with it.
    _ops: NormConvGraph,
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
    /// Uploads `inputs` (as [`random_inputs`] makes them) in the dtypes
    /// the graph of `dir` binds them in, and makes the graph on the GPU's
    /// handle; refused in one line where runtime fusion cannot take `p`.
    pub fn new(
        gpu: &'g Gpu,
        dir: Direction,
        p: &ConvShape,
        dtype: DType,
        inputs: &Tensors,
    ) -> GpuResult<GpuNormConv<'g>> {
        let bound = bound(dir, p, dtype);
        let want: Vec<&str> = bound.iter().filter(|b| !b.output).map(|b| b.name).collect();
        if inputs.names() != want {
            return Err(GpuError::invalid(
                "NormConv graph",
                format!("inputs {:?} for a graph of {want:?}", inputs.names()),
            ));
        }
        let s = &gpu.stream;
        let mut bufs = Vec::with_capacity(bound.len());
        for b in &bound {
            let buf = if b.output {
                DeviceBuffer::alloc(s, b.len() * b.dtype.size_bytes())?
            } else {
                let v = inputs.get(b.name);
                if v.len() != b.len() {
                    return Err(GpuError::invalid(
                        "NormConv graph",
                        format!("{}: {} values for {}", b.name, v.len(), b.len()),
                    ));
                }
                let v = match b.name {
                    "w" => Layout::Nhwc.filter_from_ghwio(v, p),
                    _ => v.to_vec(),
                };
                DeviceBuffer::from_bytes(s, &b.dtype.encode(&v))?
            };
            bufs.push(buf);
        }
        let alignment = alignment_of(&bufs.iter().map(|b| b.ptr()).collect::<Vec<_>>());
        let ops = NormConvGraph::new(dir, p, &geometry(p), dtype, alignment)?;
        let graph = OperationGraph::new(&gpu.cudnn, &ops.ops())?;
        Ok(GpuNormConv {
            gpu,
            dir,
            dtype,
            p: *p,
            bound,
            bufs,
            graph,
            _ops: ops,
            chosen: None,
        })
    }

    fn ids(&self) -> Vec<i64> {
        self.bound.iter().map(|b| b.id).collect()
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
        let (ids, ptrs) = (self.ids(), self.ptrs());
        // One workspace, the largest any candidate needs (each is within
        // the limit), for timing them all.
        let most = plans.iter().map(|p| p.workspace_bytes).max().unwrap_or(0);
        let search = self.workspace(most)?;
        let ws = Workspace {
            ptr: search
                .as_ref()
                .map_or(std::ptr::null_mut(), DeviceBuffer::as_void),
            bytes: most,
        };
        let times = time_bound_plans(self.gpu, &plans, &ids, &ptrs, ws, stop)?;
        let timed = plans
            .iter()
            .map(|p| p.describe())
            .zip(times.iter().copied())
            .collect();
        let Some(best) = fastest(&times) else {
            let why: Vec<String> = refused
                .iter()
                .map(|r| format!("{}: {}", r.name, r.status))
                .collect();
            return Err(GpuError::invalid(
                "NormConv graph",
                format!(
                    "no engine configuration for {} {} ran ({} timed, {} refused{}{}; {})",
                    self.dir,
                    self.dtype,
                    plans.len(),
                    refused.len(),
                    if why.is_empty() { "" } else { ": " },
                    why.join("; "),
                    sources(&self.graph)
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
        let pack = VariantPack::new(&ids, &ptrs, ws_ptr)?;
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

    /// Fills the outputs in the data's dtype with NaN, so that what a run
    /// leaves unwritten shows as an error, and zeroes the fp32 ones:
    /// whether the statistics operations overwrite or add to them is not
    /// known yet (they have not run), and a check after one run from zero
    /// holds either way.
    pub fn poison(&mut self) -> GpuResult<()> {
        for (b, buf) in self.bound.iter().zip(&mut self.bufs) {
            if b.output {
                buf.fill_bytes(if b.dtype == DType::F32 { 0 } else { 0xFF })?;
            }
        }
        Ok(())
    }

    /// The outputs, on the host (after the stream's work), in the order
    /// and layouts of [`reference`]'s.
    pub fn download(&self) -> GpuResult<Tensors> {
        self.gpu.synchronize()?;
        let mut out = Vec::new();
        for (b, buf) in self.bound.iter().zip(&self.bufs) {
            if !b.output {
                continue;
            }
            let v = b.dtype.decode(&buf.download()?);
            let v = match b.name {
                "dw" => Layout::Nhwc.filter_to_ghwio(&v, &self.p),
                _ => v,
            };
            out.push((b.name, v));
        }
        Ok(Tensors(out))
    }
}

/// Each output's relative L2 error against the reference, by name.
pub fn errors(got: &Tensors, want: &Tensors) -> Vec<(&'static str, f64)> {
    want.0
        .iter()
        .map(|(name, w)| {
            let g = got.0.iter().find(|(n, _)| n == name).map(|(_, v)| v);
            let e = g.map_or(f64::INFINITY, |g| conv_ref::rel_l2_error(g, w));
            (*name, e)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use cnnbench_kernels::norm::batchnorm::reference as bn;

    fn shape() -> ConvShape {
        ConvShape {
            mb: 2,
            g: 1,
            ic: 8,
            ih: 5,
            iw: 5,
            oc: 16,
            oh: 3,
            ow: 3,
            kh: 3,
            kw: 3,
            sh: 2,
            sw: 2,
            ph: 1,
            pw: 1,
            dh: 0,
            dw: 0,
        }
    }

    /// The data gradient's inputs are a real batch norm's (its statistics
    /// are `x`'s, its scale and shift γ/σ and β − μγ/σ), and the
    /// reference's coefficients rebuild the batch norm's own backward:
    /// `eq_dy·dz + eq_x·x + eq_bias` is the CPU reference's `dx`, and dγ,
    /// dβ are its.
    #[test]
    fn the_data_gradients_coefficients_are_the_batch_norms_backward() {
        let p = shape();
        let inp = random_inputs(Direction::BwdData, &p, DType::F16, 7);
        let (x, c) = (inp.get("x"), p.ic);
        let (mut mean, mut var, mut invstd) = (vec![0.0; c], vec![0.0; c], vec![0.0; c]);
        let mut y = vec![0.0; x.len()];
        let gamma = inp.get("gamma");
        bn::fwd_train(
            c,
            x,
            gamma,
            &vec![0.0; c],
            1e-5,
            &mut y,
            &mut mean,
            &mut var,
            &mut invstd,
        );
        assert!(rel(inp.get("mean"), &mean) < 1e-6 && rel(inp.get("invstd"), &invstd) < 1e-6);
        let scale: Vec<f32> = (0..c).map(|k| gamma[k] * invstd[k]).collect();
        assert!(rel(inp.get("scale"), &scale) < 1e-6);

        let out = reference(Direction::BwdData, &p, &inp);
        let dz = out.get("dz");
        assert!(dz.contains(&0.0) && dz.iter().any(|&v| v != 0.0));
        let (mut dx, mut dgamma, mut dbeta) = (vec![0.0; x.len()], vec![0.0; c], vec![0.0; c]);
        bn::bwd(
            c,
            x,
            dz,
            gamma,
            &mean,
            &invstd,
            &mut dx,
            &mut dgamma,
            &mut dbeta,
        );
        let (a, b, k) = (out.get("eq_dy"), out.get("eq_x"), out.get("eq_bias"));
        let rebuilt: Vec<f32> = (0..x.len())
            .map(|i| a[i % c] * dz[i] + b[i % c] * x[i] + k[i % c])
            .collect();
        assert!(rel(&rebuilt, &dx) < 1e-5, "{}", rel(&rebuilt, &dx));
        assert!(rel(out.get("dgamma"), &dgamma) < 1e-5);
        assert!(rel(out.get("dbeta"), &dbeta) < 1e-5);
    }

    fn rel(a: &[f32], b: &[f32]) -> f64 {
        conv_ref::rel_l2_error(a, b)
    }

    /// Each direction's inputs are what its graph binds, in order, and its
    /// reference gives every output the graph writes, at its size.
    #[test]
    fn inputs_and_references_match_each_graphs_tensors() {
        let p = shape();
        for dir in Direction::ALL {
            let b = bound(dir, &p, DType::Bf16);
            let inp = random_inputs(dir, &p, DType::Bf16, 3);
            let ins: Vec<_> = b.iter().filter(|b| !b.output).collect();
            assert_eq!(inp.names(), ins.iter().map(|b| b.name).collect::<Vec<_>>());
            for (t, (_, v)) in ins.iter().zip(&inp.0) {
                assert_eq!(v.len(), t.len(), "{dir} {}", t.name);
            }
            let out = reference(dir, &p, &inp);
            let outs: Vec<_> = b.iter().filter(|b| b.output).collect();
            assert_eq!(out.names(), outs.iter().map(|b| b.name).collect::<Vec<_>>());
            for (t, (_, v)) in outs.iter().zip(&out.0) {
                assert_eq!(v.len(), t.len(), "{dir} {}", t.name);
                assert!(v.iter().all(|x| x.is_finite()) && v.iter().any(|&x| x != 0.0));
            }
            assert!(errors(&out, &out).iter().all(|(_, e)| *e == 0.0));
        }
    }
}
