//! Recurrent layers on the CPU: vanilla RNN (ReLU or tanh), LSTM and GRU,
//! stacked and uni- or bidirectional, forward and backward through time,
//! in PyTorch's `nn.RNN`/`nn.LSTM`/`nn.GRU` weight layout.
//!
//! The work is split as cuDNN splits it, so the two can be timed alike:
//! - [`forward`]: per layer and direction, the input's product for every
//!   time step as one GEMM (`[t·mb, in] x [in, gates·h]`), or, where
//!   `W_ih` stays in cache ([`input_product_per_step`]), per step; then
//!   per step the biases, the hidden state's product (a GEMM accumulated
//!   onto it, or beside it for the GRU) and one fused pass over the gates
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

use crate::conv::direct::rows_gemm;
use crate::gemm::{sgemm_acc, GemmShape, SendPtr};
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

/// Everything the three passes produce, on the host: the forward's `y`,
/// `hy`, `cy` (LSTM; else empty), the backward data's `dx`, `dhx`, `dcx`
/// (LSTM) and the backward weights' gradients, one set per layer and
/// direction. The reference returns one; the CLI and the GPU path fill one
/// to compare with it.
#[derive(Clone, Debug, Default)]
pub struct Outputs {
    pub y: Vec<f32>,
    pub hy: Vec<f32>,
    pub cy: Vec<f32>,
    pub dx: Vec<f32>,
    pub dhx: Vec<f32>,
    pub dcx: Vec<f32>,
    pub dw: Vec<Weights>,
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
/// backward's gradients. Every per-step tensor is `[t][feature][mb]`.
struct SetState {
    /// `[t][gates·h][mb]`: the activated gates.
    gates: Vec<f32>,
    /// `[t][h][mb]`: the outputs.
    h: Vec<f32>,
    /// LSTM: the cell states; GRU: the hidden state's `n` product with its
    /// bias (`[t][h][mb]`). Else empty.
    aux: Vec<f32>,
    /// `[t][gates·h][mb]`: the input side's pre-activation gradients.
    dgx: Vec<f32>,
    /// GRU only: the hidden side's (they differ in `n`).
    dgh: Vec<f32>,
}

/// Every buffer the passes use, allocated once ([`Workspace::new`]) so
/// that nothing is allocated while they are timed.
pub struct Workspace {
    shape: RnnShape,
    sets: Vec<SetState>,
    /// Each layer's output but the last's (`[t][mb][output]`, the next
    /// layer's input).
    outs: Vec<Vec<f32>>,
    /// `[gates·h][mb]`: the GRU's hidden-state product of one step.
    hproj: Vec<f32>,
    /// `[h][gates·h]`: the recurrent weights transposed for the
    /// backward's per-step GEMM.
    w_hh_t: Vec<f32>,
    /// `[h][mb]`: the initial states transposed, and the gradients carried
    /// back one step.
    h0: Vec<f32>,
    c0: Vec<f32>,
    dh: Vec<f32>,
    dc: Vec<f32>,
    dh_prev: Vec<f32>,
    /// `[gates·h][t·mb]`: one set's gate gradients with the steps side by
    /// side, so that the input's and the weights' gradients are each one
    /// GEMM over the whole sequence (`k = t·mb`) rather than one per step
    /// with `k = mb`.
    dg_cols: Vec<f32>,
    /// `[t·mb][h]`: the states each step started from, as rows.
    hprev_rows: Vec<f32>,
    /// `[t][mb][output]`: the gradient reaching a layer's output, and the
    /// one reaching the layer below's.
    dlayer: Vec<f32>,
    dlayer_next: Vec<f32>,
}

impl Workspace {
    /// The float counts of every buffer, in one place for `new` and
    /// `bytes_for` (`None` past `usize`).
    fn sizes(shape: &RnnShape) -> Option<[usize; 12]> {
        let tb = shape.t.checked_mul(shape.mb)?;
        let h = shape.hidden;
        let gh = shape.cell.gates().checked_mul(h)?;
        let widest_in = (0..shape.layers)
            .map(|l| shape.layer_input(l))
            .max()
            .unwrap_or(0);
        let widest = widest_in.max(shape.output());
        let aux = match shape.cell {
            Cell::Lstm | Cell::Gru => tb.checked_mul(h)?,
            _ => 0,
        };
        let dgh = match shape.cell {
            Cell::Gru => tb.checked_mul(gh)?,
            _ => 0,
        };
        let per_set = tb
            .checked_mul(gh)?
            .checked_mul(2)?
            .checked_add(tb.checked_mul(h)?)?
            .checked_add(aux)?
            .checked_add(dgh)?;
        Some([
            per_set.checked_mul(shape.sets())?,
            tb.checked_mul(shape.output())?
                .checked_mul(shape.layers.saturating_sub(1))?,
            shape.mb.checked_mul(gh)?,
            h.checked_mul(gh)?,
            0,
            shape.mb.checked_mul(h)?.checked_mul(5)?,
            tb.checked_mul(gh)?.checked_add(tb.checked_mul(h)?)?,
            tb.checked_mul(widest)?.checked_mul(2)?,
            0,
            0,
            0,
            0,
        ])
    }

