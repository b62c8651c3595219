//! The time loops of one layer and direction run by a [`team`]: in each
//! phase a member owns a share of the panels of hidden units (the packed
//! weights' panels, the same ones in every gate's block; the share changes
//! only when the team grows), so that it computes its rows of the step's
//! products and then the gate pass of its own units, and meets the others
//! once per step, where the next step needs the whole state.
//!
//! Every buffer is shared between the members through [`Shared`] views;
//! within a step each member writes only its own rows and units, and reads
//! whole only what no one writes during that step (the previous step's
//! state, this step's gate gradients after the barrier, the weights).

use super::gates::{self, Shared};
use super::shape::{Cell, RnnShape};
use super::team;
use crate::conv::direct::PackedRows;
use crate::gemm::SendPtr;
use crate::Isa;
use std::ops::Range;

/// Multiply-adds of a step's recurrent product below which a team costs
/// more than it saves (the barrier and the split products' edges): about
/// 1-2 µs of work on one thread.
const TEAM_MIN_MACS: usize = 1 << 16;

/// How many threads a team for this layer's time loop should have, or
/// `None` where the loop stays as it is: its recurrent product must run on
/// packed weights (see `matrix::pack_for_steps`), and so must a per-step
/// input product; a step must be long enough ([`TEAM_MIN_MACS`]).
pub(super) fn team_size(
    shape: &RnnShape,
    packed_hh: Option<&PackedRows>,
    input_packed: bool,
) -> Option<usize> {
    let p = packed_hh?;
    let threads = rayon::current_num_threads();
    let gh = shape.cell.gates() * shape.hidden;
    let macs = gh * shape.mb * shape.hidden;
    if !input_packed || threads < 2 || macs < TEAM_MIN_MACS || p.panels() < 2 {
        return None;
    }
    Some(threads.min(p.panels()))
}

/// A member's hidden units: the rows of its panels, within `0..h`.
fn units(member: &team::Member, p: &PackedRows) -> (Range<usize>, Range<usize>) {
    let panels = member.share(p.panels());
    let h = p.block_rows();
    let mr = p.panel_rows();
    let u = (panels.start * mr).min(h)..(panels.end * mr).min(h);
    (panels, u)
}

/// Runs `f(q, row)` on this member's rows `q` of `buf` in every gate's
/// block (rows of `mb` values; units `u` of each block of `h` rows), all
/// compiled for `isa` at once.
///
/// # Safety
/// Those rows of `buf` are this member's alone during the call.
unsafe fn on_own_rows(
    isa: Isa,
    buf: Shared,
    (mb, gates, h): (usize, usize, usize),
    u: &Range<usize>,
    f: impl Fn(usize, &mut [f32]),
) {
    crate::on_isa!(isa, {
        for q in (0..gates).flat_map(|g| g * h + u.start..g * h + u.end) {
            f(q, buf.range(q * mb..(q + 1) * mb));
        }
    })
}

