//! The two interfaces a network runs through: [`Backend`], what the one
//! executor ([`crate::net::Executor`]) asks of a device (buffers, copies,
//! gradient sums, the SGD update, timing events), and [`Layer`], what it
//! asks of each op's layer on that device.
//!
//! The executor owns every tensor and walks the graph; a backend supplies
//! primitives, and an op supplies one layer per backend. Tensors cross the
//! [`Layer`] interface as the backend's views ([`Backend::In`],
//! [`Backend::Out`]): slices of host memory on the CPU, device pointers on
//! CUDA, so that each side keeps the calls natural to it.

use super::error::Result;

/// One tensor's shape as a backend lays it out: the batch, then one
/// image's `h x w x c`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchDims {
    pub n: usize,
    pub h: usize,
    pub w: usize,
    pub c: usize,
}

impl BatchDims {
    pub fn len(&self) -> usize {
        self.n * self.h * self.w * self.c
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Which element type a buffer holds: the run's, or fp32 whatever the run
/// (the loss).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    Run,
    F32,
}

pub trait Backend: Sized {
    /// One tensor of the whole batch, owned by the executor.
    type Buf;
    /// How a layer reads a tensor.
    type In<'a>: Copy
    where
        Self: 'a;
    /// How a layer writes a tensor.
    type Out<'a>
    where
        Self: 'a;
    /// A parameter with its gradient and momentum.
    type Param;
    /// What every layer may consult while it runs.
    type Ctx;
    /// A point on the backend's clock: the host clock on the CPU, a CUDA
    /// event on the benchmark stream.
    type Event;
    /// What summing one tensor's gradients needs, made once (cuDNN's
    /// descriptors).
    type SumPlan;
    /// Where the next batch's images wait, already on their way to the
    /// device, while the current step runs (see [`Backend::stage`]).
    type Stage;

    fn input<'a>(buf: &'a Self::Buf) -> Self::In<'a>
    where
        Self: 'a;
    fn output<'a>(buf: &'a mut Self::Buf) -> Self::Out<'a>
    where
        Self: 'a;

    /// A zeroed buffer of `len` elements.
    fn alloc(&self, len: usize, elem: Elem) -> Result<Self::Buf>;
    fn buf_bytes(buf: &Self::Buf) -> usize;
    /// The buffer's values as NHWC f32 (waits for the device).
    fn download(&self, buf: &Self::Buf, dims: BatchDims, elem: Elem) -> Result<Vec<f32>>;
    /// Sets the buffer from NHWC f32 values.
    fn upload(&self, buf: &mut Self::Buf, host: &[f32], dims: BatchDims, elem: Elem) -> Result<()>;

    /// A stage for batches of `dims` held as `elem`, allocated once.
    fn alloc_stage(&self, dims: BatchDims, elem: Elem) -> Result<Self::Stage>;
    /// The device memory a stage holds (pinned host memory not counted).
    fn stage_bytes(stage: &Self::Stage) -> usize;
    /// Starts moving `host` (NHWC f32, `dims`) towards the device and
    /// returns: on a GPU it is converted on the host into pinned memory
    /// (before returning), then copied on a stream of its own, that copy
    /// overlapping whatever the compute stream runs meanwhile; on the CPU
    /// it is a copy.
    fn stage(&self, stage: &mut Self::Stage, host: &[f32]) -> Result<()>;
    /// Makes the staged batch `buf`'s contents, and returns once it is:
    /// whatever of the copy the step before did not hide is the caller's
    /// to time.
    fn unstage(&self, stage: &mut Self::Stage, buf: &mut Self::Buf) -> Result<()>;

    fn plan_sum(&self, dims: BatchDims) -> Result<Self::SumPlan>;
    /// `dst = Σ parts` (at least two parts).
    fn sum(
        &self,
        cx: &mut Self::Ctx,
        plan: &Self::SumPlan,
        parts: &[Self::In<'_>],
        dst: Self::Out<'_>,
    ) -> Result<()>;

    /// One SGD step with momentum on `p`.
    fn sgd(&self, cx: &mut Self::Ctx, p: &mut Self::Param, lr: f32, momentum: f32) -> Result<()>;
    /// `p`'s gradient as f32 in the CPU layers' order (waits).
    fn param_grad(&self, p: &Self::Param) -> Result<Vec<f32>>;
    fn param_bytes(p: &Self::Param) -> usize;

    /// Sets the seed dropout draws this step's masks from.
    fn set_step_seed(cx: &mut Self::Ctx, seed: u64);
    /// Device bytes the context holds (the convolutions' shared workspace).
    fn ctx_bytes(cx: &Self::Ctx) -> usize;

    fn event(&self) -> Result<Self::Event>;
    fn record(&self, e: &mut Self::Event) -> Result<()>;
    /// Waits until `e` has happened.
    fn wait(&self, e: &Self::Event) -> Result<()>;
    /// Milliseconds from `a` to `b`, both recorded and waited for.
    fn elapsed_ms(&self, a: &Self::Event, b: &Self::Event) -> Result<f64>;
}

