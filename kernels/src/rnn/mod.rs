//! Recurrent layers on the CPU: vanilla RNN (ReLU or tanh), LSTM and GRU,
//! stacked and uni- or bidirectional, forward and backward through time,
//! in PyTorch's `nn.RNN`/`nn.LSTM`/`nn.GRU` weight layout.
//!
//! The work is split as cuDNN splits it, so the two can be timed alike:
//! - [`forward`]: per layer and direction, the input's product for every
//!   time step as one GEMM (`[t·mb, in] x [in, gates·h]`, biases added),
//!   then per step the hidden state's product (a GEMM accumulated onto
//!   it, or beside it for the GRU) and one fused pass over the gates
//!   ([`gates`]);
//! - [`backward_data`]: back through time, per step the fused backward
//!   pass and the recurrent GEMM giving the previous state's gradient,
//!   then the input's gradient for every step as one GEMM;
//! - [`backward_weights`]: the weight gradients as two GEMMs over all
//!   time steps and the bias gradients as column sums.
//!
//! Tensors are time-major (`[t][mb][features]`, PyTorch's default and
//! cuDNN's packed layout); states are `[layers·directions][mb][h]`.

pub mod gates;
pub mod reference;
#[cfg(test)]
mod tests;

use crate::gemm::{sgemm_acc, GemmShape};
use crate::Isa;
use rayon::prelude::*;

/// A recurrent cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cell {
    RnnRelu,
    RnnTanh,
    Lstm,
    Gru,
}

impl Cell {
    pub const ALL: [Cell; 4] = [Cell::RnnRelu, Cell::RnnTanh, Cell::Lstm, Cell::Gru];

    /// Gates per hidden unit (rows of `weight_ih` per unit).
    pub fn gates(self) -> usize {
        match self {
            Cell::RnnRelu | Cell::RnnTanh => 1,
            Cell::Lstm => 4,
            Cell::Gru => 3,
        }
    }
}

/// Which way the sequence is read, and how two directions combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    Left2Right,
    Right2Left,
    /// Both ways; the outputs side by side (`2h` features).
    Concat,
    /// Both ways; the outputs summed (`h` features).
    Sum,
}

impl Direction {
    pub const ALL: [Direction; 4] = [
        Direction::Left2Right,
        Direction::Right2Left,
        Direction::Concat,
        Direction::Sum,
    ];

    pub fn count(self) -> usize {
        match self {
            Direction::Left2Right | Direction::Right2Left => 1,
            Direction::Concat | Direction::Sum => 2,
        }
    }

    /// Whether direction `d` (0 or 1) reads the sequence backwards.
    fn reversed(self, d: usize) -> bool {
        self == Direction::Right2Left || d == 1
    }
}

/// One recurrent problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RnnShape {
    pub cell: Cell,
    pub direction: Direction,
    pub layers: usize,
    /// Time steps.
    pub t: usize,
    pub mb: usize,
    /// Features of the first layer's input.
    pub input: usize,
    pub hidden: usize,
}

impl RnnShape {
    /// Features of each layer's output.
    pub fn output(&self) -> usize {
        match self.direction {
            Direction::Concat => 2 * self.hidden,
            _ => self.hidden,
        }
    }

    /// Features of layer `l`'s input.
    pub fn layer_input(&self, l: usize) -> usize {
        if l == 0 {
            self.input
        } else {
            self.output()
        }
    }

    /// Weight sets: one per layer and direction, `l·directions + d`.
    pub fn sets(&self) -> usize {
        self.layers * self.direction.count()
    }

    /// The shapes of set `s`'s `weight_ih`, `weight_hh`, `bias_ih`,
    /// `bias_hh`, as PyTorch holds them.
    pub fn set_shapes(&self, s: usize) -> [Vec<usize>; 4] {
        let l = s / self.direction.count();
        let gh = self.cell.gates() * self.hidden;
        [
            vec![gh, self.layer_input(l)],
            vec![gh, self.hidden],
            vec![gh],
            vec![gh],
        ]
    }

    pub fn x_len(&self) -> usize {
        self.t * self.mb * self.input
    }