    /// Every buffer `shape`'s passes use, for callers that know the memory
    /// is there (tests); the others use [`Workspace::try_new`].
    pub fn new(shape: &RnnShape) -> Workspace {
        Workspace::try_new(shape).expect("memory for the RNN workspace")
    }

    /// [`Workspace::new`], or `None` where the allocator refuses a buffer.
    pub fn try_new(shape: &RnnShape) -> Option<Workspace> {
        let (tb, h) = (shape.t * shape.mb, shape.hidden);
        fn z(len: usize) -> Option<Vec<f32>> {
            let mut v = Vec::new();
            v.try_reserve_exact(len).ok()?;
            v.resize(len, 0.0);
            Some(v)
        }
        let gh = shape.cell.gates() * h;
        let set = || -> Option<SetState> {
            Some(SetState {
                gates: z(tb * gh)?,
                h: z(tb * h)?,
                aux: match shape.cell {
                    Cell::Lstm | Cell::Gru => z(tb * h)?,
                    _ => Vec::new(),
                },
                dgx: z(tb * gh)?,
                dgh: match shape.cell {
                    Cell::Gru => z(tb * gh)?,
                    _ => Vec::new(),
                },
            })
        };
        let widest_in = (0..shape.layers)
            .map(|l| shape.layer_input(l))
            .max()
            .unwrap_or(0);
        let widest = widest_in.max(shape.output());
        let state = shape.mb * h;
        Some(Workspace {
            shape: *shape,
            sets: (0..shape.sets()).map(|_| set()).collect::<Option<_>>()?,
            outs: (1..shape.layers)
                .map(|_| z(tb * shape.output()))
                .collect::<Option<_>>()?,
            hproj: z(shape.mb * gh)?,
            w_hh_t: z(h * gh)?,
            h0: z(state)?,
            c0: z(state)?,
            dh: z(state)?,
            dc: z(state)?,
            dh_prev: z(state)?,
            dg_cols: z(tb * gh)?,
            hprev_rows: z(tb * h)?,
            dlayer: z(tb * widest)?,
            dlayer_next: z(tb * widest)?,
        })
    }

    /// Bytes [`Workspace::new`] would allocate for `shape` (`None` past
    /// `usize`), so that a problem too large is refused before it is.
    pub fn bytes_for(shape: &RnnShape) -> Option<usize> {
        Workspace::sizes(shape)?
            .iter()
            .try_fold(0usize, |a, &b| a.checked_add(b))?
            .checked_mul(4)
    }

