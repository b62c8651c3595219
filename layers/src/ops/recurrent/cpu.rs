//! The CPU side, on the kernels crate's recurrent passes
//! (`cnnbench_kernels::rnn`), which `cnnbench rnn` times alone.
//!
//! The network's tensors are batch-major (`[n][t][features]`), the
//! kernels' time-major (`[t][n][features]`): each pass reorders its
//! sequence in and out, a copy beside the GEMMs. The parameters are moved
//! (not copied) into the kernels' weight sets for each pass.
//!
//! A layer runs as two one-direction problems at once, one per thread of
//! the pair: a bidirectional layer's two directions, or a one-direction
//! layer's two halves of the batch (from 32 sequences, with two threads or
//! more). Each step of a small layer is a few microseconds of arithmetic,
//! too little to split, while the two problems never wait for each other.
//! The halves of a batch share the weights (copied into the second before
//! each pass) and add up their weight gradients. The reference (`check`)
//! runs the layer as one problem, so the split and the joining of the
//! halves are checked against it.

use crate::backend::cpu::{zeroed, Cpu, Ctx, Param};
use crate::core::backend::Layer;
use crate::core::error::{Error, Result};
use cnnbench_kernels::rnn::{
    self, reference, Direction, Inputs, OutputGrads, RnnShape, Weights, Workspace,
};
use cnnbench_kernels::Isa;

/// The batch is split in two from this many sequences (each half at least
/// one AVX-512 vector of the per-step GEMMs' columns).
const SPLIT_BATCH: usize = 32;

pub struct RecurrentLayer {
    /// The layer's problem: left to right, or bidirectional-concat.
    shape: RnnShape,
    sequences: bool,
    /// Per direction: `weight_ih`, `weight_hh`, `bias_ih`.
    params: Vec<Param>,
    /// The one-direction problems: per direction, or per half batch.
    halves: Vec<Half>,
    /// The whole sequence, time-major, for the reference.
    x_tm: Vec<f32>,
    /// The initial states and the final cell state's gradient: zero.
    zeros: Vec<f32>,
}

/// One direction's problem over sequences `n0..n0 + shape.mb`, with
/// everything its passes use, allocated once.
struct Half {
    shape: RnnShape,
    /// Its direction among the layer's (0 or 1) and its first sequence.
    d: usize,
    n0: usize,
    /// Whether the parameters are moved into this half's sets (the first
    /// half of each direction); the other half copies the weights in.
    owner: bool,
    x_tm: Vec<f32>,
    ws: Workspace,
    /// The kernels' weight set (one); `b_hh` stays zero.
    set: Vec<Weights>,
    /// Its gradient; `b_hh`'s is scratch.
    dset: Vec<Weights>,
    y_tm: Vec<f32>,
    hy: Vec<f32>,
    cy: Vec<f32>,
    dy_tm: Vec<f32>,
    dhy: Vec<f32>,
    dx_tm: Vec<f32>,
    dhx: Vec<f32>,
    dcx: Vec<f32>,
}

/// `[a][b][f]` to `[b][a][f]`.
fn swap_axes(src: &[f32], a: usize, b: usize, f: usize, dst: &mut [f32]) {
    for i in 0..a {
        for j in 0..b {
            dst[(j * a + i) * f..][..f].copy_from_slice(&src[(i * b + j) * f..][..f]);
        }
    }
}

/// A weight set: an owner's three parameters are moved in for each pass
/// (empty until then); a copying half holds its own.
fn weight_set(shape: &RnnShape, owner: bool) -> Vec<Weights> {
    let mut w = Weights::zeros(shape, 0);
    if owner {
        w.w_ih = Vec::new();
        w.w_hh = Vec::new();
        w.b_ih = Vec::new();
    }
    vec![w]
}

impl Half {
    fn new(shape: RnnShape, d: usize, n0: usize, input_grad: bool) -> Result<Half> {
        let bytes = Workspace::bytes_for(&shape).unwrap_or(usize::MAX);
        let state = shape.state_len();
        let owner = n0 == 0;
        Ok(Half {
            d,
            n0,
            owner,
            x_tm: zeroed(shape.x_len())?,
            ws: Workspace::try_new(&shape).ok_or_else(|| Error::host_oom(bytes))?,
            set: weight_set(&shape, owner),
            dset: weight_set(&shape, owner),
            y_tm: zeroed(shape.y_len())?,
            hy: zeroed(state)?,
            cy: zeroed(state)?,
            dy_tm: zeroed(shape.y_len())?,
            dhy: zeroed(state)?,
            dx_tm: zeroed(if input_grad { shape.x_len() } else { 0 })?,
            dhx: zeroed(state)?,
            dcx: zeroed(state)?,
            shape,
        })
    }

