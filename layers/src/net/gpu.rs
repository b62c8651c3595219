//! The GPU executor: the same graph and buffer plan as the CPU's
//! ([`super::plan::BufferPlan`]), every tensor on the device in the run's
//! dtype and layout, allocated once; each layer's CUDA side enqueues its
//! work on the benchmark stream, and CUDA events time the phases (and,
//! when asked, every layer).
//!
//! Gradients of a tensor read by several layers are summed by cuDNN's
//! op-tensor into a buffer of their own before its producer's backward.

use super::graph::{Graph, Op};
use super::init;
use super::plan::{passes_gradient, BufferPlan};
use crate::backend::cuda::cudnn::TensorDesc;
use crate::backend::cuda::cudnn_ops::{OpTensorDesc, SCALARS};
use crate::backend::cuda::layer::{DevPtr, GpuCtx, GpuLayer, GpuParam, HostOrder, PlanTensors};
use crate::backend::cuda::memory::Workspace;
use crate::backend::cuda::nvrtc::Kernels;
use crate::backend::cuda::{check_cudnn, DeviceBuffer, Gpu, GpuError, GpuResult};
use crate::core::{DType, Layout};
use crate::ops::add::cuda::{add_into, AddGpuLayer};
use crate::ops::batchnorm::cuda::BatchNormGpuLayer;
use crate::ops::concat::cuda::{blocks, ConcatGpuLayer};
use crate::ops::conv::gpu_layer::ConvGpuLayer;
use crate::ops::dropout::cuda::DropoutGpuLayer;
use crate::ops::linear::cuda::LinearGpuLayer;
use crate::ops::loss::cuda::SoftmaxXentGpuLayer;
use crate::ops::lrn::cuda::LrnGpuLayer;
use crate::ops::pool::cuda::PoolGpuLayer;
use crate::ops::relu::cuda::ReluGpuLayer;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::CudaEvent;

#[derive(Clone, Copy, Debug)]
pub struct GpuOptions {
    pub dtype: DType,
    pub layout: Layout,
    pub seed: u64,
    /// The most workspace a convolution algorithm may use.
    pub workspace_limit: usize,
    /// Time every layer with CUDA events (`--per-layer`).
    pub per_layer: bool,
}

/// Bytes held on the device, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuMemory {
    pub params: usize,
    pub activations: usize,
    pub workspace: usize,
}

/// One step's GPU milliseconds per phase.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepMs {
    pub forward: f64,
    pub backward: f64,
    pub update: f64,
}

/// The device pointers a node's layer reads and writes: fixed once the
/// buffers exist, so the timed passes look them up instead of building
/// them.
struct NodePtrs {
    x: Vec<DevPtr>,
    y: DevPtr,
    /// The output gradient the backward reads (0 for the loss).
    dy: DevPtr,
    dx: Vec<Option<DevPtr>>,
}

pub struct GpuNet<'g> {
    pub graph: Graph,
    pub batch: usize,
    gpu: &'g Gpu,
    kernels: &'g Kernels,
    opts: GpuOptions,
    layers: Vec<Option<Box<dyn GpuLayer>>>,
    acts: Vec<DeviceBuffer>,
    grads: Vec<DeviceBuffer>,
    plan: BufferPlan,
    ptrs: Vec<NodePtrs>,
    /// Descriptors of the nodes whose output gradients are summed.
    sum_desc: Vec<Option<TensorDesc>>,
    add: OpTensorDesc,
    workspace: Option<DeviceBuffer>,
    /// Phase events: before forward, after forward, after backward, after
    /// the update.
    phase: [CudaEvent; 4],
    /// Per-layer events (`per_layer`): one before each node, one after the
    /// last, for each pass.
    fwd_events: Vec<CudaEvent>,
    bwd_events: Vec<CudaEvent>,
    /// GPU milliseconds of each node in the last step (`per_layer`).
    pub fwd_ms: Vec<f64>,
    pub bwd_ms: Vec<f64>,
    step: u64,
}

