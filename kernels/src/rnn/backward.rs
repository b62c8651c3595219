//! The backward passes: data (back through time), then weights.

use super::gates;
use super::matrix::{
    gemm, pack_transposed_for_steps, row_sums, step_gemm, to_columns, transpose, transpose_add,
};
use super::shape::{Cell, Direction, RnnShape, Weights};
use super::team_steps;
use super::workspace::{check, Inputs, Workspace};
use crate::gemm::{batch_packs, sgemm_batched_acc, GemmShape};
use crate::Isa;

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
    for l in (0..shape.layers).rev() {
        let in_f = shape.layer_input(l);
        // The gradient reaching this layer's output: the top layer reads
        // `dy` itself; each layer below, what the one above wrote.
        let dlayer: &[f32] = if l + 1 == shape.layers {
            grads.dy
        } else {
            &ws.dlayer
        };
        for d in 0..dirs {
            let s = l * dirs + d;
            let w = &inp.weights[s];
            let reversed = shape.direction.reversed(d);
            // `W_hhᵀ` for the per-step products: packed straight from
            // `W_hh` where it packs, else transposed.
            let p_hh_t = pack_transposed_for_steps(isa, &w.w_hh, h, gh, mb, &mut ws.packed_hh);
            if p_hh_t.is_none() {
                transpose(isa, &w.w_hh, gh, h, &mut ws.w_t[..h * gh]);
            }
            transpose(isa, &grads.dhy[s * state..][..state], mb, h, &mut ws.dh);
            transpose(isa, &inp.hx[s * state..][..state], mb, h, &mut ws.h0);
            if lstm {
                transpose(isa, &grads.dcy[s * state..][..state], mb, h, &mut ws.dc);
                transpose(isa, &inp.cx[s * state..][..state], mb, h, &mut ws.c0);
            }
            // This direction's columns of the output gradient.
            let offset = if shape.direction == Direction::Concat {
                d * h
            } else {
                0
            };
            let set = &mut ws.sets[s];
            if let Some(size) = team_steps::team_size(shape, p_hh_t, true) {
                // A small layer's steps on a team (see `team_steps`).
                let p = p_hh_t.expect("team_size needs packed weights");
                let gru_ended_in_dh_prev = team_steps::backward(
                    isa,
                    shape,
                    reversed,
                    size,
                    p,
                    dlayer,
                    offset,
                    [&set.gates, &set.h, &set.aux],
                    [&mut set.dgx, &mut set.dgh],
                    [&mut ws.dh, &mut ws.dc, &mut ws.dh_prev],
                    [&ws.h0, &ws.c0],
                );
                if gru_ended_in_dh_prev {
                    std::mem::swap(&mut ws.dh, &mut ws.dh_prev);
                }
            } else {
                // The `i`-th step processed, as a time index.
                let at = |i: usize| if reversed { t - 1 - i } else { i };
                // A step's recurrent product back to the state's gradient,
                // `c (+)= W_hhᵀ·b`.
                let w_hh_t = &ws.w_t[..h * gh];
                let dh_product = |b: &[f32], c: &mut [f32], acc: bool| {
                    step_gemm(isa, h, mb, gh, w_hh_t, p_hh_t, b, c, acc)
                };
                for i in (0..t).rev() {
                    let k = at(i);
                    let prev = i.checked_sub(1).map(at);
                    transpose_add(
                        &dlayer[k * mb * out..][..mb * out],
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
                            let c_prev =
                                prev.map_or(&ws.c0[..], |p| &set.aux[p * state..][..state]);
                            let c = &set.aux[k * state..][..state];
                            gates::lstm_bwd(isa, state, act, c_prev, c, &ws.dh, &mut ws.dc, dgx);
                            dh_product(dgx, &mut ws.dh, false);
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
                            dh_product(dgh, &mut ws.dh_prev, true);
                            std::mem::swap(&mut ws.dh, &mut ws.dh_prev);
                        }
                        Cell::RnnRelu | Cell::RnnTanh => {
                            let hk = &set.h[k * state..][..state];
                            gates::rnn_bwd(isa, shape.cell == Cell::RnnRelu, hk, &ws.dh, dgx);
                            dh_product(dgx, &mut ws.dh, false);
                        }
                    }
                }
            }
            // The input's gradient for every step at once,
            // `[t·mb][in] = dG^T·W_ih`, summed over the directions.
            if l > 0 || !dx.is_empty() {
                let dst: &mut [f32] = if l == 0 {
                    &mut *dx
                } else {
                    &mut ws.dlayer_next[..tb * in_f]
                };
                // Step k's rows are `dG_kᵀ·W_ih`, `dG_k` `[gh][mb]`: on
                // the packed path read where each step's lie; else
                // gathered into `[gh][t·mb]` for one GEMM (per-step
                // products would be as many calls of a small one).
                let step = GemmShape {
                    m: mb,
                    n: in_f,
                    k: gh,
                    trans_a: true,
                    trans_b: false,
                };
                if batch_packs(isa, &step, t) {
                    sgemm_batched_acc(isa, &step, t, &set.dgx, row, &w.w_ih, dst, d > 0);
                } else {
                    to_columns(&set.dgx, t, gh, mb, &mut ws.dg_cols);
                    gemm(
                        isa,
                        tb,
                        in_f,
                        gh,
                        &ws.dg_cols,
                        true,
                        &w.w_ih,
                        false,
                        dst,
                        d > 0,
                    );
                }
            }
            transpose(isa, &ws.dh, h, mb, &mut dhx[s * state..][..state]);
            if lstm {
                transpose(isa, &ws.dc, h, mb, &mut dcx[s * state..][..state]);
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
            transpose(isa, &inp.hx[s * state..][..state], mb, h, &mut ws.h0);
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
                transpose(isa, src, h, mb, &mut ws.hprev_rows[k * state..][..state]);
            }
            // dW_ih = dG·X and dW_hh = dG_h·H_prev over the whole sequence.
            to_columns(&set.dgx, t, gh, mb, &mut ws.dg_cols);
            gemm(
                isa,
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
            let gru = shape.cell == Cell::Gru;
            if gru {
                to_columns(&set.dgh, t, gh, mb, &mut ws.dg_cols);
            }
            gemm(
                isa,
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
            // Both biases add to the same pre-activations, except the
            // GRU's candidate gate: elsewhere their gradients are equal,
            // and a second pass over every step's gradients would only
            // repeat the first.
            if gru {
                row_sums(isa, &ws.dg_cols, tb, &mut g.b_hh);
            } else {
                g.b_hh.copy_from_slice(&g.b_ih);
            }
        }
    }
}