    fn forward(&mut self, isa: Isa, zeros: &[f32]) {
        let state = self.shape.state_len();
        let inp = Inputs {
            x: &self.x_tm,
            hx: &zeros[..state],
            cx: &zeros[..state],
            weights: &self.set,
        };
        rnn::forward(
            isa,
            &self.shape,
            &inp,
            &mut self.ws,
            &mut self.y_tm,
            &mut self.hy,
            &mut self.cy,
        );
    }

    /// After [`Half::forward`]; `dx_tm` is computed when it is not empty.
    fn backward(&mut self, isa: Isa, zeros: &[f32]) {
        let state = self.shape.state_len();
        let inp = Inputs {
            x: &self.x_tm,
            hx: &zeros[..state],
            cx: &zeros[..state],
            weights: &self.set,
        };
        let grads = OutputGrads {
            dy: &self.dy_tm,
            dhy: &self.dhy,
            dcy: &zeros[..state],
        };
        rnn::backward_data(
            isa,
            &self.shape,
            &inp,
            &grads,
            &mut self.ws,
            &mut self.dx_tm,
            &mut self.dhx,
            &mut self.dcx,
        );
        rnn::backward_weights(isa, &self.shape, &inp, &mut self.ws, &mut self.dset);
    }

    fn bytes(&self) -> usize {
        let mut floats = [
            &self.x_tm,
            &self.y_tm,
            &self.hy,
            &self.cy,
            &self.dy_tm,
            &self.dhy,
            &self.dx_tm,
            &self.dhx,
            &self.dcx,
        ]
        .iter()
        .map(|b| b.len())
        .sum::<usize>();
        if !self.owner {
            let set = |w: &Weights| w.tensors().iter().map(|t| t.len()).sum::<usize>();
            floats += set(&self.set[0]) + set(&self.dset[0]);
        }
        self.ws.bytes() + 4 * floats
    }
}

impl RecurrentLayer {
    /// `shape`: the layer's problem (left to right or
    /// bidirectional-concat, one layer); `params`: per direction
    /// `weight_ih`, `weight_hh`, `bias_ih` (the spec's order and sizes).
    pub fn new(
        shape: RnnShape,
        sequences: bool,
        params: Vec<Vec<f32>>,
        input_grad: bool,
    ) -> Result<RecurrentLayer> {
        // (direction, its index, first sequence, sequences)
        let parts: Vec<(Direction, usize, usize, usize)> = match shape.direction {
            Direction::Concat => vec![
                (Direction::Left2Right, 0, 0, shape.mb),
                (Direction::Right2Left, 1, 0, shape.mb),
            ],
            d if shape.mb >= SPLIT_BATCH && rayon::current_num_threads() > 1 => {
                let half = shape.mb / 2;
                vec![(d, 0, 0, half), (d, 0, half, shape.mb - half)]
            }
            d => vec![(d, 0, 0, shape.mb)],
        };
        let halves = parts
            .into_iter()
            .map(|(direction, d, n0, mb)| {
                let part = RnnShape {
                    direction,
                    mb,
                    ..shape
                };
                Half::new(part, d, n0, input_grad)
            })
            .collect::<Result<Vec<_>>>()?;
        let one = RnnShape {
            direction: Direction::Left2Right,
            ..shape
        };
        Ok(RecurrentLayer {
            sequences,
            params: params.into_iter().map(Param::new).collect(),
            halves,
            x_tm: zeroed(shape.x_len())?,
            zeros: zeroed(one.state_len())?,
            shape,
        })
    }

    fn directions(&self) -> usize {
        self.shape.direction.count()
    }

    /// Moves the parameters into the owning halves' weight sets and their
    /// gradients into the gradient sets, or back again.
    fn swap_params(&mut self) {
        for half in self.halves.iter_mut().filter(|h| h.owner) {
            let p = &mut self.params[3 * half.d..][..3];
            let (w, g) = (&mut half.set[0], &mut half.dset[0]);
            std::mem::swap(&mut p[0].value, &mut w.w_ih);
            std::mem::swap(&mut p[1].value, &mut w.w_hh);
            std::mem::swap(&mut p[2].value, &mut w.b_ih);
            std::mem::swap(&mut p[0].grad, &mut g.w_ih);
            std::mem::swap(&mut p[1].grad, &mut g.w_hh);
            std::mem::swap(&mut p[2].grad, &mut g.b_ih);
        }
    }

