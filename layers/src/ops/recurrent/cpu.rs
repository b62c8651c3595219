//! The CPU side, on the kernels crate's recurrent passes
//! (`cnnbench_kernels::rnn`), which `cnnbench rnn` times alone.
//!
//! The network's tensors are batch-major (`[n][t][features]`), the
//! kernels' time-major (`[t][n][features]`): each pass reorders its
//! sequence in and out, a copy beside the GEMMs. The parameters are moved
//! (not copied) into the kernels' weight sets for each pass.
//!
//! A bidirectional layer runs as two one-direction problems (left to
//! right, right to left) at once, one per thread of the pair: each step of
//! a small layer is a few microseconds of arithmetic, too little to split,
//! while the two directions never wait for each other. The reference
//! (`check`) runs the layer as one bidirectional problem, so the split
//! and the joining of the halves are checked against it.

use crate::backend::cpu::{zeroed, Cpu, Ctx, Param};
use crate::core::backend::Layer;
use crate::core::error::{Error, Result};
use cnnbench_kernels::rnn::{
    self, reference, Direction, Inputs, OutputGrads, RnnShape, Weights, Workspace,
};
use cnnbench_kernels::Isa;

pub struct RecurrentLayer {
    /// The layer's problem: left to right, or bidirectional-concat.
    shape: RnnShape,
    sequences: bool,
    input_grad: bool,
    /// Per direction: `weight_ih`, `weight_hh`, `bias_ih`.
    params: Vec<Param>,
    /// One one-direction problem per direction.
    halves: Vec<Half>,
    /// The sequence, time-major, and its gradient summed over directions.
    x_tm: Vec<f32>,
    dx_tm: Vec<f32>,
    /// The initial states and the final cell state's gradient: zero.
    zeros: Vec<f32>,
}