    pub fn y_len(&self) -> usize {
        self.t * self.mb * self.output()
    }

    /// One state tensor (`h` or, for the LSTM, `c`): every layer and
    /// direction.
    pub fn state_len(&self) -> usize {
        self.sets() * self.mb * self.hidden
    }

    /// GEMM FLOPs (2 per multiply-add) of the forward pass; each backward
    /// half (data, weights) does the same. The gates' elementwise work is
    /// not counted, as DeepBench does not.
    pub fn flops(&self) -> u64 {
        let gh = (self.cell.gates() * self.hidden) as u64;
        let tb = (self.t * self.mb) as u64;
        (0..self.layers)
            .map(|l| 2 * tb * gh * (self.layer_input(l) + self.hidden) as u64)
            .sum::<u64>()
            * self.direction.count() as u64
    }
}

/// One layer and direction's parameters, in PyTorch's layout.
#[derive(Clone, Debug, PartialEq)]
pub struct Weights {
    /// `[gates·h, in]`
    pub w_ih: Vec<f32>,
    /// `[gates·h, h]`
    pub w_hh: Vec<f32>,
    pub b_ih: Vec<f32>,
    pub b_hh: Vec<f32>,
}

impl Weights {
    /// Zeroed parameters of set `s`.
    pub fn zeros(shape: &RnnShape, s: usize) -> Weights {
        let [ih, hh, bi, bh] = shape.set_shapes(s);
        let n = |d: Vec<usize>| vec![0.0; d.iter().product()];
        Weights {
            w_ih: n(ih),
            w_hh: n(hh),
            b_ih: n(bi),
            b_hh: n(bh),
        }
    }

    pub fn tensors(&self) -> [&[f32]; 4] {
        [&self.w_ih, &self.w_hh, &self.b_ih, &self.b_hh]
    }

    pub fn tensors_mut(&mut self) -> [&mut Vec<f32>; 4] {
        [
            &mut self.w_ih,
            &mut self.w_hh,
            &mut self.b_ih,
            &mut self.b_hh,
        ]
    }
}

/// What one layer and direction keeps from forward to backward, and its
/// backward's scratch.
struct SetState {
    /// `[t][mb][gates·h]`: the activated gates.
    gates: Vec<f32>,
    /// `[t][mb][h]`: the outputs.
    h: Vec<f32>,
    /// LSTM: `[t][mb][h]` cell states. GRU: the hidden state's `n`
    /// product with its bias. Else empty.
    aux: Vec<f32>,
    /// `[t][mb][gates·h]`: the input side's pre-activation gradients.
    dgx: Vec<f32>,
    /// GRU only: the hidden side's (they differ in `n`).
    dgh: Vec<f32>,
}

/// Every buffer the passes use, allocated once ([`Workspace::new`]) so
/// that nothing is allocated while they are timed.
pub struct Workspace {
    shape: RnnShape,
    sets: Vec<SetState>,
    /// Each layer's output but the last's (the next layer's input).
    outs: Vec<Vec<f32>>,
    /// `[mb][gates·h]`: the GRU's hidden-state product of one step.
    hproj: Vec<f32>,
    /// `[h][gates·h]`: the recurrent weights transposed, so that each
    /// step's small GEMM reads them in the order it packs fastest.
    w_hh_t: Vec<f32>,
    /// `[mb][h]`: the gradients carried back one step.
    dh: Vec<f32>,
    dc: Vec<f32>,
    dh_prev: Vec<f32>,
    /// `[t][mb][h]`: one direction's output gradient, and the states each
    /// step started from (for the recurrent weights' gradient).
    dy_dir: Vec<f32>,
    h_prev: Vec<f32>,
    /// `[t][mb][output]`: the gradient reaching a layer's output.
    dlayer: Vec<f32>,
    dlayer_next: Vec<f32>,
}

