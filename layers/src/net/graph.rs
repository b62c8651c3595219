//! A network as a list of layers in execution order, each reading earlier
//! layers' outputs. Shapes are per image (NHWC: `h x w x c`); the batch is
//! chosen when the network is planned on a backend, so one `Graph` serves
//! every batch size, and describing it allocates nothing.

pub use crate::core::shape::Dims;
use crate::ops::add::AddSpec;
pub use crate::ops::batchnorm::BatchNormSpec;
use crate::ops::concat::ConcatSpec;
pub use crate::ops::conv::ConvSpec;
pub use crate::ops::dropout::DropoutSpec;
pub use crate::ops::embedding::EmbeddingSpec;
use crate::ops::flatten::FlattenSpec;
use crate::ops::input::InputSpec;
pub use crate::ops::linear::LinearSpec;
use crate::ops::loss::SoftmaxXentSpec;
pub use crate::ops::lrn::LrnSpec;
pub use crate::ops::pool::{PoolKind, PoolSpec};
pub use crate::ops::recurrent::{Cell, RecurrentSpec};
use crate::ops::relu::ReluSpec;
use crate::ops::sigmoid_bce::SigmoidBceSpec;
use crate::ops::spec::NodeCx;
pub use crate::ops::Op;
use cnnbench_kernels::conv::ConvShape;
use cnnbench_kernels::pool::PoolShape;

