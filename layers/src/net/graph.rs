//! A network as a list of layers in execution order, each reading earlier
//! layers' outputs. Shapes are per image (NHWC: `h x w x c`); the batch is
//! chosen when the network is planned on a backend, so one `Graph` serves
//! every batch size, and describing it allocates nothing.

use crate::backend::cpu::Cpu;
use crate::backend::cuda::layer::Cuda;
use crate::backend::cuda::GpuResult;
use crate::core::backend::Layer;
use crate::core::error::Result;
pub use crate::core::shape::Dims;
use crate::ops::add::AddSpec;
pub use crate::ops::batchnorm::BatchNormSpec;
use crate::ops::concat::ConcatSpec;
pub use crate::ops::conv::ConvSpec;
pub use crate::ops::dropout::DropoutSpec;
use crate::ops::flatten::FlattenSpec;
pub use crate::ops::linear::LinearSpec;
use crate::ops::loss::SoftmaxXentSpec;
pub use crate::ops::lrn::LrnSpec;
pub use crate::ops::pool::{PoolKind, PoolSpec};
use crate::ops::relu::ReluSpec;
use crate::ops::spec::{NodeCx, OpSpec};
use cnnbench_kernels::conv::ConvShape;
use cnnbench_kernels::pool::PoolShape;

/// The index of the layer that produces a tensor (0 is the input image).
pub type TensorId = usize;

/// What a node does: one variant per op, holding the op's spec. Adding an
/// op means its folder under `ops/`, a variant here and its line in
/// [`Op::spec`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op {
    Input,
    Conv(ConvSpec),
    BatchNorm(BatchNormSpec),
    Relu,
    Pool(PoolSpec),
    Lrn(LrnSpec),
    Linear(LinearSpec),
    Dropout(DropoutSpec),
    Concat,
    Add,
    Flatten,
    SoftmaxXent,
}

impl Op {
    /// The op's spec: its shapes, parameters, MACs, initial values and
    /// layers on every backend.
    pub fn spec(&self) -> &dyn OpSpec {
        match self {
            Op::Input => &InputSpec,
            Op::Conv(s) => s,
            Op::BatchNorm(s) => s,
            Op::Relu => &ReluSpec,
            Op::Pool(s) => s,
            Op::Lrn(s) => s,
            Op::Linear(s) => s,
            Op::Dropout(s) => s,
            Op::Concat => &ConcatSpec,
            Op::Add => &AddSpec,
            Op::Flatten => &FlattenSpec,
            Op::SoftmaxXent => &SoftmaxXentSpec,
        }
    }

    /// The short type name shown in layer tables and JSON (`conv`, `bn`, ...).
    pub fn kind(&self) -> &'static str {
        self.spec().kind()
    }
}

/// The image: no layer on any backend.
struct InputSpec;

impl OpSpec for InputSpec {
    fn kind(&self) -> &'static str {
        "input"
    }

    fn cpu(&self, _cx: &NodeCx) -> Result<Box<dyn Layer<Cpu>>> {
        Err(no_layer())
    }

    fn cuda<'g>(&self, _cx: &NodeCx, _b: &Cuda<'g>) -> GpuResult<Option<Box<dyn Layer<Cuda<'g>>>>> {
        Err(no_layer())
    }
}