impl Workspace {
    pub fn new(shape: &RnnShape) -> Workspace {
        let (tb, h) = (shape.t * shape.mb, shape.hidden);
        let gh = shape.cell.gates() * h;
        let set = || SetState {
            gates: vec![0.0; tb * gh],
            h: vec![0.0; tb * h],
            aux: match shape.cell {
                Cell::Lstm | Cell::Gru => vec![0.0; tb * h],
                _ => Vec::new(),
            },
            dgx: vec![0.0; tb * gh],
            dgh: match shape.cell {
                Cell::Gru => vec![0.0; tb * gh],
                _ => Vec::new(),
            },
        };
        let widest = (0..shape.layers)
            .map(|l| shape.layer_input(l))
            .max()
            .unwrap_or(0)
            .max(shape.output());
        Workspace {
            shape: *shape,
            sets: (0..shape.sets()).map(|_| set()).collect(),
            outs: (1..shape.layers)
                .map(|_| vec![0.0; tb * shape.output()])
                .collect(),
            hproj: vec![0.0; shape.mb * gh],
            w_hh_t: vec![0.0; h * gh],
            dh: vec![0.0; shape.mb * h],
            dc: vec![0.0; shape.mb * h],
            dh_prev: vec![0.0; shape.mb * h],
            dy_dir: vec![0.0; tb * h],
            h_prev: vec![0.0; tb * h],
            dlayer: vec![0.0; tb * widest],
            dlayer_next: vec![0.0; tb * widest],
        }
    }

    /// Bytes [`Workspace::new`] would allocate for `shape` (`None` past
    /// `usize`), so that a problem too large is refused before it is.
    pub fn bytes_for(shape: &RnnShape) -> Option<usize> {
        let tb = shape.t.checked_mul(shape.mb)?;
        let h = shape.hidden;
        let gh = shape.cell.gates().checked_mul(h)?;
        let per_set = match shape.cell {
            Cell::Gru => 3usize,
            _ => 2,
        }
        .checked_mul(tb.checked_mul(gh)?)?
        .checked_add(tb.checked_mul(h)?.checked_mul(match shape.cell {
            Cell::Lstm | Cell::Gru => 2,
            _ => 1,
        })?)?;
        let widest = (0..shape.layers)
            .map(|l| shape.layer_input(l))
            .max()
            .unwrap_or(0)
            .max(shape.output());
        let floats = per_set
            .checked_mul(shape.sets())?
            .checked_add(
                tb.checked_mul(shape.output())?
                    .checked_mul(shape.layers.saturating_sub(1))?,
            )?
            .checked_add(shape.mb.checked_mul(gh)?)?
            .checked_add(h.checked_mul(gh)?)?
            .checked_add(shape.mb.checked_mul(h)?.checked_mul(3)?)?
            .checked_add(tb.checked_mul(h)?.checked_mul(2)?)?
            .checked_add(tb.checked_mul(widest)?.checked_mul(2)?)?;
        floats.checked_mul(4)
    }

    /// Bytes the workspace holds.
    pub fn bytes(&self) -> usize {
        let sets: usize = self
            .sets
            .iter()
            .map(|s| s.gates.len() + s.h.len() + s.aux.len() + s.dgx.len() + s.dgh.len())
            .sum();
        let outs: usize = self.outs.iter().map(Vec::len).sum();
        4 * (sets
            + outs
            + self.hproj.len()
            + self.w_hh_t.len()
            + self.dh.len()
            + self.dc.len()
            + self.dh_prev.len()
            + self.dy_dir.len()
            + self.h_prev.len()
            + self.dlayer.len()
            + self.dlayer_next.len())
    }
}

/// The inputs of a pass: the sequence, the initial states and the weights.
pub struct Inputs<'a> {
    /// `[t][mb][input]`
    pub x: &'a [f32],
    /// `[layers·directions][mb][h]`
    pub hx: &'a [f32],
    /// LSTM only (else ignored).
    pub cx: &'a [f32],
    /// One per layer and direction.
    pub weights: &'a [Weights],
}

fn check(shape: &RnnShape, ws: &Workspace, inp: &Inputs) {
    assert_eq!(ws.shape, *shape, "workspace of another shape");
    assert_eq!(inp.x.len(), shape.x_len(), "x");
    assert_eq!(inp.hx.len(), shape.state_len(), "hx");
    if shape.cell == Cell::Lstm {
        assert_eq!(inp.cx.len(), shape.state_len(), "cx");
    }
    assert_eq!(inp.weights.len(), shape.sets(), "weight sets");
    for (s, w) in inp.weights.iter().enumerate() {
        for (t, d) in w.tensors().iter().zip(shape.set_shapes(s)) {
            assert_eq!(t.len(), d.iter().product::<usize>(), "weights of set {s}");
        }
    }
}

