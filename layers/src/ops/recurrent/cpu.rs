//! The CPU side, on the kernels crate's recurrent passes
//! (`cnnbench_kernels::rnn`), which `cnnbench rnn` times alone.
//!
//! The network's tensors are batch-major (`[n][t][features]`), the
//! kernels' time-major (`[t][n][features]`): each pass reorders its
//! sequence in and out, a copy beside the GEMMs. The parameters are moved
//! (not copied) into the kernels' weight sets for each pass.

use crate::backend::cpu::{zeroed, Cpu, Ctx, Param};
use crate::core::backend::Layer;
use crate::core::error::{Error, Result};
use cnnbench_kernels::rnn::{self, reference, Inputs, OutputGrads, RnnShape, Weights, Workspace};

pub struct RecurrentLayer {
    shape: RnnShape,
    sequences: bool,
    input_grad: bool,
    /// Per direction: `weight_ih`, `weight_hh`, `bias_ih`.
    params: Vec<Param>,
    /// The kernels' weight sets: each pass moves the parameters in and out
    /// again; `b_hh` stays zero.
    sets: Vec<Weights>,
    /// The sets' gradients, moved likewise; `b_hh`'s is scratch.
    dsets: Vec<Weights>,
    ws: Workspace,
    /// Time-major copies of the sequence, the output and their gradients.
    x_tm: Vec<f32>,
    y_tm: Vec<f32>,
    dy_tm: Vec<f32>,
    dx_tm: Vec<f32>,
    hy: Vec<f32>,
    cy: Vec<f32>,
    dhy: Vec<f32>,
    dhx: Vec<f32>,
    dcx: Vec<f32>,
    /// The initial states and the final cell state's gradient: zero.
    zeros: Vec<f32>,
}

/// `[a][b][f]` to `[b][a][f]`.
fn swap_axes(src: &[f32], a: usize, b: usize, f: usize, dst: &mut [f32]) {
    for i in 0..a {
        for j in 0..b {
            dst[(j * a + i) * f..][..f].copy_from_slice(&src[(i * b + j) * f..][..f]);
        }
    }
}

impl RecurrentLayer {
    /// `params`: per direction `weight_ih`, `weight_hh`, `bias_ih` (the
    /// spec's order and sizes).
    pub fn new(
        shape: RnnShape,
        sequences: bool,
        params: Vec<Vec<f32>>,
        input_grad: bool,
    ) -> Result<RecurrentLayer> {
        let bytes = Workspace::bytes_for(&shape).unwrap_or(usize::MAX);
        if bytes == usize::MAX {
            return Err(Error::host_oom(bytes));
        }
        let sets: Vec<Weights> = (0..shape.sets())
            .map(|s| {
                let mut w = Weights::zeros(&shape, s);
                // Filled by the parameters during each pass.
                w.w_ih = Vec::new();
                w.w_hh = Vec::new();
                w.b_ih = Vec::new();
                w
            })
            .collect();
        let state = shape.state_len();
        Ok(RecurrentLayer {
            sequences,
            input_grad,
            params: params.into_iter().map(Param::new).collect(),
            dsets: sets.clone(),
            sets,
            ws: Workspace::try_new(&shape).ok_or_else(|| Error::host_oom(bytes))?,
            x_tm: zeroed(shape.x_len())?,
            y_tm: zeroed(shape.y_len())?,
            dy_tm: zeroed(shape.y_len())?,
            dx_tm: zeroed(if input_grad { shape.x_len() } else { 0 })?,
            hy: zeroed(state)?,
            cy: zeroed(state)?,
            dhy: zeroed(state)?,
            dhx: zeroed(state)?,
            dcx: zeroed(state)?,
            zeros: zeroed(state.max(shape.y_len()))?,
            shape,
        })
    }

    /// Moves the parameters into the weight sets and their gradients into
    /// the gradient sets, or back again.
    fn swap_params(&mut self) {
        for (d, p) in self.params.chunks_mut(3).enumerate() {
            let (w, g) = (&mut self.sets[d], &mut self.dsets[d]);
            std::mem::swap(&mut p[0].value, &mut w.w_ih);
            std::mem::swap(&mut p[1].value, &mut w.w_hh);
            std::mem::swap(&mut p[2].value, &mut w.b_ih);
            std::mem::swap(&mut p[0].grad, &mut g.w_ih);
            std::mem::swap(&mut p[1].grad, &mut g.w_hh);
            std::mem::swap(&mut p[2].grad, &mut g.b_ih);
        }
    }

    fn state(&self) -> usize {
        self.shape.state_len()
    }