fn no_layer() -> crate::core::error::Error {
    crate::core::error::Error {
        call: "make layer",
        status: "the input has no layer".into(),
        oom: false,
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub name: String,
    pub op: Op,
    pub inputs: Vec<TensorId>,
    pub out: Dims,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Graph {
    pub name: String,
    /// Node 0 is the input image; the last node is the loss.
    pub nodes: Vec<Node>,
}

impl Graph {
    pub fn input(&self) -> Dims {
        self.nodes[0].out
    }

    /// The classifier's width (the loss layer's input channels).
    pub fn classes(&self) -> usize {
        let loss = self.nodes.last().expect("a graph has its input node");
        self.nodes[loss.inputs[0]].out.c
    }

    /// The dims of node `i`'s inputs.
    pub fn input_dims(&self, i: usize) -> Vec<Dims> {
        self.nodes[i]
            .inputs
            .iter()
            .map(|&t| self.nodes[t].out)
            .collect()
    }

    /// Learnable parameters of node `i` (BN: weight and bias; running
    /// statistics are buffers, not parameters).
    pub fn node_params(&self, i: usize) -> usize {
        self.nodes[i].op.spec().params(&self.input_dims(i))
    }

    pub fn params(&self) -> usize {
        (0..self.nodes.len()).map(|i| self.node_params(i)).sum()
    }

    /// Multiply-accumulates of node `i`'s forward pass for one image
    /// (convolutions and fully connected layers; the rest are counted as 0,
    /// as papers do).
    pub fn node_macs(&self, i: usize) -> u64 {
        let n = &self.nodes[i];
        n.op.spec().macs(&self.input_dims(i), n.out)
    }

    pub fn macs(&self) -> u64 {
        (0..self.nodes.len()).map(|i| self.node_macs(i)).sum()
    }

    /// Node `i` as its op sees it, at batch `batch` of run `seed`.
    pub fn node_cx<'a>(
        &self,
        i: usize,
        batch: usize,
        seed: u64,
        x: &'a [Dims],
        labels: &'a [u32],
    ) -> NodeCx<'a> {
        let node = &self.nodes[i];
        let first = node.inputs.first().copied();
        let flattened = first
            .filter(|&t| self.nodes[t].op == Op::Flatten)
            .map(|t| self.nodes[self.nodes[t].inputs[0]].out);
        NodeCx {
            index: i,
            batch,
            x,
            y: node.out,
            seed,
            labels,
            input_grad: first.is_some_and(|t| t != 0),
            flattened,
        }
    }

    /// The pooling problem of node `i` at batch `mb`, and whether it is max
    /// pooling; panics when node `i` is not a pooling layer.
    pub fn pool_shape(&self, i: usize, mb: usize) -> (PoolShape, bool) {
        let n = &self.nodes[i];
        let Op::Pool(p) = n.op else {
            panic!("node {} ({}) is not a pooling layer", i, n.name)
        };
        p.shape(self.nodes[n.inputs[0]].out, n.out, mb)
    }

    /// The convolution problem of node `i` at batch `mb`; panics when node
    /// `i` is not a convolution.
    pub fn conv_shape(&self, i: usize, mb: usize) -> ConvShape {
        let n = &self.nodes[i];
        let Op::Conv(s) = n.op else {
            panic!("node {} ({}) is not a convolution", i, n.name)
        };
        s.shape(self.nodes[n.inputs[0]].out, n.out, mb)
    }

    /// The layers that read each layer's output (more than one: its
    /// gradient is a sum).
    pub fn consumers(&self) -> Vec<Vec<usize>> {
        let mut c = vec![Vec::new(); self.nodes.len()];
        for (i, n) in self.nodes.iter().enumerate() {
            for &t in &n.inputs {
                c[t].push(i);
            }
        }
        c
    }
}

/// Output size along one axis of a convolution or pooling window.
pub fn out_size(input: usize, k: usize, s: usize, p: usize, ceil: bool) -> usize {
    let span = (input + 2 * p)
        .checked_sub(k)
        .unwrap_or_else(|| panic!("window {k} larger than padded input {input}+2·{p}"));
    if !ceil {
        return span / s + 1;
    }
    let mut out = span.div_ceil(s) + 1;
    // PyTorch's rule: the last window must start inside the input or its
    // left padding.
    if (out - 1) * s >= input + p {
        out -= 1;
    }
    out
}

/// Assembles a [`Graph`] layer by layer; each call returns the new layer's
/// output. Shape mistakes are programming errors in a model, so they panic
/// (every model is built in the tests).
pub struct Builder {
    graph: Graph,
}

impl Builder {
    /// A network named `name` over `h x w x c` images; returns the builder and
    /// the input tensor.
    pub fn new(name: &str, input: Dims) -> (Builder, TensorId) {
        let graph = Graph {
            name: name.to_string(),
            nodes: vec![Node {
                name: "input".into(),
                op: Op::Input,
                inputs: vec![],
                out: input,
            }],
        };
        (Builder { graph }, 0)
    }

    pub fn dims(&self, t: TensorId) -> Dims {
        self.graph.nodes[t].out
    }