/// Time-step order of direction `d`.
fn steps(t: usize, reversed: bool) -> impl Iterator<Item = usize> {
    (0..t).map(move |k| if reversed { t - 1 - k } else { k })
}

/// The forward pass: `y` (`[t][mb][output]`), the final states `hy` and
/// (LSTM) `cy`, and in `ws` what the backward passes need.
pub fn forward(
    isa: Isa,
    shape: &RnnShape,
    inp: &Inputs,
    ws: &mut Workspace,
    y: &mut [f32],
    hy: &mut [f32],
    cy: &mut [f32],
) {
    check(shape, ws, inp);
    assert_eq!(y.len(), shape.y_len(), "y");
    assert_eq!(hy.len(), shape.state_len(), "hy");
    let dirs = shape.direction.count();
    let (mb, h) = (shape.mb, shape.hidden);
    let state = mb * h;
    for l in 0..shape.layers {
        let split = l.min(ws.outs.len());
        let (done, rest) = ws.outs.split_at_mut(split);
        let input: &[f32] = if l == 0 { inp.x } else { &done[l - 1] };
        for d in 0..dirs {
            let s = l * dirs + d;
            let set = &mut ws.sets[s];
            let hx = &inp.hx[s * state..][..state];
            let cx = (shape.cell == Cell::Lstm).then(|| &inp.cx[s * state..][..state]);
            set_forward(
                isa,
                shape,
                l,
                shape.direction.reversed(d),
                input,
                &inp.weights[s],
                hx,
                cx,
                set,
                &mut ws.hproj,
                &mut ws.w_hh_t,
            );
            let last = if shape.direction.reversed(d) {
                0
            } else {
                shape.t - 1
            };
            if shape.t > 0 {
                hy[s * state..][..state].copy_from_slice(&set.h[last * state..][..state]);
                if shape.cell == Cell::Lstm {
                    cy[s * state..][..state].copy_from_slice(&set.aux[last * state..][..state]);
                }
            } else {
                hy[s * state..][..state].copy_from_slice(hx);
                if let Some(cx) = cx {
                    cy[s * state..][..state].copy_from_slice(cx);
                }
            }
        }
        let out: &mut [f32] = if l + 1 == shape.layers {
            &mut *y
        } else {
            &mut rest[0]
        };
        combine(shape, &ws.sets[l * dirs..(l + 1) * dirs], out);
    }
}

/// A layer's output from its directions' outputs.
fn combine(shape: &RnnShape, sets: &[SetState], out: &mut [f32]) {
    let h = shape.hidden;
    match shape.direction {
        Direction::Left2Right | Direction::Right2Left => out.copy_from_slice(&sets[0].h),
        Direction::Sum => {
            for ((o, a), b) in out.iter_mut().zip(&sets[0].h).zip(&sets[1].h) {
                *o = a + b;
            }
        }
        Direction::Concat => {
            for ((o, a), b) in out
                .chunks_mut(2 * h)
                .zip(sets[0].h.chunks(h))
                .zip(sets[1].h.chunks(h))
            {
                o[..h].copy_from_slice(a);
                o[h..].copy_from_slice(b);
            }
        }
    }
}