/// The index of the layer that produces a tensor (0 is the input image).
pub type TensorId = usize;

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

    /// How many values a label takes: the classes, or 2 for a binary
    /// classifier's one logit (sigmoid with binary cross-entropy).
    pub fn label_classes(&self) -> usize {
        let loss = self.nodes.last().expect("a graph has its input node");
        loss.op
            .spec()
            .label_classes()
            .unwrap_or_else(|| self.classes())
    }

    /// The vocabulary, when the input is a sequence of token ids read by
    /// an embedding (ids are held as f32 on every backend and in every
    /// precision, so that they stay whole numbers).
    pub fn input_vocab(&self) -> Option<usize> {
        self.nodes
            .iter()
            .filter(|n| n.inputs == [0])
            .find_map(|n| n.op.spec().id_vocab())
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

    /// Element counts of node `i`'s parameters, in the order its layers
    /// hold them: weight, then bias (batch norm: weight (gamma), then bias
    /// (beta)). They sum to [`Graph::node_params`]; the gradient buckets
    /// ([`super::buckets`]) are cut along them.
    pub fn node_param_sizes(&self, i: usize) -> Vec<usize> {
        self.nodes[i].op.spec().param_sizes(&self.input_dims(i))
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
            .filter(|&t| self.nodes[t].op.spec().aliases_input())
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

    /// Whether a layer is recurrent (what `--rnn-algo` changes).
    pub fn has_recurrent(&self) -> bool {
        self.nodes.iter().any(|n| matches!(n.op, Op::Recurrent(_)))
    }

    /// Whether a layer runs in the NHWC layout only (recurrent layers: a
    /// sequence's features innermost, as cuDNN's RNN API reads them).
    pub fn nhwc_only(&self) -> bool {
        self.nodes.iter().any(|n| n.op.spec().nhwc_only())
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
                op: Op::Input(InputSpec),
                inputs: vec![],
                out: input,
            }],
        };
        (Builder { graph }, 0)
    }

    pub fn dims(&self, t: TensorId) -> Dims {
        self.graph.nodes[t].out
    }

    /// Appends node `name` doing `op` on `inputs`; returns its output. The
    /// op's spec gives the output's dims, or says why the inputs do not fit
    /// (a programming error in the model: this panics, naming the layer).
    pub fn op(&mut self, name: &str, op: Op, inputs: &[TensorId]) -> TensorId {
        assert!(
            !self.graph.nodes.iter().any(|n| n.name == name),
            "{}: duplicate layer name {name}",
            self.graph.name
        );
        let dims: Vec<Dims> = inputs.iter().map(|&t| self.dims(t)).collect();
        let out = op
            .spec()
            .out(&dims)
            .unwrap_or_else(|e| panic!("{}: layer {name} ({}) {e}", self.graph.name, op.kind()));
        self.graph.nodes.push(Node {
            name: name.to_string(),
            op,
            inputs: inputs.to_vec(),
            out,
        });
        self.graph.nodes.len() - 1
    }

    pub fn conv(&mut self, name: &str, x: TensorId, s: ConvSpec) -> TensorId {
        self.op(name, Op::Conv(s), &[x])
    }

    /// Batch normalisation with PyTorch's defaults (eps 1e-5, momentum 0.1).
    pub fn bn(&mut self, name: &str, x: TensorId) -> TensorId {
        self.bn_eps(name, x, 1e-5)
    }

    pub fn bn_eps(&mut self, name: &str, x: TensorId, eps: f32) -> TensorId {
        let spec = BatchNormSpec { eps, momentum: 0.1 };
        self.op(name, Op::BatchNorm(spec), &[x])
    }

    pub fn relu(&mut self, name: &str, x: TensorId) -> TensorId {
        self.op(name, Op::Relu(ReluSpec), &[x])
    }

    pub fn pool(&mut self, name: &str, x: TensorId, s: PoolSpec) -> TensorId {
        self.op(name, Op::Pool(s), &[x])
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
        self.op(name, Op::Lrn(s), &[x])
    }

    /// Fully connected; flattens its input first when that is not `1 x 1`.
    pub fn linear(&mut self, name: &str, x: TensorId, out: usize) -> TensorId {
        let x = if self.dims(x).h * self.dims(x).w != 1 {
            self.flatten(&format!("{name}.flatten"), x)
        } else {
            x
        };
        self.op(name, Op::Linear(LinearSpec { out }), &[x])
    }

    pub fn dropout(&mut self, name: &str, x: TensorId, p: f32) -> TensorId {
        self.op(name, Op::Dropout(DropoutSpec { p }), &[x])
    }

    pub fn concat(&mut self, name: &str, xs: &[TensorId]) -> TensorId {
        self.op(name, Op::Concat(ConcatSpec), xs)
    }

    pub fn add(&mut self, name: &str, a: TensorId, b: TensorId) -> TensorId {
        self.op(name, Op::Add(AddSpec), &[a, b])
    }

    pub fn flatten(&mut self, name: &str, x: TensorId) -> TensorId {
        self.op(name, Op::Flatten(FlattenSpec), &[x])
    }

    /// A `vocab x dim` embedding of the token ids in `x` (`1 x t x 1`).
    pub fn embedding(&mut self, name: &str, x: TensorId, vocab: usize, dim: usize) -> TensorId {
        self.op(name, Op::Embedding(EmbeddingSpec { vocab, dim }), &[x])
    }

    /// A recurrent layer over the sequence `x` (`1 x t x c`).
    pub fn recurrent(&mut self, name: &str, x: TensorId, s: RecurrentSpec) -> TensorId {
        self.op(name, Op::Recurrent(s), &[x])
    }

    /// Appends the softmax cross-entropy loss over `logits` (`1 x 1 x C`)
    /// and returns the finished graph.
    pub fn finish(self, logits: TensorId) -> Graph {
        self.finish_with(Op::SoftmaxXent(SoftmaxXentSpec), logits)
    }

    /// Appends sigmoid with binary cross-entropy over one logit per image
    /// and returns the finished graph.
    pub fn finish_binary(self, logit: TensorId) -> Graph {
        self.finish_with(Op::SigmoidBce(SigmoidBceSpec), logit)
    }

    fn finish_with(mut self, loss: Op, logits: TensorId) -> Graph {
        self.op("loss", loss, &[logits]);
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
    #[should_panic(expected = "t: layer sum (add) adds 3x4x4 and 4x4x4")]
    fn shape_mistakes_name_the_layer() {
        let (mut b, x) = Builder::new("t", Dims::new(4, 4, 3));
        let c = b.conv("c", x, ConvSpec::square(4, 3, 1, 1));
        b.add("sum", x, c);
    }

    #[test]
    fn any_registered_op_is_built_by_op() {
        let (mut b, x) = Builder::new("t", Dims::new(8, 8, 3));
        let c = b.op("c", Op::Conv(ConvSpec::square(4, 3, 2, 1)), &[x]);
        assert_eq!(b.dims(c), Dims::new(4, 4, 4));
        let err = Op::Conv(ConvSpec::square(4, 3, 1, 0).groups(2))
            .spec()
            .out(&[Dims::new(8, 8, 3)])
            .unwrap_err();
        assert!(err.contains("not divisible into 2 groups"), "{err}");
        let err = Op::Pool(square_pool(PoolKind::Max, 5, 1, 0, false))
            .spec()
            .out(&[Dims::new(3, 3, 1)])
            .unwrap_err();
        assert!(err.contains("does not fit 3x3"), "{err}");
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