    /// The weights into the halves that copy them (after `swap_params`).
    fn copy_weights(&mut self) {
        let (owners, copies): (Vec<&mut Half>, Vec<&mut Half>) =
            self.halves.iter_mut().partition(|h| h.owner);
        for c in copies {
            let from = &owners[c.d].set[0];
            c.set[0].w_ih.copy_from_slice(&from.w_ih);
            c.set[0].w_hh.copy_from_slice(&from.w_hh);
            c.set[0].b_ih.copy_from_slice(&from.b_ih);
        }
    }

    /// The copying halves' weight gradients added into their owners'.
    fn sum_weight_grads(&mut self) {
        let (mut owners, copies): (Vec<&mut Half>, Vec<&mut Half>) =
            self.halves.iter_mut().partition(|h| h.owner);
        for c in copies {
            let to = &mut owners[c.d].dset[0];
            let from = &c.dset[0];
            for (t, f) in [
                (&mut to.w_ih, &from.w_ih),
                (&mut to.w_hh, &from.w_hh),
                (&mut to.b_ih, &from.b_ih),
            ] {
                for (a, &b) in t.iter_mut().zip(f) {
                    *a += b;
                }
            }
        }
    }

    /// Runs `f` on every half, two at once.
    fn on_halves(&mut self, f: impl Fn(&mut Half, &[f32]) + Sync) {
        let z = &self.zeros[..];
        match &mut self.halves[..] {
            [a, b] => {
                rayon::join(|| f(a, z), || f(b, z));
            }
            halves => halves.iter_mut().for_each(|h| f(h, z)),
        }
    }

    /// The layer's output from the halves': every step, batch-major, each
    /// direction's features side by side; or each direction's final state.
    fn write_output(&self, out: &mut [f32]) {
        let (s, dirs) = (&self.shape, self.directions());
        let h = s.hidden;
        for half in &self.halves {
            let (d, mb) = (half.d, half.shape.mb);
            for i in 0..mb {
                let n = half.n0 + i;
                if self.sequences {
                    for k in 0..s.t {
                        out[((n * s.t + k) * dirs + d) * h..][..h]
                            .copy_from_slice(&half.y_tm[(k * mb + i) * h..][..h]);
                    }
                } else {
                    out[(n * dirs + d) * h..][..h].copy_from_slice(&half.hy[i * h..][..h]);
                }
            }
        }
    }

    /// The output gradient as the halves take it: `dy_tm` for every step,
    /// or `dhy` for the final states (the other stays zero).
    fn read_output_grad(&mut self, dy: &[f32]) {
        let (s, dirs) = (self.shape, self.directions());
        let h = s.hidden;
        for half in &mut self.halves {
            let (d, mb) = (half.d, half.shape.mb);
            for i in 0..mb {
                let n = half.n0 + i;
                if self.sequences {
                    for k in 0..s.t {
                        half.dy_tm[(k * mb + i) * h..][..h]
                            .copy_from_slice(&dy[((n * s.t + k) * dirs + d) * h..][..h]);
                    }
                } else {
                    half.dhy[i * h..][..h].copy_from_slice(&dy[(n * dirs + d) * h..][..h]);
                }
            }
        }
    }

    /// The sequence's gradient, batch-major: each half's rows, the two
    /// directions' added.
    fn write_input_grad(&self, dx: &mut [f32]) {
        let s = &self.shape;
        let c = s.input;
        dx.fill(0.0);
        for half in &self.halves {
            let mb = half.shape.mb;
            for i in 0..mb {
                let n = half.n0 + i;
                for k in 0..s.t {
                    let src = &half.dx_tm[(k * mb + i) * c..][..c];
                    for (d, &v) in dx[(n * s.t + k) * c..][..c].iter_mut().zip(src) {
                        *d += v;
                    }
                }
            }
        }
    }