/// One layer and direction forward.
#[allow(clippy::too_many_arguments)]
fn set_forward(
    isa: Isa,
    shape: &RnnShape,
    l: usize,
    reversed: bool,
    input: &[f32],
    w: &Weights,
    hx: &[f32],
    cx: Option<&[f32]>,
    set: &mut SetState,
    hproj: &mut [f32],
    w_hh_t: &mut [f32],
) {
    let (mb, h, t) = (shape.mb, shape.hidden, shape.t);
    let gh = shape.cell.gates() * h;
    let (state, row) = (mb * h, mb * gh);
    // The input's product for every step at once, then the biases (the
    // GRU adds its b_hh to the hidden state's product instead: b_hn is
    // multiplied by r).
    sgemm_acc(
        &GemmShape {
            m: t * mb,
            n: gh,
            k: shape.layer_input(l),
            trans_a: false,
            trans_b: true,
        },
        input,
        &w.w_ih,
        &mut set.gates,
        false,
    );
    crate::on_isa!(isa, {
        for g in set.gates.chunks_mut(gh) {
            if shape.cell == Cell::Gru {
                for (v, bi) in g.iter_mut().zip(&w.b_ih) {
                    *v += bi;
                }
            } else {
                for (v, (bi, bh)) in g.iter_mut().zip(w.b_ih.iter().zip(&w.b_hh)) {
                    *v += bi + bh;
                }
            }
        }
    });
    transpose(&w.w_hh, gh, h, w_hh_t);
    let recurrent = GemmShape {
        m: mb,
        n: gh,
        k: h,
        trans_a: false,
        trans_b: false,
    };
    let mut prev: Option<usize> = None;
    for k in steps(t, reversed) {
        let (gates, hs, aux) = (&mut set.gates, &mut set.h, &mut set.aux);
        // The state this step starts from: the initial one, or the step
        // before's output (split borrows: it is another row of `hs`).
        let (h_prev, h_out) = split_rows(hs, prev, k, state, hx);
        let pre = &mut gates[k * row..][..row];
        match shape.cell {
            Cell::Gru => {
                sgemm_acc(&recurrent, h_prev, w_hh_t, hproj, false);
                crate::on_isa!(isa, {
                    for g in hproj.chunks_mut(gh) {
                        for (v, b) in g.iter_mut().zip(&w.b_hh) {
                            *v += b;
                        }
                    }
                });
                let hn = &mut aux[k * state..][..state];
                gates::gru_fwd(isa, h, pre, hproj, h_prev, hn, h_out);
            }
            Cell::Lstm => {
                sgemm_acc(&recurrent, h_prev, w_hh_t, pre, true);
                let (c_prev, c_out) = split_rows(aux, prev, k, state, cx.unwrap_or(&[]));
                gates::lstm_fwd(isa, h, pre, c_prev, c_out, h_out);
            }
            Cell::RnnRelu | Cell::RnnTanh => {
                sgemm_acc(&recurrent, h_prev, w_hh_t, pre, true);
                gates::rnn_fwd(isa, shape.cell == Cell::RnnRelu, pre, h_out);
            }
        }
        prev = Some(k);
    }
}

/// `dst[c][r] = src[r][c]` for a `rows x cols` row-major `src`, in
/// blocks that stay in cache, rows of blocks in parallel.
fn transpose(src: &[f32], rows: usize, cols: usize, dst: &mut [f32]) {
    const B: usize = 32;
    assert_eq!(src.len(), rows * cols);
    assert_eq!(dst.len(), rows * cols);
    if rows == 0 || cols == 0 {
        return;
    }
    // Each task writes a band of B rows of dst (B columns of src).
    dst.par_chunks_mut(B * rows)
        .enumerate()
        .for_each(|(band, out)| {
            let c0 = band * B;
            let cn = out.len() / rows;
            for r0 in (0..rows).step_by(B) {
                for r in r0..(r0 + B).min(rows) {
                    for c in 0..cn {
                        out[c * rows + r] = src[r * cols + c0 + c];
                    }
                }
            }
        });
}

/// Row `prev` of `rows` (or `first` when there is none) to read and row
/// `k` to write: rows of `len` values.
fn split_rows<'a>(
    rows: &'a mut [f32],
    prev: Option<usize>,
    k: usize,
    len: usize,
    first: &'a [f32],
) -> (&'a [f32], &'a mut [f32]) {
    match prev {
        None => (first, &mut rows[k * len..][..len]),
        Some(p) if p < k => {
            let (a, b) = rows.split_at_mut(k * len);
            (&a[p * len..][..len], &mut b[..len])
        }
        Some(p) => {
            let (a, b) = rows.split_at_mut(p * len);
            (&b[..len], &mut a[k * len..][..len])
        }
    }
}

