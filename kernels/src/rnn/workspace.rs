//! The buffers the passes share, allocated once, and the inputs a pass
//! reads.

use super::matrix::{packed_floats, rows_input_product};
use super::shape::{Cell, RnnShape, Weights};
use crate::conv::direct::PackedRows;

/// What one layer and direction keeps from forward to backward, and its
/// backward's gradients. Every per-step tensor is `[t][feature][mb]`.
pub(super) struct SetState {
    /// `[t][gates·h][mb]`: the activated gates.
    pub(super) gates: Vec<f32>,
    /// `[t][h][mb]`: the outputs.
    pub(super) h: Vec<f32>,
    /// LSTM: the cell states; GRU: the hidden state's `n` product with its
    /// bias (`[t][h][mb]`). Else empty.
    pub(super) aux: Vec<f32>,
    /// `[t][gates·h][mb]`: the input side's pre-activation gradients.
    pub(super) dgx: Vec<f32>,
    /// GRU only: the hidden side's (they differ in `n`).
    pub(super) dgh: Vec<f32>,
}

/// Every buffer the passes use, allocated once ([`Workspace::new`]) so
/// that nothing is allocated while they are timed.
pub struct Workspace {
    pub(super) shape: RnnShape,
    pub(super) sets: Vec<SetState>,
    /// Each layer's output but the last's (`[t][mb][output]`, the next
    /// layer's input).
    pub(super) outs: Vec<Vec<f32>>,
    /// `[gates·h][mb]`: the GRU's hidden-state product of one step.
    pub(super) hproj: Vec<f32>,
    /// `[gates·h]`: the biases each step's input side adds, summed once
    /// per layer and direction: `b_ih`, plus `b_hh` except for the GRU
    /// (which adds `b_hh` to its hidden product).
    pub(super) bias: Vec<f32>,
    /// A set's weights transposed, one use at a time: the forward's `W_ih`
    /// (`[input][gates·h]`) for a batch of one's input product over every
    /// step on AVX-512 (see `set_forward`), the backward's `W_hh`
    /// (`[h][gates·h]`) for its per-step GEMM where it does not pack.
    /// Sized for both on every ISA (the workspace does not know which
    /// runs), so a layer wider than `h` below a batch-of-one layer makes
    /// it larger than `W_hh` alone.
    pub(super) w_t: Vec<f32>,
    /// `[h][mb]`: the initial states transposed, and the gradients carried
    /// back one step.
    pub(super) h0: Vec<f32>,
    pub(super) c0: Vec<f32>,
    pub(super) dh: Vec<f32>,
    pub(super) dc: Vec<f32>,
    pub(super) dh_prev: Vec<f32>,
    /// `[gates·h][t·mb]`: one set's gate gradients with the steps side by
    /// side, so that the input's and the weights' gradients are each one
    /// GEMM over the whole sequence (`k = t·mb`) rather than one per step
    /// with `k = mb`.
    pub(super) dg_cols: Vec<f32>,
    /// `[t·mb][h]`: the states each step started from, as rows.
    pub(super) hprev_rows: Vec<f32>,
    /// `[t][mb][output]`: the gradient reaching a layer's output, and the
    /// one reaching the layer below's.
    pub(super) dlayer: Vec<f32>,
    pub(super) dlayer_next: Vec<f32>,
    /// One set's `W_ih`, `W_hh` (forward) and `W_hh` transposed (backward)
    /// packed for the per-step products (see `matrix::pack_for_steps`).
    pub(super) packed_ih: PackedRows,
    pub(super) packed_hh: PackedRows,
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
            h.checked_mul(gh)?.max(w_ih_t_floats(shape)?),
            gh,
            shape.mb.checked_mul(h)?.checked_mul(5)?,
            tb.checked_mul(gh)?.checked_add(tb.checked_mul(h)?)?,
            tb.checked_mul(widest)?.checked_mul(2)?,
            packed_ih_floats(shape)?,
            packed_hh_floats(shape)?,
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
        let z = crate::alloc::try_zeroed_huge;
        let gates = shape.cell.gates();
        let gh = gates * h;
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
            bias: z(gh)?,
            w_t: z((h * gh).max(w_ih_t_floats(shape)?))?,
            h0: z(state)?,
            c0: z(state)?,
            dh: z(state)?,
            dc: z(state)?,
            dh_prev: z(state)?,
            dg_cols: z(tb * gh)?,
            hprev_rows: z(tb * h)?,
            dlayer: z(tb * widest)?,
            dlayer_next: z(tb * widest)?,
            packed_ih: PackedRows::with_capacity(packed_ih_floats(shape)?)?,
            packed_hh: PackedRows::with_capacity(packed_hh_floats(shape)?)?,
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
            &self.bias,
            &self.w_t,
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
        let packed = self.packed_ih.capacity() + self.packed_hh.capacity();
        4 * (sets + outs + packed + rest.iter().map(|v| v.len()).sum::<usize>())
    }
}

/// Room for `W_ih` transposed, for the layers whose input product over
/// every step comes out step by step (a batch of one whose `W_ih` is too
/// large to stay in cache beside `W_hh`: `matrix::rows_input_product`).
fn w_ih_t_floats(shape: &RnnShape) -> Option<usize> {
    (0..shape.layers).try_fold(0, |most: usize, l| {
        let n = match rows_input_product(shape, l) {
            true => shape
                .cell
                .gates()
                .checked_mul(shape.hidden)?
                .checked_mul(shape.layer_input(l))?,
            false => 0,
        };
        Some(most.max(n))
    })
}

/// Room for any layer's `W_ih` packed: the largest over the layers that
/// pack (a layer above may pack where layer 0's input is too wide to).
fn packed_ih_floats(shape: &RnnShape) -> Option<usize> {
    (0..shape.layers).try_fold(0, |most: usize, l| {
        Some(most.max(packed_floats(
            shape.cell.gates(),
            shape.hidden,
            shape.layer_input(l),
            shape.mb,
            false,
        )?))
    })
}

/// Room for `W_hh` packed, forward, or transposed for the backward.
fn packed_hh_floats(shape: &RnnShape) -> Option<usize> {
    let (h, mb) = (shape.hidden, shape.mb);
    let gates = shape.cell.gates();
    let forward = packed_floats(gates, h, h, mb, true)?;
    Some(forward.max(packed_floats(1, h, gates.checked_mul(h)?, mb, true)?))
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

pub(super) fn check(shape: &RnnShape, ws: &Workspace, inp: &Inputs) {
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