/// A step's input side: its own product per step on packed `W_ih` from
/// the input transposed to `[t][in][mb]`, or its columns of the product
/// over every step (`[gh][t·mb]`), or at a batch of one its row of that
/// product step by step (`[t][gh]`).
pub(super) enum StepInput<'a> {
    PerStep {
        packed: &'a PackedRows,
        xt: &'a [f32],
        in_f: usize,
    },
    Columns(&'a [f32]),
    Rows(&'a [f32]),
}

/// The forward time loop of one layer and direction (see `set_forward`),
/// on a team of `size`: `gates` `[t][gh][mb]` (pre-activations in, the
/// activated gates out), `h` and `aux` `[t][h][mb]`.
#[allow(clippy::too_many_arguments)]
pub(super) fn forward(
    isa: Isa,
    shape: &RnnShape,
    reversed: bool,
    size: usize,
    input: StepInput,
    p_hh: &PackedRows,
    bias: &[f32],
    b_hh: &[f32],
    [gates_buf, h_buf, aux_buf, hproj]: [&mut [f32]; 4],
    h0: &[f32],
    c0: &[f32],
) {
    let (mb, h, t) = (shape.mb, shape.hidden, shape.t);
    let ngates = shape.cell.gates();
    let (state, row, tb) = (mb * h, mb * ngates * h, t * mb);
    if let StepInput::PerStep { packed, .. } = &input {
        // A member's units are its share of W_hh's panels, and it writes
        // the input product of W_ih's panels of the same numbers: they must
        // hold the same rows (see `matrix::pack_input_for_steps`).
        assert_eq!(
            (packed.panel_rows(), packed.panels()),
            (p_hh.panel_rows(), p_hh.panels()),
            "W_ih packed in other panels than W_hh"
        );
    }
    let (gv, hv, av, pv) = (
        Shared::new(gates_buf),
        Shared::new(h_buf),
        Shared::new(aux_buf),
        Shared::new(hproj),
    );
    let (h0, c0) = (Shared::of(h0), Shared::of(c0));
    let step = |i: usize| if reversed { t - 1 - i } else { i };
    // Step i's input side for this member's units: it needs nothing of the
    // others, so it runs ahead while the last step's barrier waits.
    let input_side = |i: usize, m: &team::Member| {
        let (panels, u) = units(m, p_hh);
        let k = step(i);
        let pre = gv.slab(k, row);
        // SAFETY: these rows of step k are this member's alone, in this
        // phase and the one ahead of it.
        unsafe {
            match &input {
                StepInput::PerStep { packed, xt, in_f } => {
                    let x = &xt[k * in_f * mb..][..in_f * mb];
                    packed.gemm_panels(panels, x, SendPtr(pre.ptr()), false);
                    on_own_rows(isa, pre, (mb, ngates, h), &u, |q, row| {
                        let b = bias[q];
                        row.iter_mut().for_each(|d| *d += b);
                    });
                }
                StepInput::Columns(xw) => {
                    on_own_rows(isa, pre, (mb, ngates, h), &u, |q, row| {
                        let b = bias[q];
                        let src = &xw[q * tb + k * mb..][..mb];
                        for (d, &v) in row.iter_mut().zip(src) {
                            *d = v + b;
                        }
                    });
                }
                StepInput::Rows(xw) => {
                    let gh = ngates * h;
                    on_own_rows(isa, pre, (mb, ngates, h), &u, |q, row| {
                        row[0] = xw[k * gh + q] + bias[q];
                    });
                }
            }
        }
    };
    // One phase per step.
    let body = |i: usize, m: &team::Member, input_done: bool| {
        if !input_done {
            input_side(i, m);
        }
        let (panels, u) = units(m, p_hh);
        let er = u.start * mb..u.end * mb;
        let (k, prev) = (step(i), i.checked_sub(1).map(step));
        let pre = gv.slab(k, row);
        // SAFETY: every step's rows and units below are this member's
        // alone; the previous state is read whole, and no one writes
        // it during this step (each wrote its units before the last
        // barrier).
        unsafe {
            let h_prev = prev.map_or(h0, |p| hv.slab(p, state));
            let h_prev_all = h_prev.get(0..state);
            let h_out = hv.slab(k, state);
            match shape.cell {
                Cell::Lstm => {
                    p_hh.gemm_panels(panels.clone(), h_prev_all, SendPtr(pre.ptr()), true);
                    let c_prev = prev.map_or(c0, |p| av.slab(p, state));
                    let v = [pre, c_prev, av.slab(k, state), h_out];
                    gates::lstm_fwd_range(isa, state, v, er.clone());
                }
                Cell::Gru => {
                    p_hh.gemm_panels(panels.clone(), h_prev_all, SendPtr(pv.ptr()), false);
                    on_own_rows(isa, pv, (mb, ngates, h), &u, |q, row| {
                        let b = b_hh[q];
                        row.iter_mut().for_each(|d| *d += b);
                    });
                    let v = [pre, pv, h_prev, av.slab(k, state), h_out];
                    gates::gru_fwd_range(isa, state, v, er.clone());
                }
                Cell::RnnRelu | Cell::RnnTanh => {
                    p_hh.gemm_panels(panels.clone(), h_prev_all, SendPtr(pre.ptr()), true);
                    let relu = shape.cell == Cell::RnnRelu;
                    gates::rnn_fwd_range(isa, relu, [pre, h_out], er.clone());
                }
            }
        }
    };
    team::run_ahead(size, t, body, input_side);
}

/// The backward time loop of one layer and direction (see
/// `backward_data`), on a team of `size`. `dlayer` is the gradient
/// reaching the layer's output (`[t][mb][out]`, this direction's columns
/// from `offset`); `dh`, `dc` carry the state gradients back (the GRU's in
/// `dh` and `dh_prev` by turns: returns whether they end in `dh_prev`).
#[allow(clippy::too_many_arguments)]
pub(super) fn backward(
    isa: Isa,
    shape: &RnnShape,
    reversed: bool,
    size: usize,
    p_hh_t: &PackedRows,
    dlayer: &[f32],
    offset: usize,
    saved: [&[f32]; 3],
    [dgx, dgh]: [&mut [f32]; 2],
    [dh, dc, dh_prev]: [&mut [f32]; 3],
    [h0, c0]: [&[f32]; 2],
) -> bool {
    let (mb, h, t) = (shape.mb, shape.hidden, shape.t);
    let (state, row) = (mb * h, mb * shape.cell.gates() * h);
    let out = shape.output();
    let [act, hs, aux] = saved.map(Shared::of);
    let (xv, hv) = (Shared::new(dgx), Shared::new(dgh));
    let (dhv, dcv, dhp) = (Shared::new(dh), Shared::new(dc), Shared::new(dh_prev));
    let (h0, c0) = (Shared::of(h0), Shared::of(c0));
    let at = |i: usize| if reversed { t - 1 - i } else { i };
    // Two parts per step, the steps from the last: the gate pass of the
    // member's units, then its rows of the recurrent product, which need
    // every unit's gate gradients. Part 2d is step d's (from the last)
    // gate pass, part 2d + 1 its product.
    let part = |part: usize, m: &team::Member| {
        let (panels, u) = units(m, p_hh_t);
        let er = u.start * mb..u.end * mb;
        let done = part / 2;
        let i = t - 1 - done;
        let (k, prev) = (at(i), i.checked_sub(1).map(at));
        // The GRU's state gradient moves between `dh` and `dh_prev` at
        // every step: the `done`-th step reads one and writes the other.
        // The others' stays in `dh`.
        let gru = shape.cell == Cell::Gru;
        let (dh, dh_next) = if gru && done % 2 == 1 {
            (dhp, dhv)
        } else {
            (dhv, dhp)
        };
        let gx = xv.slab(k, row);
        // SAFETY: as in `forward`: in a phase, this member writes only its
        // units of the state gradients, or its rows of them, and its rows
        // of step k's gate gradients, which the others read whole only in
        // the next phase.
        unsafe {
            if part.is_multiple_of(2) {
                super::matrix::transpose_add(
                    &dlayer[k * mb * out..][..mb * out],
                    mb,
                    u.len(),
                    out,
                    offset + u.start,
                    dh.range(er.clone()),
                );
                let h_prev = prev.map_or(h0, |p| hs.slab(p, state));
                match shape.cell {
                    Cell::Lstm => {
                        let c_prev = prev.map_or(c0, |p| aux.slab(p, state));
                        let v = [act.slab(k, row), c_prev, aux.slab(k, state), dh, dcv, gx];
                        gates::lstm_bwd_range(isa, state, v, er);
                    }
                    Cell::Gru => {
                        let v = [
                            act.slab(k, row),
                            aux.slab(k, state),
                            h_prev,
                            dh,
                            gx,
                            hv.slab(k, row),
                            dh_next,
                        ];
                        gates::gru_bwd_range(isa, state, v, er);
                    }
                    Cell::RnnRelu | Cell::RnnTanh => {
                        let relu = shape.cell == Cell::RnnRelu;
                        gates::rnn_bwd_range(isa, relu, [hs.slab(k, state), dh, gx], er);
                    }
                }
            } else {
                match shape.cell {
                    Cell::Gru => {
                        let gh = hv.slab(k, row).get(0..row);
                        p_hh_t.gemm_panels(panels, gh, SendPtr(dh_next.ptr()), true);
                    }
                    _ => p_hh_t.gemm_panels(panels, gx.get(0..row), SendPtr(dh.ptr()), false),
                }
            }
        }
    };
    // One barrier per step, between the gate pass and the product that
    // needs all of it. None between a product and the next step's gate
    // pass: the pass reads only the rows of `dh` its member's product
    // wrote in the same phase (and the cell gradients the last phase
    // left, behind its barrier). So phase j runs step j - 1's product,
    // then step j's gate pass. (Against two phases per step, on 2 threads
    // of the Zen 5, ABBA, backward-data: LSTM 1.02-1.07x at batch 1-16,
    // GRU 1.00-1.08x.)
    team::run(size, t + 1, |phase, m| {
        if phase > 0 {
            part(2 * phase - 1, m);
        }
        if phase < t {
            part(2 * phase, m);
        }
    });
    // The GRU's gradient ends in `dh_prev` after an odd number of steps.
    shape.cell == Cell::Gru && t % 2 == 1
}