/// Gradients reaching a pass's outputs.
pub struct OutputGrads<'a> {
    /// `[t][mb][output]`
    pub dy: &'a [f32],
    /// `[layers·directions][mb][h]`
    pub dhy: &'a [f32],
    /// LSTM only.
    pub dcy: &'a [f32],
}

/// The backward pass for data, after [`forward`] on the same `ws`: `dx`
/// (`[t][mb][input]`) and the initial states' gradients `dhx`, `dcx`
/// (LSTM); the gates' gradients stay in `ws` for [`backward_weights`].
#[allow(clippy::too_many_arguments)]
pub fn backward_data(
    isa: Isa,
    shape: &RnnShape,
    inp: &Inputs,
    grads: &OutputGrads,
    ws: &mut Workspace,
    dx: &mut [f32],
    dhx: &mut [f32],
    dcx: &mut [f32],
) {
    check(shape, ws, inp);
    assert_eq!(grads.dy.len(), shape.y_len(), "dy");
    assert_eq!(grads.dhy.len(), shape.state_len(), "dhy");
    assert_eq!(dx.len(), shape.x_len(), "dx");
    assert_eq!(dhx.len(), shape.state_len(), "dhx");
    if shape.cell == Cell::Lstm {
        assert_eq!(grads.dcy.len(), shape.state_len(), "dcy");
        assert_eq!(dcx.len(), shape.state_len(), "dcx");
    }
    let dirs = shape.direction.count();
    let (mb, h, t) = (shape.mb, shape.hidden, shape.t);
    let (state, tb) = (mb * h, t * mb);
    let gh = shape.cell.gates() * h;
    let out = shape.output();
    ws.dlayer[..tb * out].copy_from_slice(grads.dy);
    for l in (0..shape.layers).rev() {
        let in_f = shape.layer_input(l);
        for d in 0..dirs {
            let s = l * dirs + d;
            // This direction's share of the output gradient.
            let dy_dir = &mut ws.dy_dir;
            match shape.direction {
                Direction::Concat => {
                    for (o, g) in dy_dir.chunks_mut(h).zip(ws.dlayer[..tb * out].chunks(out)) {
                        o.copy_from_slice(&g[d * h..][..h]);
                    }
                }
                _ => dy_dir.copy_from_slice(&ws.dlayer[..tb * h]),
            }
            let set = &mut ws.sets[s];
            let hx = &inp.hx[s * state..][..state];
            ws.dh.copy_from_slice(&grads.dhy[s * state..][..state]);
            if shape.cell == Cell::Lstm {
                ws.dc.copy_from_slice(&grads.dcy[s * state..][..state]);
            }
            let cx = (shape.cell == Cell::Lstm).then(|| &inp.cx[s * state..][..state]);
            let reversed = shape.direction.reversed(d);
            let order: Vec<usize> = steps(t, reversed).collect();
            let back = GemmShape {
                m: mb,
                n: h,
                k: gh,
                trans_a: false,
                trans_b: false,
            };
            for (i, &k) in order.iter().enumerate().rev() {
                let prev = i.checked_sub(1).map(|p| order[p]);
                // dh: the output's gradient plus the next step's.
                crate::on_isa!(isa, {
                    for (a, b) in ws.dh.iter_mut().zip(&dy_dir[k * state..][..state]) {
                        *a += b;
                    }
                });
                let h_prev = prev.map_or(hx, |p| &set.h[p * state..][..state]);
                let act = &set.gates[k * mb * gh..][..mb * gh];
                let dgx = &mut set.dgx[k * mb * gh..][..mb * gh];
                match shape.cell {
                    Cell::Lstm => {
                        let c_prev =
                            prev.map_or(cx.unwrap_or(&[]), |p| &set.aux[p * state..][..state]);
                        let c = &set.aux[k * state..][..state];
                        gates::lstm_bwd(isa, h, act, c_prev, c, &ws.dh, &mut ws.dc, dgx);
                        sgemm_acc(&back, dgx, &inp.weights[s].w_hh, &mut ws.dh, false);
                    }
                    Cell::Gru => {
                        let hn = &set.aux[k * state..][..state];
                        let dgh = &mut set.dgh[k * mb * gh..][..mb * gh];
                        gates::gru_bwd(isa, h, act, hn, h_prev, &ws.dh, dgx, dgh, &mut ws.dh_prev);
                        sgemm_acc(&back, dgh, &inp.weights[s].w_hh, &mut ws.dh_prev, true);
                        std::mem::swap(&mut ws.dh, &mut ws.dh_prev);
                    }
                    Cell::RnnRelu | Cell::RnnTanh => {
                        let hk = &set.h[k * state..][..state];
                        gates::rnn_bwd(isa, shape.cell == Cell::RnnRelu, hk, &ws.dh, dgx);
                        sgemm_acc(&back, dgx, &inp.weights[s].w_hh, &mut ws.dh, false);
                    }
                }
            }
            dhx[s * state..][..state].copy_from_slice(&ws.dh);
            if shape.cell == Cell::Lstm {
                dcx[s * state..][..state].copy_from_slice(&ws.dc);
            }
            // The input's gradient, summed over the directions.
            let dst: &mut [f32] = if l == 0 {
                &mut *dx
            } else {
                &mut ws.dlayer_next[..tb * in_f]
            };
            sgemm_acc(
                &GemmShape {
                    m: tb,
                    n: in_f,
                    k: gh,
                    trans_a: false,
                    trans_b: false,
                },
                &ws.sets[s].dgx,
                &inp.weights[s].w_ih,
                dst,
                d > 0,
            );
        }
        std::mem::swap(&mut ws.dlayer, &mut ws.dlayer_next);
    }
}