    fn push(&mut self, name: &str, op: Op, inputs: Vec<TensorId>, out: Dims) -> TensorId {
        assert!(
            !self.graph.nodes.iter().any(|n| n.name == name),
            "{}: duplicate layer name {name}",
            self.graph.name
        );
        self.graph.nodes.push(Node {
            name: name.to_string(),
            op,
            inputs,
            out,
        });
        self.graph.nodes.len() - 1
    }

    pub fn conv(&mut self, name: &str, x: TensorId, s: ConvSpec) -> TensorId {
        let d = self.dims(x);
        assert!(
            d.c.is_multiple_of(s.groups) && s.oc.is_multiple_of(s.groups),
            "{name}: channels not divisible by groups"
        );
        let out = Dims::new(
            out_size(d.h, s.kh, s.sh, s.ph, false),
            out_size(d.w, s.kw, s.sw, s.pw, false),
            s.oc,
        );
        self.push(name, Op::Conv(s), vec![x], out)
    }

    /// Batch normalisation with PyTorch's defaults (eps 1e-5, momentum 0.1).
    pub fn bn(&mut self, name: &str, x: TensorId) -> TensorId {
        self.bn_eps(name, x, 1e-5)
    }

    pub fn bn_eps(&mut self, name: &str, x: TensorId, eps: f32) -> TensorId {
        let d = self.dims(x);
        self.push(
            name,
            Op::BatchNorm(BatchNormSpec { eps, momentum: 0.1 }),
            vec![x],
            d,
        )
    }

    pub fn relu(&mut self, name: &str, x: TensorId) -> TensorId {
        let d = self.dims(x);
        self.push(name, Op::Relu, vec![x], d)
    }

    pub fn pool(&mut self, name: &str, x: TensorId, s: PoolSpec) -> TensorId {
        let d = self.dims(x);
        let out = Dims::new(
            out_size(d.h, s.kh, s.sh, s.ph, s.ceil),
            out_size(d.w, s.kw, s.sw, s.pw, s.ceil),
            d.c,
        );
        self.push(name, Op::Pool(s), vec![x], out)
    }

    /// Square max pooling, `k x k`, stride `s`, padding `p`, floor mode.
    pub fn max_pool(&mut self, name: &str, x: TensorId, k: usize, s: usize, p: usize) -> TensorId {
        self.pool(name, x, square_pool(PoolKind::Max, k, s, p, false))
    }

    /// Square max pooling in ceil mode (Caffe's rounding).
    pub fn max_pool_ceil(
        &mut self,
        name: &str,
        x: TensorId,
        k: usize,
        s: usize,
        p: usize,
    ) -> TensorId {
        self.pool(name, x, square_pool(PoolKind::Max, k, s, p, true))
    }

    /// Square average pooling, padding counted (PyTorch's default).
    pub fn avg_pool(&mut self, name: &str, x: TensorId, k: usize, s: usize, p: usize) -> TensorId {
        let kind = PoolKind::Avg { count_pad: true };
        self.pool(name, x, square_pool(kind, k, s, p, false))
    }

    /// Average over the whole image (`h x w` to `1 x 1`).
    pub fn global_avg_pool(&mut self, name: &str, x: TensorId) -> TensorId {
        let d = self.dims(x);
        let s = PoolSpec {
            kind: PoolKind::Avg { count_pad: true },
            kh: d.h,
            kw: d.w,
            sh: 1,
            sw: 1,
            ph: 0,
            pw: 0,
            ceil: false,
        };
        self.pool(name, x, s)
    }

    pub fn lrn(&mut self, name: &str, x: TensorId, s: LrnSpec) -> TensorId {
        let d = self.dims(x);
        self.push(name, Op::Lrn(s), vec![x], d)
    }

    /// Fully connected; flattens its input first when that is not `1 x 1`.
    pub fn linear(&mut self, name: &str, x: TensorId, out: usize) -> TensorId {
        let x = if self.dims(x).h * self.dims(x).w != 1 {
            self.flatten(&format!("{name}.flatten"), x)
        } else {
            x
        };
        self.push(
            name,
            Op::Linear(LinearSpec { out }),
            vec![x],
            Dims::new(1, 1, out),
        )
    }