    /// The layer's output from the kernels': every step, batch-major, or
    /// each direction's final state side by side.
    fn write_output(&self, y_tm: &[f32], hy: &[f32], out: &mut [f32]) {
        let s = &self.shape;
        if self.sequences {
            swap_axes(y_tm, s.t, s.mb, s.output(), out);
        } else {
            let (h, dirs) = (s.hidden, s.direction.count());
            for n in 0..s.mb {
                for d in 0..dirs {
                    out[(n * dirs + d) * h..][..h].copy_from_slice(&hy[(d * s.mb + n) * h..][..h]);
                }
            }
        }
    }

    /// The output gradient as the kernels take it: `dy_tm` for every
    /// step, or `dhy` for the final states (the other stays zero).
    fn read_output_grad(&mut self, dy: &[f32]) {
        let s = self.shape;
        if self.sequences {
            swap_axes(dy, s.mb, s.t, s.output(), &mut self.dy_tm);
        } else {
            let (h, dirs) = (s.hidden, s.direction.count());
            for n in 0..s.mb {
                for d in 0..dirs {
                    self.dhy[(d * s.mb + n) * h..][..h]
                        .copy_from_slice(&dy[(n * dirs + d) * h..][..h]);
                }
            }
        }
    }
}

impl Layer<Cpu> for RecurrentLayer {
    fn forward(&mut self, ctx: &mut Ctx, inputs: &[&[f32]], out: &mut [f32]) -> Result<()> {
        let s = self.shape;
        swap_axes(inputs[0], s.mb, s.t, s.input, &mut self.x_tm);
        self.swap_params();
        let state = self.state();
        if ctx.reference {
            let z = &self.zeros;
            let r = reference::run(
                &s,
                &self.x_tm,
                &z[..state],
                &z[..state],
                &self.sets,
                &z[..s.y_len()],
                &z[..state],
                &z[..state],
            );
            self.swap_params();
            self.write_output(&r.y, &r.hy, out);
            return Ok(());
        }
        let inp = Inputs {
            x: &self.x_tm,
            hx: &self.zeros[..state],
            cx: &self.zeros[..state],
            weights: &self.sets,
        };
        rnn::forward(
            ctx.isa,
            &s,
            &inp,
            &mut self.ws,
            &mut self.y_tm,
            &mut self.hy,
            &mut self.cy,
        );
        self.swap_params();
        let (y_tm, hy) = (std::mem::take(&mut self.y_tm), std::mem::take(&mut self.hy));
        self.write_output(&y_tm, &hy, out);
        (self.y_tm, self.hy) = (y_tm, hy);
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
        let state = self.state();
        self.read_output_grad(dys[0]);
        self.swap_params();
        if ctx.reference {
            let z = &self.zeros;
            let r = reference::run(
                &s,
                &self.x_tm,
                &z[..state],
                &z[..state],
                &self.sets,
                &self.dy_tm,
                &self.dhy,
                &z[..state],
            );
            for (g, want) in self.dsets.iter_mut().zip(&r.dw) {
                g.w_ih.copy_from_slice(&want.w_ih);
                g.w_hh.copy_from_slice(&want.w_hh);
                g.b_ih.copy_from_slice(&want.b_ih);
            }
            if self.input_grad {
                self.dx_tm.copy_from_slice(&r.dx);
            }
        } else {
            let inp = Inputs {
                x: &self.x_tm,
                hx: &self.zeros[..state],
                cx: &self.zeros[..state],
                weights: &self.sets,
            };
            let grads = OutputGrads {
                dy: &self.dy_tm,
                dhy: &self.dhy,
                dcy: &self.zeros[..state],
            };
            rnn::backward_data(
                ctx.isa,
                &s,
                &inp,
                &grads,
                &mut self.ws,
                &mut self.dx_tm,
                &mut self.dhx,
                &mut self.dcx,
            );
            rnn::backward_weights(ctx.isa, &s, &inp, &mut self.ws, &mut self.dsets);
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
        let bufs = [
            &self.x_tm,
            &self.y_tm,
            &self.dy_tm,
            &self.dx_tm,
            &self.hy,
            &self.cy,
            &self.dhy,
            &self.dhx,
            &self.dcx,
            &self.zeros,
        ];
        self.ws.bytes() + 4 * bufs.iter().map(|b| b.len()).sum::<usize>()
    }

    fn kernels(&self) -> String {
        let input = if rnn::input_product_per_step(&self.shape, 0) {
            "per-step input and recurrent GEMMs"
        } else {
            "input GEMM for all steps, per-step recurrent GEMM"
        };
        format!("{input} + fused gates")
    }
}