    /// The whole layer on the f64 reference as one problem (`check`): its
    /// output, or with `dy` its gradients (into the parameters' gradients
    /// and `dx`). The parameters are in the owning halves' sets.
    fn reference(&mut self, dy: Option<&[f32]>, out: Option<&mut [f32]>, dx: Option<&mut [f32]>) {
        let s = self.shape;
        let (h, dirs, state) = (s.hidden, self.directions(), s.state_len());
        let weights: Vec<Weights> = (0..dirs)
            .map(|d| {
                let owner = self.halves.iter().find(|x| x.owner && x.d == d);
                owner
                    .map(|x| x.set[0].clone())
                    .unwrap_or_else(|| Weights::zeros(&s, d))
            })
            .collect();
        let (mut dy_tm, mut dhy) = (vec![0.0; s.y_len()], vec![0.0; state]);
        if let Some(dy) = dy {
            if self.sequences {
                swap_axes(dy, s.mb, s.t, s.output(), &mut dy_tm);
            } else {
                for n in 0..s.mb {
                    for d in 0..dirs {
                        dhy[(d * s.mb + n) * h..][..h]
                            .copy_from_slice(&dy[(n * dirs + d) * h..][..h]);
                    }
                }
            }
        }
        let zeros = vec![0.0; state];
        let r = reference::run(
            &s, &self.x_tm, &zeros, &zeros, &weights, &dy_tm, &dhy, &zeros,
        );
        if let Some(out) = out {
            if self.sequences {
                swap_axes(&r.y, s.t, s.mb, s.output(), out);
            } else {
                for n in 0..s.mb {
                    for d in 0..dirs {
                        out[(n * dirs + d) * h..][..h]
                            .copy_from_slice(&r.hy[(d * s.mb + n) * h..][..h]);
                    }
                }
            }
            return;
        }
        for half in self.halves.iter_mut().filter(|x| x.owner) {
            let (g, want) = (&mut half.dset[0], &r.dw[half.d]);
            g.w_ih.copy_from_slice(&want.w_ih);
            g.w_hh.copy_from_slice(&want.w_hh);
            g.b_ih.copy_from_slice(&want.b_ih);
        }
        if let Some(dx) = dx {
            swap_axes(&r.dx, s.t, s.mb, s.input, dx);
        }
    }
}

impl Layer<Cpu> for RecurrentLayer {
    fn forward(&mut self, ctx: &mut Ctx, inputs: &[&[f32]], out: &mut [f32]) -> Result<()> {
        let s = self.shape;
        self.swap_params();
        if ctx.reference {
            swap_axes(inputs[0], s.mb, s.t, s.input, &mut self.x_tm);
            self.reference(None, Some(out), None);
            self.swap_params();
            return Ok(());
        }
        let row = s.t * s.input;
        for half in &mut self.halves {
            let mine = &inputs[0][half.n0 * row..][..half.shape.mb * row];
            swap_axes(mine, half.shape.mb, s.t, s.input, &mut half.x_tm);
        }
        self.copy_weights();
        let isa = ctx.isa;
        self.on_halves(|half, z| half.forward(isa, z));
        self.swap_params();
        self.write_output(out);
        Ok(())
    }

    /// Back through time for the sequence's gradient (when its producer
    /// needs one) and the weights', after this layer's forward pass.
    fn backward(
        &mut self,
        ctx: &mut Ctx,
        _inputs: &[&[f32]],
        _out: &[f32],
        dys: &[&[f32]],
        dxs: &mut [Option<&mut [f32]>],
    ) -> Result<()> {
        let dx = dxs.first_mut().and_then(|d| d.as_deref_mut());
        self.swap_params();
        if ctx.reference {
            self.reference(Some(dys[0]), None, dx);
        } else {
            self.read_output_grad(dys[0]);
            self.copy_weights();
            let isa = ctx.isa;
            self.on_halves(|half, z| half.backward(isa, z));
            self.sum_weight_grads();
            if let Some(dx) = dx {
                self.write_input_grad(dx);
            }
        }
        self.swap_params();
        Ok(())
    }

    fn params(&mut self) -> Vec<&mut Param> {
        self.params.iter_mut().collect()
    }

    fn params_ref(&self) -> Vec<&Param> {
        self.params.iter().collect()
    }

    fn scratch_bytes(&self) -> usize {
        let own = self.x_tm.len() + self.zeros.len();
        4 * own + self.halves.iter().map(Half::bytes).sum::<usize>()
    }

    fn kernels(&self) -> String {
        let input = if rnn::input_product_per_step(&self.shape, 0) {
            "per-step input and recurrent GEMMs"
        } else {
            "input GEMM for all steps, per-step recurrent GEMM"
        };
        let split = match (self.halves.len(), self.directions()) {
            (2, 2) => "; the two directions at once",
            (2, _) => "; two halves of the batch at once",
            _ => "",
        };
        format!("{input} + fused gates{split}")
    }
}