    pub fn dropout(&mut self, name: &str, x: TensorId, p: f32) -> TensorId {
        let d = self.dims(x);
        self.push(name, Op::Dropout(DropoutSpec { p }), vec![x], d)
    }

    pub fn concat(&mut self, name: &str, xs: &[TensorId]) -> TensorId {
        let d0 = self.dims(xs[0]);
        let mut c = 0;
        for &x in xs {
            let d = self.dims(x);
            assert!(d.h == d0.h && d.w == d0.w, "{name}: concat of {d} and {d0}");
            c += d.c;
        }
        self.push(name, Op::Concat, xs.to_vec(), Dims::new(d0.h, d0.w, c))
    }

    pub fn add(&mut self, name: &str, a: TensorId, b: TensorId) -> TensorId {
        let (da, db) = (self.dims(a), self.dims(b));
        assert_eq!(da, db, "{name}: adding {da} and {db}");
        self.push(name, Op::Add, vec![a, b], da)
    }

    pub fn flatten(&mut self, name: &str, x: TensorId) -> TensorId {
        let d = self.dims(x);
        self.push(name, Op::Flatten, vec![x], Dims::new(1, 1, d.len()))
    }

    /// Appends the softmax cross-entropy loss over `logits` and returns the
    /// finished graph.
    pub fn finish(mut self, logits: TensorId) -> Graph {
        assert_eq!(
            self.dims(logits).h * self.dims(logits).w,
            1,
            "logits must be 1x1xC"
        );
        self.push("loss", Op::SoftmaxXent, vec![logits], Dims::new(1, 1, 1));
        // Every layer's output reaches the loss: a dead end would have no
        // gradient for its backward to read.
        let consumers = self.graph.consumers();
        let last = self.graph.nodes.len() - 1;
        if let Some(i) = (0..last).find(|&i| consumers[i].is_empty()) {
            panic!(
                "{}: nothing reads layer {}'s output",
                self.graph.name, self.graph.nodes[i].name
            );
        }
        self.graph
    }
}

fn square_pool(kind: PoolKind, k: usize, s: usize, p: usize, ceil: bool) -> PoolSpec {
    PoolSpec {
        kind,
        kh: k,
        kw: k,
        sh: s,
        sw: s,
        ph: p,
        pw: p,
        ceil,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooling_rounds_like_pytorch() {
        // GoogLeNet's ceil-mode pools: 112 -> 56, 56 -> 28, 14 -> 7.
        assert_eq!(out_size(112, 3, 2, 0, true), 56);
        assert_eq!(out_size(14, 3, 2, 0, true), 7);
        assert_eq!(out_size(112, 3, 2, 0, false), 55);
        // The last window may not start in the right padding.
        assert_eq!(out_size(5, 2, 2, 1, true), 3);
        assert_eq!(out_size(4, 2, 2, 1, true), 3);
        // AlexNet: 227 -> 55 -> 27.
        assert_eq!(out_size(227, 11, 4, 0, false), 55);
        assert_eq!(out_size(55, 3, 2, 0, true), 27);
    }

    #[test]
    fn small_graph_counts_params_and_macs() {
        let (mut b, x) = Builder::new("tiny", Dims::new(8, 8, 3));
        let c = b.conv("c", x, ConvSpec::square(4, 3, 1, 1).with_bias());
        let n = b.bn("bn", c);
        let r = b.relu("r", n);
        let p = b.global_avg_pool("gap", r);
        let f = b.linear("fc", p, 10);
        let g = b.finish(f);
        // conv 3·3·3·4 + 4, bn 2·4, fc 4·10 + 10.
        assert_eq!(g.params(), 112 + 8 + 50);
        assert_eq!(g.node_macs(1), 8 * 8 * 4 * 27);
        assert_eq!(g.classes(), 10);
        assert_eq!(g.nodes.last().unwrap().op.kind(), "softmax-xent");
    }

    #[test]
    #[should_panic(expected = "nothing reads layer dead")]
    fn a_dead_end_is_refused() {
        let (mut b, x) = Builder::new("t", Dims::new(4, 4, 3));
        b.relu("dead", x);
        let p = b.global_avg_pool("pool", x);
        let f = b.linear("fc", p, 2);
        b.finish(f);
    }
}