/// The weight gradients, after [`backward_data`] on the same `ws`: one
/// [`Weights`] per layer and direction, overwritten.
pub fn backward_weights(
    isa: Isa,
    shape: &RnnShape,
    inp: &Inputs,
    ws: &mut Workspace,
    dw: &mut [Weights],
) {
    check(shape, ws, inp);
    assert_eq!(dw.len(), shape.sets(), "gradient sets");
    let dirs = shape.direction.count();
    let (mb, h, t) = (shape.mb, shape.hidden, shape.t);
    let (state, tb) = (mb * h, t * mb);
    let gh = shape.cell.gates() * h;
    for l in 0..shape.layers {
        let input: &[f32] = if l == 0 { inp.x } else { &ws.outs[l - 1] };
        for d in 0..dirs {
            let s = l * dirs + d;
            let set = &ws.sets[s];
            let g = &mut dw[s];
            // The states each step started from, in time order.
            let reversed = shape.direction.reversed(d);
            let hx = &inp.hx[s * state..][..state];
            for k in 0..t {
                let from = if reversed { k + 1 } else { k.wrapping_sub(1) };
                let src = if from < t {
                    &set.h[from * state..][..state]
                } else {
                    hx
                };
                ws.h_prev[k * state..][..state].copy_from_slice(src);
            }
            let dgh = if shape.cell == Cell::Gru {
                &set.dgh
            } else {
                &set.dgx
            };
            sgemm_acc(
                &GemmShape {
                    m: gh,
                    n: shape.layer_input(l),
                    k: tb,
                    trans_a: true,
                    trans_b: false,
                },
                &set.dgx,
                input,
                &mut g.w_ih,
                false,
            );
            sgemm_acc(
                &GemmShape {
                    m: gh,
                    n: h,
                    k: tb,
                    trans_a: true,
                    trans_b: false,
                },
                dgh,
                &ws.h_prev,
                &mut g.w_hh,
                false,
            );
            column_sums(isa, &set.dgx, gh, &mut g.b_ih);
            column_sums(isa, dgh, gh, &mut g.b_hh);
        }
    }
}

/// `out[j] = Σ_r m[r][j]`.
fn column_sums(isa: Isa, m: &[f32], cols: usize, out: &mut [f32]) {
    out.fill(0.0);
    crate::on_isa!(isa, {
        for row in m.chunks(cols) {
            for (o, v) in out.iter_mut().zip(row) {
                *o += v;
            }
        }
    });
}