/// One direction's problem with everything its passes use, allocated once.
struct Half {
    shape: RnnShape,
    ws: Workspace,
    /// The kernels' weight set (one): each pass moves the parameters in
    /// and out again; `b_hh` stays zero.
    set: Vec<Weights>,
    /// Its gradient, moved likewise; `b_hh`'s is scratch.
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

/// A weight set whose three parameters are filled during each pass.
fn empty_set(shape: &RnnShape) -> Vec<Weights> {
    let mut w = Weights::zeros(shape, 0);
    w.w_ih = Vec::new();
    w.w_hh = Vec::new();
    w.b_ih = Vec::new();
    vec![w]
}

impl Half {
    fn new(shape: RnnShape, input_grad: bool) -> Result<Half> {
        let bytes = Workspace::bytes_for(&shape).unwrap_or(usize::MAX);
        let state = shape.state_len();
        Ok(Half {
            ws: Workspace::try_new(&shape).ok_or_else(|| Error::host_oom(bytes))?,
            set: empty_set(&shape),
            dset: empty_set(&shape),
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

    fn forward(&mut self, isa: Isa, x_tm: &[f32], zeros: &[f32]) {
        let state = self.shape.state_len();
        let inp = Inputs {
            x: x_tm,
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
    fn backward(&mut self, isa: Isa, x_tm: &[f32], zeros: &[f32]) {
        let state = self.shape.state_len();
        let inp = Inputs {
            x: x_tm,
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
        let bufs = [
            &self.y_tm,
            &self.hy,
            &self.cy,
            &self.dy_tm,
            &self.dhy,
            &self.dx_tm,
            &self.dhx,
            &self.dcx,
        ];
        self.ws.bytes() + 4 * bufs.iter().map(|b| b.len()).sum::<usize>()
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
        let directions: &[Direction] = match shape.direction {
            Direction::Concat => &[Direction::Left2Right, Direction::Right2Left],
            _ => &[shape.direction],
        };
        let halves = directions
            .iter()
            .map(|&direction| Half::new(RnnShape { direction, ..shape }, input_grad))
            .collect::<Result<Vec<_>>>()?;
        let one = RnnShape {
            direction: Direction::Left2Right,
            ..shape
        };
        Ok(RecurrentLayer {
            sequences,
            input_grad,
            params: params.into_iter().map(Param::new).collect(),
            halves,
            x_tm: zeroed(shape.x_len())?,
            dx_tm: zeroed(if input_grad { shape.x_len() } else { 0 })?,
            zeros: zeroed(one.state_len())?,
            shape,
        })
    }

    /// Moves the parameters into the halves' weight sets and their
    /// gradients into the gradient sets, or back again.
    fn swap_params(&mut self) {
        for (p, half) in self.params.chunks_mut(3).zip(&mut self.halves) {
            let (w, g) = (&mut half.set[0], &mut half.dset[0]);
            std::mem::swap(&mut p[0].value, &mut w.w_ih);
            std::mem::swap(&mut p[1].value, &mut w.w_hh);
            std::mem::swap(&mut p[2].value, &mut w.b_ih);
            std::mem::swap(&mut p[0].grad, &mut g.w_ih);
            std::mem::swap(&mut p[1].grad, &mut g.w_hh);
            std::mem::swap(&mut p[2].grad, &mut g.b_ih);
        }
    }

    /// Runs `f` on every half, the two of a bidirectional layer at once.
    fn on_halves(&mut self, f: impl Fn(&mut Half, &[f32], &[f32]) + Sync) {
        let (x, z) = (&self.x_tm[..], &self.zeros[..]);
        match &mut self.halves[..] {
            [a, b] => {
                rayon::join(|| f(a, x, z), || f(b, x, z));
            }
            halves => halves.iter_mut().for_each(|h| f(h, x, z)),
        }
    }

    /// The layer's output from the halves': every step, batch-major, each
    /// direction's features side by side; or each direction's final state.
    fn write_output(&self, out: &mut [f32]) {
        let s = &self.shape;
        let (h, dirs) = (s.hidden, self.halves.len());
        for (d, half) in self.halves.iter().enumerate() {
            if self.sequences {
                for k in 0..s.t {
                    for n in 0..s.mb {
                        out[((n * s.t + k) * dirs + d) * h..][..h]
                            .copy_from_slice(&half.y_tm[(k * s.mb + n) * h..][..h]);
                    }
                }
            } else {
                for n in 0..s.mb {
                    out[(n * dirs + d) * h..][..h].copy_from_slice(&half.hy[n * h..][..h]);
                }
            }
        }
    }

    /// The output gradient as the halves take it: `dy_tm` for every step,
    /// or `dhy` for the final states (the other stays zero).
    fn read_output_grad(&mut self, dy: &[f32]) {
        let s = self.shape;
        let (h, dirs) = (s.hidden, self.halves.len());
        for (d, half) in self.halves.iter_mut().enumerate() {
            if self.sequences {
                for k in 0..s.t {
                    for n in 0..s.mb {
                        half.dy_tm[(k * s.mb + n) * h..][..h]
                            .copy_from_slice(&dy[((n * s.t + k) * dirs + d) * h..][..h]);
                    }
                }
            } else {
                for n in 0..s.mb {
                    half.dhy[n * h..][..h].copy_from_slice(&dy[(n * dirs + d) * h..][..h]);
                }
            }
        }
    }

    /// The whole layer on the f64 reference as one problem (`check`): its
    /// output, or with `dy` its gradients (into the parameters' gradients
    /// and `dx_tm`). The parameters are in the halves' sets.
    fn reference(&mut self, dy: Option<&[f32]>, out: Option<&mut [f32]>) {
        let s = self.shape;
        let (h, dirs, state) = (s.hidden, self.halves.len(), s.state_len());
        let weights: Vec<Weights> = self.halves.iter().map(|half| half.set[0].clone()).collect();
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
        for (half, want) in self.halves.iter_mut().zip(&r.dw) {
            let g = &mut half.dset[0];
            g.w_ih.copy_from_slice(&want.w_ih);
            g.w_hh.copy_from_slice(&want.w_hh);
            g.b_ih.copy_from_slice(&want.b_ih);
        }
        if self.input_grad {
            self.dx_tm.copy_from_slice(&r.dx);
        }
    }
}

impl Layer<Cpu> for RecurrentLayer {
    fn forward(&mut self, ctx: &mut Ctx, inputs: &[&[f32]], out: &mut [f32]) -> Result<()> {
        let s = self.shape;
        swap_axes(inputs[0], s.mb, s.t, s.input, &mut self.x_tm);
        self.swap_params();
        if ctx.reference {
            self.reference(None, Some(out));
            self.swap_params();
            return Ok(());
        }
        let isa = ctx.isa;
        self.on_halves(|half, x, z| half.forward(isa, x, z));
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
        let s = self.shape;
        self.swap_params();
        if ctx.reference {
            self.reference(Some(dys[0]), None);
        } else {
            self.read_output_grad(dys[0]);
            let isa = ctx.isa;
            self.on_halves(|half, x, z| half.backward(isa, x, z));
            if self.input_grad {
                // The directions' input gradients add up.
                let (first, rest) = self.halves.split_at(1);
                self.dx_tm.copy_from_slice(&first[0].dx_tm);
                for half in rest {
                    for (d, &v) in self.dx_tm.iter_mut().zip(&half.dx_tm) {
                        *d += v;
                    }
                }
            }
        }
        self.swap_params();
        if let Some(dx) = dxs.first_mut().and_then(|d| d.as_deref_mut()) {
            swap_axes(&self.dx_tm, s.t, s.mb, s.input, dx);
        }
        Ok(())
    }

    fn params(&mut self) -> Vec<&mut Param> {
        self.params.iter_mut().collect()
    }

    fn params_ref(&self) -> Vec<&Param> {
        self.params.iter().collect()
    }

    fn scratch_bytes(&self) -> usize {
        let own = self.x_tm.len() + self.dx_tm.len() + self.zeros.len();
        4 * own + self.halves.iter().map(Half::bytes).sum::<usize>()
    }

    fn kernels(&self) -> String {
        let input = if rnn::input_product_per_step(&self.shape, 0) {
            "per-step input and recurrent GEMMs"
        } else {
            "input GEMM for all steps, per-step recurrent GEMM"
        };
        let both = if self.halves.len() == 2 {
            "; the two directions at once"
        } else {
            ""
        };
        format!("{input} + fused gates{both}")
    }
}