/// Device bytes [`GpuNet::new`] allocates for activations, gradients and
/// parameters: the memory check made before allocating.
pub fn estimate(graph: &Graph, batch: usize, dtype: DType) -> u128 {
    let plan = BufferPlan::new(graph, batch, |_| false);
    let es = dtype.size_bytes() as u128;
    let half = matches!(dtype, DType::F16 | DType::Bf16);
    let params = graph.params() as u128 * if half { 16 } else { 12 };
    let elems: u128 = plan
        .act_len
        .iter()
        .chain(&plan.grad_len)
        .map(|&l| l as u128)
        .sum();
    params + elems * es
}

fn event(gpu: &Gpu) -> GpuResult<CudaEvent> {
    gpu.ctx
        .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(|e| GpuError {
            call: "cuEventCreate",
            status: format!("{:?}", e.0),
            oom: false,
        })
}

fn driver(call: &'static str, e: cudarc::driver::DriverError) -> GpuError {
    GpuError {
        call,
        status: format!("{:?}", e.0),
        oom: false,
    }
}

impl<'g> GpuNet<'g> {
    /// Allocates every tensor, makes every layer with the same initial
    /// parameters, image and labels as the CPU's ([`init`]), and chooses
    /// each convolution's algorithms on its own tensors.
    pub fn new(
        gpu: &'g Gpu,
        kernels: &'g Kernels,
        graph: &Graph,
        batch: usize,
        opts: GpuOptions,
    ) -> GpuResult<GpuNet<'g>> {
        let n = graph.nodes.len();
        let plan = BufferPlan::new(graph, batch, |_| false);
        let es = opts.dtype.size_bytes();
        let s = &gpu.stream;
        let loss_buf = plan.act_of[n - 1];
        let mut acts = Vec::with_capacity(plan.act_len.len());
        for (b, &len) in plan.act_len.iter().enumerate() {
            // The loss is fp32 whatever the dtype.
            let bytes = if b == loss_buf { len * 4 } else { len * es };
            let mut buf = DeviceBuffer::alloc(s, bytes)?;
            buf.fill_bytes(0)?;
            acts.push(buf);
        }
        let mut grads = Vec::with_capacity(plan.grad_len.len());
        for &len in &plan.grad_len {
            let mut buf = DeviceBuffer::alloc(s, len * es)?;
            buf.fill_bytes(0)?;
            grads.push(buf);
        }
        let labels = init::labels(graph, batch, opts.seed);
        let mut layers: Vec<Option<Box<dyn GpuLayer>>> = (0..n).map(|_| None).collect();
        for (i, layer) in layers.iter_mut().enumerate().skip(1) {
            *layer = make_layer(gpu, kernels, graph, i, batch, &labels, &opts)?;
        }
        let mut sum_desc: Vec<Option<TensorDesc>> = (0..n).map(|_| None).collect();
        for (i, d) in sum_desc.iter_mut().enumerate() {
            if plan.dy_sum[i].is_some() {
                *d = Some(desc(graph, i, batch, &opts)?);
            }
        }
        let ptr = |b: usize| acts[plan.act_of[b]].ptr();
        let ptrs = graph
            .nodes
            .iter()
            .enumerate()
            .map(|(i, node)| NodePtrs {
                x: node.inputs.iter().map(|&t| ptr(t)).collect(),
                y: ptr(i),
                dy: plan.dy_of(i).map_or(0, |b| grads[b].ptr()),
                dx: plan.dx_of[i]
                    .iter()
                    .map(|b| b.map(|b| grads[b].ptr()))
                    .collect(),
            })
            .collect();
        let per_layer = if opts.per_layer { n + 1 } else { 0 };
        let events = |k: usize| (0..k).map(|_| event(gpu)).collect::<GpuResult<Vec<_>>>();
        let mut net = GpuNet {
            graph: graph.clone(),
            batch,
            gpu,
            kernels,
            opts,
            layers,
            acts,
            grads,
            plan,
            ptrs,
            sum_desc,
            add: OpTensorDesc::add()?,
            workspace: None,
            phase: [event(gpu)?, event(gpu)?, event(gpu)?, event(gpu)?],
            fwd_events: events(per_layer)?,
            bwd_events: events(per_layer)?,
            fwd_ms: vec![0.0; n],
            bwd_ms: vec![0.0; n],
            step: 0,
        };
        let image = init::input(graph, batch, opts.seed);
        net.upload_output(0, &image)?;
        net.choose_algorithms()?;
        Ok(net)
    }

    /// Each layer's `plan` (the convolutions' FindEx) with a search
    /// workspace as large as the limit (halved until it fits), then one
    /// shared workspace of what the choices need.
    fn choose_algorithms(&mut self) -> GpuResult<()> {
        let mut limit = self.opts.workspace_limit;
        let search = loop {
            match DeviceBuffer::alloc(&self.gpu.stream, limit) {
                Ok(b) => break b,
                Err(e) if e.oom && limit > (16 << 20) => limit /= 2,
                Err(e) => return Err(e),
            }
        };
        let ws = Workspace {
            ptr: search.as_void(),
            bytes: search.bytes(),
        };
        let mut need = 0;
        for i in 1..self.graph.nodes.len() {
            let p = &self.ptrs[i];
            let t = PlanTensors {
                x: &p.x,
                y: p.y,
                dy: (p.dy != 0).then_some(p.dy),
                dx: &p.dx,
                search: ws,
                limit,
            };
            let cx = self.ctx(Workspace::NONE);
            if let Some(l) = self.layers[i].as_mut() {
                need = need.max(l.plan(&cx, &t)?);
            }
        }
        drop(search);
        self.workspace = Some(DeviceBuffer::alloc(&self.gpu.stream, need)?);
        self.gpu.synchronize()
    }

    fn ctx(&self, workspace: Workspace) -> GpuCtx<'g> {
        GpuCtx {
            gpu: self.gpu,
            kernels: self.kernels,
            dtype: self.opts.dtype,
            layout: self.opts.layout,
            step_seed: self.step.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ self.opts.seed,
            workspace,
        }
    }

    fn shared_workspace(&self) -> Workspace {
        self.workspace
            .as_ref()
            .map_or(Workspace::NONE, |w| Workspace {
                ptr: w.as_void(),
                bytes: w.bytes(),
            })
    }

    /// Moves to the next training step: dropout draws new masks.
    pub fn next_step(&mut self) {
        self.step += 1;
    }

    /// Enqueues the forward pass.
    pub fn forward(&mut self) -> GpuResult<()> {
        let cx = self.ctx(self.shared_workspace());
        for i in 1..self.graph.nodes.len() {
            if self.opts.per_layer {
                self.record(&self.fwd_events[i - 1])?;
            }
            self.forward_node(&cx, i)?;
        }
        if self.opts.per_layer {
            self.record(&self.fwd_events[self.graph.nodes.len() - 1])?;
        }
        Ok(())
    }

    fn forward_node(&mut self, cx: &GpuCtx, i: usize) -> GpuResult<()> {
        if self.graph.nodes[i].op == Op::Flatten {
            return Ok(());
        }
        let p = &self.ptrs[i];
        match self.layers[i].as_mut() {
            Some(l) => l.forward(cx, &p.x, p.y),
            None => Ok(()),
        }
    }

    /// Enqueues the backward pass: every parameter's fp32 gradient.
    pub fn backward(&mut self) -> GpuResult<()> {
        let cx = self.ctx(self.shared_workspace());
        let n = self.graph.nodes.len();
        for i in (1..n).rev() {
            if self.opts.per_layer {
                self.record(&self.bwd_events[n - 1 - i])?;
            }
            if passes_gradient(&self.graph.nodes[i].op) {
                // The gradient handed through may be a sum.
                self.sum_gradients(&cx, i)?;
            } else {
                self.backward_node(&cx, i)?;
            }
        }
        if self.opts.per_layer {
            self.record(&self.bwd_events[n - 1])?;
        }
        Ok(())
    }

    /// Sums node `i`'s output gradients into their own buffer, where the
    /// plan has one.
    fn sum_gradients(&self, cx: &GpuCtx, i: usize) -> GpuResult<()> {
        if let (Some(sum), Some(d)) = (self.plan.dy_sum[i], &self.sum_desc[i]) {
            let parts = &self.plan.dy_parts[i];
            let p = |k: usize| self.grads[parts[k]].ptr();
            let dst = self.grads[sum].ptr();
            add_into(cx, d, &self.add, p(0), p(1), dst)?;
            for k in 2..parts.len() {
                // SAFETY: every part and the sum hold the described tensor.
                check_cudnn("cudnnAddTensor", unsafe {
                    cudarc::cudnn::sys::cudnnAddTensor(
                        cx.cudnn(),
                        SCALARS.one(),
                        d.0,
                        crate::backend::cuda::layer::void(p(k)),
                        SCALARS.one(),
                        d.0,
                        crate::backend::cuda::layer::void(dst),
                    )
                })?;
            }
        }
        Ok(())
    }

    fn backward_node(&mut self, cx: &GpuCtx, i: usize) -> GpuResult<()> {
        self.sum_gradients(cx, i)?;
        let p = &self.ptrs[i];
        match self.layers[i].as_mut() {
            Some(l) => l.backward(cx, &p.x, p.y, p.dy, &p.dx),
            None => Ok(()),
        }
    }

    /// Enqueues one SGD step with momentum over every parameter (fp32
    /// master weights), then refreshes the half copies.
    pub fn sgd_update(&mut self, lr: f32, momentum: f32) -> GpuResult<()> {
        let (gpu, kernels) = (self.gpu, self.kernels);
        for l in self.layers.iter_mut().flatten() {
            for p in l.params() {
                // SAFETY: the three buffers hold `len` floats.
                unsafe {
                    kernels.sgd_update(
                        &gpu.stream,
                        p.value.ptr(),
                        p.grad.ptr(),
                        p.velocity.ptr(),
                        p.len,
                        lr,
                        momentum,
                    )?;
                }
                p.refresh_half(gpu, kernels)?;
            }
        }
        Ok(())
    }

    fn record(&self, e: &CudaEvent) -> GpuResult<()> {
        e.record(&self.gpu.stream)
            .map_err(|e| driver("cuEventRecord", e))
    }

    /// One training step (the next dropout masks), timed by CUDA events
    /// per phase; waits for the GPU. With `per_layer`, also fills
    /// `fwd_ms` and `bwd_ms`.
    pub fn step(&mut self, update: Option<(f32, f32)>) -> GpuResult<StepMs> {
        self.next_step();
        self.record(&self.phase[0])?;
        self.forward()?;
        self.record(&self.phase[1])?;
        self.backward()?;
        self.record(&self.phase[2])?;
        if let Some((lr, m)) = update {
            self.sgd_update(lr, m)?;
        }
        self.record(&self.phase[3])?;
        self.phase[3]
            .synchronize()
            .map_err(|e| driver("cuEventSynchronize", e))?;
        let ms = |a: &CudaEvent, b: &CudaEvent| -> GpuResult<f64> {
            a.elapsed_ms(b)
                .map(|v| v as f64)
                .map_err(|e| driver("cuEventElapsedTime", e))
        };
        if self.opts.per_layer {
            let n = self.graph.nodes.len();
            for i in 1..n {
                self.fwd_ms[i] = ms(&self.fwd_events[i - 1], &self.fwd_events[i])?;
                self.bwd_ms[i] = ms(&self.bwd_events[n - 1 - i], &self.bwd_events[n - i])?;
            }
        }
        Ok(StepMs {
            forward: ms(&self.phase[0], &self.phase[1])?,
            backward: ms(&self.phase[1], &self.phase[2])?,
            update: ms(&self.phase[2], &self.phase[3])?,
        })
    }

    /// The loss of the last forward pass (waits for the GPU).
    pub fn loss(&self) -> GpuResult<f32> {
        let last = self.graph.nodes.len() - 1;
        let bytes = self.acts[self.plan.act_of[last]].download()?;
        Ok(f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    /// The dims of the tensor node `i`'s buffer holds: a flatten's buffer
    /// is its input's, laid out as that input (NCHW or NHWC), so host
    /// values convert with the input's dims.
    fn buffer_dims(&self, mut i: usize) -> super::Dims {
        while self.graph.nodes[i].op == Op::Flatten {
            i = self.graph.nodes[i].inputs[0];
        }
        self.graph.nodes[i].out
    }

    /// Node `i`'s output as NHWC f32 (waits for the GPU).
    pub fn output(&self, i: usize) -> GpuResult<Vec<f32>> {
        let d = self.buffer_dims(i);
        let bytes = self.acts[self.plan.act_of[i]].download()?;
        let v = if i == self.graph.nodes.len() - 1 {
            DType::F32.decode(&bytes)
        } else {
            self.opts.dtype.decode(&bytes)
        };
        Ok(self.opts.layout.to_nhwc(&v, self.batch, d.h, d.w, d.c))
    }

    /// Sets node `i`'s output from NHWC f32 values (`check` feeds each
    /// layer the CPU's inputs).
    pub fn upload_output(&mut self, i: usize, host: &[f32]) -> GpuResult<()> {
        let d = self.buffer_dims(i);
        let v = self.opts.layout.from_nhwc(host, self.batch, d.h, d.w, d.c);
        self.acts[self.plan.act_of[i]].upload(&self.opts.dtype.encode(&v))
    }

    /// Sets gradient buffer `b` (of node `i`'s output) from NHWC f32.
    fn upload_grad(&mut self, b: usize, i: usize, host: &[f32]) -> GpuResult<()> {
        let d = self.buffer_dims(i);
        let v = self.opts.layout.from_nhwc(host, self.batch, d.h, d.w, d.c);
        self.grads[b].upload(&self.opts.dtype.encode(&v))
    }

    /// Node `i`'s forward alone, after its inputs were set.
    pub fn forward_one(&mut self, i: usize) -> GpuResult<()> {
        let cx = self.ctx(self.shared_workspace());
        self.forward_node(&cx, i)
    }

    /// Node `i`'s backward alone, reading `dy_parts` (NHWC f32, one per
    /// consuming edge, in the plan's order) times `scale` as its output
    /// gradients. The layer is linear in them, so its gradients come out
    /// scaled by `scale` too: `check` scales half-precision runs so that
    /// small gradients do not underflow, as mixed-precision training's
    /// loss scaling does.
    pub fn backward_one(&mut self, i: usize, dy_parts: &[&[f32]], scale: f32) -> GpuResult<()> {
        if passes_gradient(&self.graph.nodes[i].op) {
            return Ok(());
        }
        let parts = self.plan.dy_parts[i].clone();
        for (&b, host) in parts.iter().zip(dy_parts) {
            let scaled: Vec<f32> = host.iter().map(|v| v * scale).collect();
            self.upload_grad(b, i, &scaled)?;
        }
        let cx = self.ctx(self.shared_workspace());
        self.backward_node(&cx, i)
    }

    /// Node `i`'s parameter gradients with their names (`conv1.weight`,
    /// `conv1.bias`), fp32 in the CPU order (waits for the GPU).
    pub fn layer_grads(&self, i: usize) -> GpuResult<Vec<(String, Vec<f32>)>> {
        let mut out = Vec::new();
        if let Some(l) = &self.layers[i] {
            for (k, p) in l.params_ref().into_iter().enumerate() {
                let what = if k == 0 { "weight" } else { "bias" };
                let name = format!("{}.{what}", self.graph.nodes[i].name);
                out.push((name, p.download_grad()?));
            }
        }
        Ok(out)
    }

    /// The kernels each layer ran.
    pub fn kernels(&self, i: usize) -> String {
        self.layers[i]
            .as_ref()
            .map(|l| l.kernels())
            .unwrap_or_default()
    }

    pub fn memory(&self) -> GpuMemory {
        let params = self
            .layers
            .iter()
            .flatten()
            .flat_map(|l| l.params_ref())
            .map(GpuParam::bytes)
            .sum();
        let activations = self
            .acts
            .iter()
            .chain(&self.grads)
            .map(DeviceBuffer::bytes)
            .sum();
        let workspace = self.workspace.as_ref().map_or(0, DeviceBuffer::bytes)
            + self
                .layers
                .iter()
                .flatten()
                .map(|l| l.scratch_bytes())
                .sum::<usize>();
        GpuMemory {
            params,
            activations,
            workspace,
        }
    }
}

/// Node `i`'s output tensor, as cuDNN describes it.
fn desc(graph: &Graph, i: usize, batch: usize, o: &GpuOptions) -> GpuResult<TensorDesc> {
    let d = graph.nodes[i].out;
    TensorDesc::new(o.layout, o.dtype, batch, d.c, d.h, d.w)
}

/// The CUDA layer of node `i` (`None` for flatten, which aliases).
fn make_layer(
    gpu: &Gpu,
    kernels: &Kernels,
    graph: &Graph,
    i: usize,
    batch: usize,
    labels: &[u32],
    o: &GpuOptions,
) -> GpuResult<Option<Box<dyn GpuLayer>>> {
    let node = &graph.nodes[i];
    let x = graph.nodes[node.inputs.first().copied().unwrap_or(0)].out;
    let host = init::layer_params(graph, i, o.seed);
    let half = match o.dtype {
        DType::F16 | DType::Bf16 => Some(o.dtype.storage()),
        _ => None,
    };
    let param =
        |k: usize, order: HostOrder, half| GpuParam::new(gpu, kernels, &host[k], order, half);
    let input_grad = node.inputs.first() != Some(&0);
    let layer: Box<dyn GpuLayer> = match node.op {
        Op::Input => unreachable!("the input has no layer"),
        Op::Flatten => return Ok(None),
        Op::Conv(s) => {
            let shape = graph.conv_shape(i, batch);
            let weight = param(0, HostOrder::Filter(shape, o.layout), half)?;
            let bias = if s.bias {
                Some(param(1, HostOrder::Plain, half)?)
            } else {
                None
            };
            Box::new(ConvGpuLayer::new(
                shape, o.dtype, o.layout, weight, bias, input_grad,
            )?)
        }
        Op::BatchNorm { eps, momentum } => Box::new(BatchNormGpuLayer::new(
            gpu,
            [batch, x.c, x.h, x.w],
            o.dtype,
            o.layout,
            eps,
            momentum,
            param(0, HostOrder::Plain, None)?,
            param(1, HostOrder::Plain, None)?,
            input_grad,
        )?),
        Op::Relu => Box::new(ReluGpuLayer::new(desc(graph, i, batch, o)?)?),
        Op::Pool(_) => {
            let (shape, max) = graph.pool_shape(i, batch);
            Box::new(PoolGpuLayer::new(shape, max, o.dtype, o.layout)?)
        }
        Op::Lrn(s) => Box::new(LrnGpuLayer::new(desc(graph, i, batch, o)?, &s)?),
        Op::Linear { out } => {
            // The flatten before a fully connected layer follows the
            // layout: its weight rows are permuted to match on NCHW.
            let src = graph.nodes[node.inputs[0]].op;
            let spatial = graph.nodes[graph.nodes[node.inputs[0]]
                .inputs
                .first()
                .copied()
                .unwrap_or(0)]
            .out;
            let order =
                if src == Op::Flatten && o.layout == Layout::Nchw && spatial.h * spatial.w > 1 {
                    HostOrder::LinearRows {
                        h: spatial.h,
                        w: spatial.w,
                        c: spatial.c,
                    }
                } else {
                    HostOrder::Plain
                };
            Box::new(LinearGpuLayer::new(
                [batch, x.len(), out],
                o.dtype,
                param(0, order, half)?,
                param(1, HostOrder::Plain, half)?,
            )?)
        }
        Op::Dropout { p } => Box::new(DropoutGpuLayer::new(
            gpu,
            p,
            i as u64,
            [batch, x.c, x.h, x.w],
            o.dtype,
            o.layout,
        )?),
        Op::Concat => {
            let widths: Vec<usize> = node.inputs.iter().map(|&t| graph.nodes[t].out.c).collect();
            Box::new(ConcatGpuLayer::new(blocks(
                o.layout,
                [batch, x.h, x.w],
                &widths,
                o.dtype.size_bytes(),
            )))
        }
        Op::Add => Box::new(AddGpuLayer::new(desc(graph, i, batch, o)?)?),
        Op::SoftmaxXent => Box::new(SoftmaxXentGpuLayer::new(gpu, x.c, labels, o.dtype)?),
    };
    Ok(Some(layer))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zoo;

    #[test]
    fn device_estimate_counts_half_copies() {
        let g = zoo::build("resnet50").expect("zoo model");
        let f32b = estimate(&g, 16, DType::F32);
        let f16b = estimate(&g, 16, DType::F16);
        // Activations halve; parameters gain a half copy and its gradient.
        assert!(f16b < f32b);
        let p = g.params() as u128;
        assert_eq!(f32b - p * 12, 2 * (f16b - p * 16));
    }
}