/// How much of the ReLU that alone reads a layer's output the layer runs
/// itself, in its own passes over memory (see [`Layer::fuse_relu`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReluFusion {
    None,
    /// The layer writes `max(y, 0)`; the ReLU's backward still runs.
    Forward,
    /// Also the ReLU's backward: the layer's backward receives the ReLU's
    /// output gradient and masks it itself.
    ForwardBackward,
}

/// One layer of a network on backend `B`. Tensors are the whole batch.
pub trait Layer<B: Backend> {
    /// `y = f(x)`.
    fn forward(&mut self, cx: &mut B::Ctx, x: &[B::In<'_>], y: B::Out<'_>) -> Result<()>;

    /// The gradients of the inputs whose `dx[k]` is `Some`, and of the
    /// parameters, from the output gradient. `dy` holds one gradient per
    /// consumer of the output when [`Layer::sums_gradients`] is true, else
    /// exactly one (the executor's sum).
    fn backward(
        &mut self,
        cx: &mut B::Ctx,
        x: &[B::In<'_>],
        y: B::In<'_>,
        dy: &[B::In<'_>],
        dx: &mut [Option<B::Out<'_>>],
    ) -> Result<()>;

    /// Whether `backward` sums several output gradients itself (on the
    /// way, for free) instead of the executor summing them beforehand.
    fn sums_gradients(&self) -> bool {
        false
    }

    /// Chooses algorithms on the network's own tensors before any timed
    /// step (`dy` is `None` for the loss); returns the shared workspace the
    /// choices need.
    fn plan(
        &mut self,
        _cx: &mut B::Ctx,
        _x: &[B::In<'_>],
        _y: B::In<'_>,
        _dy: Option<B::In<'_>>,
        _dx: &mut [Option<B::Out<'_>>],
    ) -> Result<usize> {
        Ok(0)
    }

    /// Parameters in order: weight, then bias.
    fn params(&mut self) -> Vec<&mut B::Param> {
        Vec::new()
    }

    fn params_ref(&self) -> Vec<&B::Param> {
        Vec::new()
    }

    /// Bytes held besides parameters and activations (workspaces, masks,
    /// saved statistics).
    fn scratch_bytes(&self) -> usize {
        0
    }

    /// Takes over the ReLU that alone reads this layer's output, and says
    /// how much of it ([`ReluFusion::None`], the default: nothing). The
    /// executor then writes the ReLU's output through this layer and skips
    /// the ReLU's forward (and its backward for `ForwardBackward`, which it
    /// allows only when `backward` is true).
    fn fuse_relu(&mut self, _backward: bool) -> ReluFusion {
        ReluFusion::None
    }

    /// Takes over the residual add that alone reads this layer's output
    /// and the ReLU that alone reads the add's, forward and backward;
    /// returns whether it does (the default: no). The executor then runs
    /// this layer at the ReLU's place in both passes, with two inputs
    /// (its own and the add's other input `z`) and the ReLU's output as
    /// its output: `y = relu(f(x) + z)`. Its backward reads the ReLU's
    /// output gradient (one tensor) and writes two: `dx[0]` for `x`, and
    /// `dx[1]` the add's output gradient `relu'(y) * dy` (what the add
    /// hands on to `z`).
    fn fuse_add_relu(&mut self) -> bool {
        false
    }

    /// Whether, after fusion, its backward reads its output gradient's
    /// `parts` parts itself (as `dy[0..parts]`) instead of their sum. The
    /// executor asks where a layer that took a ReLU's backward would read
    /// a summed gradient.
    fn takes_gradient_parts(&mut self, _parts: usize) -> bool {
        false
    }

    /// The kernels that ran, for the per-layer table.
    fn kernels(&self) -> String {
        String::new()
    }

    /// A loss layer takes the batch's labels (one class per image) for the
    /// next steps and returns true; every other layer returns false.
    fn set_labels(&mut self, _cx: &mut B::Ctx, _labels: &[u32]) -> Result<bool> {
        Ok(false)
    }
}