    /// Bytes the workspace holds.
    pub fn bytes(&self) -> usize {
        let sets: usize = self
            .sets
            .iter()
            .map(|s| s.gates.len() + s.h.len() + s.aux.len() + s.dgx.len() + s.dgh.len())
            .sum();
        let outs: usize = self.outs.iter().map(Vec::len).sum();
        let rest = [
            &self.hproj,
            &self.w_hh_t,
            &self.h0,
            &self.c0,
            &self.dh,
            &self.dc,
            &self.dh_prev,
            &self.dg_cols,
            &self.hprev_rows,
            &self.dlayer,
            &self.dlayer_next,
        ];
        4 * (sets + outs + rest.iter().map(|v| v.len()).sum::<usize>())
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

/// Time-step order of a direction.
fn steps(t: usize, reversed: bool) -> impl Iterator<Item = usize> {
    (0..t).map(move |k| if reversed { t - 1 - k } else { k })
}

/// The largest `W_ih` (bytes) whose input product is computed step by
/// step (see `set_forward`): half of a 1 MiB L2, beside the states.
const PER_STEP_INPUT_BYTES: usize = 512 * 1024;

/// Whether layer `l`'s forward computes its input product step by step
/// (its `W_ih` fits in [`PER_STEP_INPUT_BYTES`]) rather than as one GEMM
/// over every step.
pub fn input_product_per_step(shape: &RnnShape, l: usize) -> bool {
    shape.cell.gates() * shape.hidden * shape.layer_input(l) * 4 <= PER_STEP_INPUT_BYTES
}

/// One step's recurrent product, `C[m×n] (+)= A[m×k]·B[k×n]` (weights ×
/// states, `n` the batch): the no-packing GEMM, whose weights stream once
/// and whose states stay in cache, unless the batch is narrower than one
/// vector, where the tiled GEMM wastes fewer lanes. Measured beside the
/// tiled GEMM on the per-step shapes with `rows_gemm_beside_sgemm`.
#[allow(clippy::too_many_arguments)]
fn step_gemm(
    isa: Isa,
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    acc: bool,
) {
    if n >= isa.f32_lanes() {
        rows_gemm(isa, m, n, k, a, b, c, acc);
    } else {
        gemm(m, n, k, a, false, b, false, c, acc);
    }
}

/// `C = op(A)·op(B)` (or `+=`) on contiguous row-major operands.
#[allow(clippy::too_many_arguments)]
fn gemm(
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    ta: bool,
    b: &[f32],
    tb: bool,
    c: &mut [f32],
    acc: bool,
) {
    let s = GemmShape {
        m,
        n,
        k,
        trans_a: ta,
        trans_b: tb,
    };
    sgemm_acc(&s, a, b, c, acc);
}

/// `row[r][..] += v[r]` over a `[rows][width]` matrix.
fn add_rows(isa: Isa, m: &mut [f32], width: usize, v: &[f32]) {
    crate::on_isa!(isa, {
        for (row, &b) in m.chunks_mut(width).zip(v) {
            for x in row {
                *x += b;
            }
        }
    });
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
    if shape.cell == Cell::Lstm {
        assert_eq!(cy.len(), shape.state_len(), "cy");
    }
    let dirs = shape.direction.count();
    let (mb, h, t) = (shape.mb, shape.hidden, shape.t);
    let state = mb * h;
    let lstm = shape.cell == Cell::Lstm;
    for l in 0..shape.layers {
        let split = l.min(ws.outs.len());
        let (done, rest) = ws.outs.split_at_mut(split);
        let input: &[f32] = if l == 0 { inp.x } else { &done[l - 1] };
        let out: &mut [f32] = if l + 1 == shape.layers {
            &mut *y
        } else {
            &mut rest[0]
        };
        for d in 0..dirs {
            let s = l * dirs + d;
            let reversed = shape.direction.reversed(d);
            transpose(&inp.hx[s * state..][..state], mb, h, &mut ws.h0);
            if lstm {
                transpose(&inp.cx[s * state..][..state], mb, h, &mut ws.c0);
            }
            set_forward(
                isa,
                shape,
                l,
                reversed,
                input,
                &inp.weights[s],
                &mut ws.sets[s],
                &ws.h0,
                &ws.c0,
                &mut ws.hproj,
                &mut ws.dlayer,
            );
            let set = &ws.sets[s];
            // The layer's output, and the final states, back to
            // `[mb][features]`.
            let (offset, add) = match shape.direction {
                Direction::Concat => (d * h, false),
                Direction::Sum => (0, d == 1),
                _ => (0, false),
            };
            let width = shape.output();
            for k in 0..t {
                scatter_step(
                    &set.h[k * state..][..state],
                    h,
                    mb,
                    &mut out[k * mb * width..][..mb * width],
                    width,
                    offset,
                    add,
                );
            }
            let last = if reversed { 0 } else { t.wrapping_sub(1) };
            let hs = &mut hy[s * state..][..state];
            if t == 0 {
                hs.copy_from_slice(&inp.hx[s * state..][..state]);
            } else {
                transpose(&set.h[last * state..][..state], h, mb, hs);
            }
            if lstm {
                let cs = &mut cy[s * state..][..state];
                if t == 0 {
                    cs.copy_from_slice(&inp.cx[s * state..][..state]);
                } else {
                    transpose(&set.aux[last * state..][..state], h, mb, cs);
                }
            }
        }
    }
}

/// One step's `[h][mb]` output into rows `[mb][width]` at column
/// `offset` (added when `add`).
fn scatter_step(
    src: &[f32],
    h: usize,
    mb: usize,
    dst: &mut [f32],
    width: usize,
    offset: usize,
    add: bool,
) {
    if !add {
        transpose_strided(&src[..h * mb], h, mb, &mut dst[offset..], width);
        return;
    }
    for (j, row) in src.chunks(mb).enumerate().take(h) {
        for (b, &v) in row.iter().enumerate() {
            dst[b * width + offset + j] += v;
        }
    }
}

/// One layer and direction forward: per step the input's product, the
/// biases, the hidden state's product and the gate pass, all `[feature][mb]`.
#[allow(clippy::too_many_arguments)]
fn set_forward(
    isa: Isa,
    shape: &RnnShape,
    l: usize,
    reversed: bool,
    input: &[f32],
    w: &Weights,
    set: &mut SetState,
    h0: &[f32],
    c0: &[f32],
    hproj: &mut [f32],
    scratch: &mut [f32],
) {
    let (mb, h, t) = (shape.mb, shape.hidden, shape.t);
    let gh = shape.cell.gates() * h;
    let in_f = shape.layer_input(l);
    let (state, row) = (mb * h, mb * gh);
    let gru = shape.cell == Cell::Gru;
    let tb = t * mb;
    // Where `W_ih` stays in cache from one step to the next, each step
    // computes its input product itself, straight into `[gh][mb]`, from
    // the input transposed once (`[t][in][mb]`, in `scratch`). Otherwise
    // one GEMM over every step, `[gh][t·mb]`, into the input gradients'
    // buffer (free until the backward pass), reads `W_ih` once; each step
    // then gathers its columns. (`[t·mb][gh]`, transposed per step, was
    // slower there: 660 against 350 ms for DeepBench's h4096 mb16 LSTM.)
    let per_step = input_product_per_step(shape, l);
    let xw = &mut set.dgx;
    if per_step {
        for k in 0..t {
            let x_k = &input[k * mb * in_f..][..mb * in_f];
            transpose(x_k, mb, in_f, &mut scratch[k * in_f * mb..][..in_f * mb]);
        }
    } else {
        gemm(
            gh,
            tb,
            in_f,
            &w.w_ih,
            false,
            &input[..tb * in_f],
            true,
            xw,
            false,
        );
    }
    // Row q's bias (the GRU adds its b_hh to the hidden product instead:
    // b_hn is multiplied by r).
    let bias = |q: usize| w.b_ih[q] + if gru { 0.0 } else { w.b_hh[q] };
    let mut prev: Option<usize> = None;
    for k in steps(t, reversed) {
        let pre = &mut set.gates[k * row..][..row];
        // Step k's input product as `[gh][mb]`, with the biases.
        if per_step {
            let xt = &scratch[k * in_f * mb..][..in_f * mb];
            step_gemm(isa, gh, mb, in_f, &w.w_ih, xt, pre, false);
            crate::on_isa!(isa, {
                for (q, dst) in pre.chunks_mut(mb).enumerate() {
                    let b = bias(q);
                    for d in dst {
                        *d += b;
                    }
                }
            });
        } else {
            // Step k's columns of `[gh][t·mb]`.
            crate::on_isa!(isa, {
                for (q, dst) in pre.chunks_mut(mb).enumerate() {
                    let b = bias(q);
                    for (d, &v) in dst.iter_mut().zip(&xw[q * tb + k * mb..][..mb]) {
                        *d = v + b;
                    }
                }
            });
        }
        let (h_prev, h_out) = split_rows(&mut set.h, prev, k, state, h0);
        match shape.cell {
            Cell::Gru => {
                step_gemm(isa, gh, mb, h, &w.w_hh, h_prev, hproj, false);
                add_rows(isa, hproj, mb, &w.b_hh);
                let hn = &mut set.aux[k * state..][..state];
                gates::gru_fwd(isa, state, pre, hproj, h_prev, hn, h_out);
            }
            Cell::Lstm => {
                step_gemm(isa, gh, mb, h, &w.w_hh, h_prev, pre, true);
                let (c_prev, c_out) = split_rows(&mut set.aux, prev, k, state, c0);
                gates::lstm_fwd(isa, state, pre, c_prev, c_out, h_out);
            }
            Cell::RnnRelu | Cell::RnnTanh => {
                step_gemm(isa, gh, mb, h, &w.w_hh, h_prev, pre, true);
                gates::rnn_fwd(isa, shape.cell == Cell::RnnRelu, pre, h_out);
            }
        }
        prev = Some(k);
    }
}

/// `dst[c][r] = src[r][c]` for a `rows x cols` row-major `src`: tiles
/// of `T x T` copied through a small buffer, so that a tile touches `T`
/// pages of each side (large weights span a page per row, and walking one
/// side by columns would miss the TLB at every element), bands of `T` rows
/// of `src` in parallel.
fn transpose(src: &[f32], rows: usize, cols: usize, dst: &mut [f32]) {
    assert_eq!(dst.len(), rows * cols);
    transpose_strided(src, rows, cols, dst, rows);
}

/// [`transpose`] into rows of `dst` `stride` apart:
/// `dst[c·stride + r] = src[r][c]`.
// `tile[r][c]` reads the tile by columns: an index loop says so best.
#[allow(clippy::needless_range_loop)]
fn transpose_strided(src: &[f32], rows: usize, cols: usize, dst: &mut [f32], stride: usize) {
    const T: usize = 32;
    assert_eq!(src.len(), rows * cols);
    assert!(stride >= rows);
    if rows == 0 || cols == 0 {
        return;
    }
    assert!(dst.len() >= (cols - 1) * stride + rows);
    let out = SendPtr(dst.as_mut_ptr());
    let band = |r0: usize| {
        let rn = T.min(rows - r0);
        let mut tile = [[0f32; T]; T];
        for c0 in (0..cols).step_by(T) {
            let cn = T.min(cols - c0);
            for (r, t) in tile.iter_mut().enumerate().take(rn) {
                let row = &src[(r0 + r) * cols + c0..];
                if cn == T {
                    // A constant length: vector moves, not a memmove call.
                    t.copy_from_slice(&row[..T]);
                } else {
                    t[..cn].copy_from_slice(&row[..cn]);
                }
            }
            for c in 0..cn {
                // SAFETY: row c0+c of dst, columns r0..r0+rn: inside dst,
                // and only this band writes those columns.
                let d = unsafe {
                    std::slice::from_raw_parts_mut(out.get().add((c0 + c) * stride + r0), rn)
                };
                for (r, v) in d.iter_mut().enumerate() {
                    *v = tile[r][c];
                }
            }
        }
    };
    let bands = rows.div_ceil(T);
    // Per-step transposes stay on the calling thread: waking the pool
    // once per step costs more than it saves below about 2^18 values.
    if rows * cols < 1 << 18 {
        (0..bands).for_each(|b| band(b * T));
    } else {
        (0..bands).into_par_iter().for_each(|b| band(b * T));
    }
}

/// `dst[c][r] += src[r][c]` (`src` `rows x cols` with row stride
/// `stride`, starting at column `offset`).
#[allow(clippy::needless_range_loop)] // as in `transpose_strided`
fn transpose_add(
    src: &[f32],
    rows: usize,
    cols: usize,
    stride: usize,
    offset: usize,
    dst: &mut [f32],
) {
    // In 32 x 32 tiles, so that both sides are read in runs of 32.
    const T: usize = 32;
    let mut tile = [[0f32; T]; T];
    for r0 in (0..rows).step_by(T) {
        let rn = T.min(rows - r0);
        for c0 in (0..cols).step_by(T) {
            let cn = T.min(cols - c0);
            for (r, t) in tile.iter_mut().enumerate().take(rn) {
                t[..cn].copy_from_slice(&src[(r0 + r) * stride + offset + c0..][..cn]);
            }
            for c in 0..cn {
                let d = &mut dst[(c0 + c) * rows + r0..][..rn];
                for (r, v) in d.iter_mut().enumerate() {
                    *v += tile[r][c];
                }
            }
        }
    }
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
/// (`[t][mb][input]`; empty when the input needs no gradient, as a
/// network's own input, and then not computed) and the initial states'
/// gradients `dhx`, `dcx` (LSTM); the gates' gradients stay in `ws` for
/// [`backward_weights`].
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
    assert!(dx.is_empty() || dx.len() == shape.x_len(), "dx");
    assert_eq!(dhx.len(), shape.state_len(), "dhx");
    let lstm = shape.cell == Cell::Lstm;
    if lstm {
        assert_eq!(grads.dcy.len(), shape.state_len(), "dcy");
        assert_eq!(dcx.len(), shape.state_len(), "dcx");
    }
    let dirs = shape.direction.count();
    let (mb, h, t) = (shape.mb, shape.hidden, shape.t);
    let (state, tb) = (mb * h, t * mb);
    let gh = shape.cell.gates() * h;
    let row = mb * gh;
    let out = shape.output();
    ws.dlayer[..tb * out].copy_from_slice(grads.dy);
    for l in (0..shape.layers).rev() {
        let in_f = shape.layer_input(l);
        for d in 0..dirs {
            let s = l * dirs + d;
            let w = &inp.weights[s];
            let reversed = shape.direction.reversed(d);
            transpose(&w.w_hh, gh, h, &mut ws.w_hh_t);
            transpose(&grads.dhy[s * state..][..state], mb, h, &mut ws.dh);
            transpose(&inp.hx[s * state..][..state], mb, h, &mut ws.h0);
            if lstm {
                transpose(&grads.dcy[s * state..][..state], mb, h, &mut ws.dc);
                transpose(&inp.cx[s * state..][..state], mb, h, &mut ws.c0);
            }
            // This direction's columns of the output gradient.
            let offset = if shape.direction == Direction::Concat {
                d * h
            } else {
                0
            };
            let set = &mut ws.sets[s];
            // The `i`-th step processed, as a time index.
            let at = |i: usize| if reversed { t - 1 - i } else { i };
            for i in (0..t).rev() {
                let k = at(i);
                let prev = i.checked_sub(1).map(at);
                transpose_add(
                    &ws.dlayer[k * mb * out..][..mb * out],
                    mb,
                    h,
                    out,
                    offset,
                    &mut ws.dh,
                );
                let h_prev = prev.map_or(&ws.h0[..], |p| &set.h[p * state..][..state]);
                let act = &set.gates[k * row..][..row];
                let dgx = &mut set.dgx[k * row..][..row];
                match shape.cell {
                    Cell::Lstm => {
                        let c_prev = prev.map_or(&ws.c0[..], |p| &set.aux[p * state..][..state]);
                        let c = &set.aux[k * state..][..state];
                        gates::lstm_bwd(isa, state, act, c_prev, c, &ws.dh, &mut ws.dc, dgx);
                        step_gemm(isa, h, mb, gh, &ws.w_hh_t, dgx, &mut ws.dh, false);
                    }
                    Cell::Gru => {
                        let hn = &set.aux[k * state..][..state];
                        let dgh = &mut set.dgh[k * row..][..row];
                        gates::gru_bwd(
                            isa,
                            state,
                            act,
                            hn,
                            h_prev,
                            &ws.dh,
                            dgx,
                            dgh,
                            &mut ws.dh_prev,
                        );
                        step_gemm(isa, h, mb, gh, &ws.w_hh_t, dgh, &mut ws.dh_prev, true);
                        std::mem::swap(&mut ws.dh, &mut ws.dh_prev);
                    }
                    Cell::RnnRelu | Cell::RnnTanh => {
                        let hk = &set.h[k * state..][..state];
                        gates::rnn_bwd(isa, shape.cell == Cell::RnnRelu, hk, &ws.dh, dgx);
                        step_gemm(isa, h, mb, gh, &ws.w_hh_t, dgx, &mut ws.dh, false);
                    }
                }
            }
            // The input's gradient for every step at once,
            // `[t·mb][in] = dG^T·W_ih`, summed over the directions.
            if l > 0 || !dx.is_empty() {
                to_columns(&set.dgx, t, gh, mb, &mut ws.dg_cols);
                let dst: &mut [f32] = if l == 0 {
                    &mut *dx
                } else {
                    &mut ws.dlayer_next[..tb * in_f]
                };
                gemm(tb, in_f, gh, &ws.dg_cols, true, &w.w_ih, false, dst, d > 0);
            }
            transpose(&ws.dh, h, mb, &mut dhx[s * state..][..state]);
            if lstm {
                transpose(&ws.dc, h, mb, &mut dcx[s * state..][..state]);
            }
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
    let state = mb * h;
    let gh = shape.cell.gates() * h;
    let tb = t * mb;
    for l in 0..shape.layers {
        let in_f = shape.layer_input(l);
        let input: &[f32] = if l == 0 { inp.x } else { &ws.outs[l - 1] };
        for d in 0..dirs {
            let s = l * dirs + d;
            let set = &ws.sets[s];
            let g = &mut dw[s];
            let reversed = shape.direction.reversed(d);
            transpose(&inp.hx[s * state..][..state], mb, h, &mut ws.h0);
            if t == 0 {
                for v in g.tensors_mut() {
                    v.fill(0.0);
                }
                continue;
            }
            // The states each step started from, as rows `[t·mb][h]`.
            for k in 0..t {
                let from = if reversed { k + 1 } else { k.wrapping_sub(1) };
                let src = if from < t {
                    &set.h[from * state..][..state]
                } else {
                    &ws.h0[..]
                };
                transpose(src, h, mb, &mut ws.hprev_rows[k * state..][..state]);
            }
            // dW_ih = dG·X and dW_hh = dG_h·H_prev over the whole sequence.
            to_columns(&set.dgx, t, gh, mb, &mut ws.dg_cols);
            gemm(
                gh,
                in_f,
                tb,
                &ws.dg_cols,
                false,
                &input[..tb * in_f],
                false,
                &mut g.w_ih,
                false,
            );
            row_sums(isa, &ws.dg_cols, tb, &mut g.b_ih);
            if shape.cell == Cell::Gru {
                to_columns(&set.dgh, t, gh, mb, &mut ws.dg_cols);
            }
            gemm(
                gh,
                h,
                tb,
                &ws.dg_cols,
                false,
                &ws.hprev_rows,
                false,
                &mut g.w_hh,
                false,
            );
            row_sums(isa, &ws.dg_cols, tb, &mut g.b_hh);
        }
    }
}

/// `out[r] = Σ_c m[r][c]` over rows of `width`.
fn row_sums(isa: Isa, m: &[f32], width: usize, out: &mut [f32]) {
    // Sixteen running sums per row: a single one is a chain of dependent
    // additions that the compiler may not reorder, so it would not
    // vectorise.
    const L: usize = 16;
    crate::on_isa!(isa, {
        for (o, r) in out.iter_mut().zip(m.chunks(width.max(1))) {
            let mut acc = [0f32; L];
            let mut lanes = r.chunks_exact(L);
            for c in &mut lanes {
                for (a, &v) in acc.iter_mut().zip(c) {
                    *a += v;
                }
            }
            *o = acc.iter().sum::<f32>() + lanes.remainder().iter().sum::<f32>();
        }
    });
}

/// `[t][rows][mb]` as `[rows][t·mb]`: each step's block side by side.
fn to_columns(src: &[f32], t: usize, rows: usize, mb: usize, dst: &mut [f32]) {
    let tb = t * mb;
    let dst = &mut dst[..rows * tb];
    if tb == 0 {
        return;
    }
    let fill = |r: usize, out: &mut [f32]| {
        for (k, o) in out.chunks_mut(mb).enumerate() {
            o.copy_from_slice(&src[(k * rows + r) * mb..][..mb]);
        }
    };
    if rows * tb < 1 << 18 {
        dst.chunks_mut(tb).enumerate().for_each(|(r, o)| fill(r, o));
    } else {
        dst.par_chunks_mut(tb)
            .enumerate()
            .for_each(|(r, o)| fill(r, o));
    }
}
