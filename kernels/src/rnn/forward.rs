//! The forward pass through every layer and direction.

use super::gates;
use super::matrix::{
    add_rows, gemm, input_product_per_step, pack_for_steps, pack_input_for_steps,
    rows_input_product, split_rows, step_gemm, steps, transpose, transpose_strided,
};
use super::shape::{Cell, Direction, RnnShape, Weights};
use super::team_steps::{self, StepInput};
use super::workspace::{check, Inputs, SetState, Workspace};
use crate::conv::direct::{rows_gemm, transpose_avx512, PackedRows};
use crate::Isa;

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
            transpose(isa, &inp.hx[s * state..][..state], mb, h, &mut ws.h0);
            if lstm {
                transpose(isa, &inp.cx[s * state..][..state], mb, h, &mut ws.c0);
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
                &mut ws.bias,
                &mut ws.w_t,
                [&mut ws.packed_ih, &mut ws.packed_hh],
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
                    isa,
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
                transpose(isa, &set.h[last * state..][..state], h, mb, hs);
            }
            if lstm {
                let cs = &mut cy[s * state..][..state];
                if t == 0 {
                    cs.copy_from_slice(&inp.cx[s * state..][..state]);
                } else {
                    transpose(isa, &set.aux[last * state..][..state], h, mb, cs);
                }
            }
        }
    }
}

/// One step's `[h][mb]` output into rows `[mb][width]` at column
/// `offset` (added when `add`).
#[allow(clippy::too_many_arguments)]
fn scatter_step(
    isa: Isa,
    src: &[f32],
    h: usize,
    mb: usize,
    dst: &mut [f32],
    width: usize,
    offset: usize,
    add: bool,
) {
    if !add {
        transpose_strided(isa, &src[..h * mb], h, mb, &mut dst[offset..], width);
        return;
    }
    for (j, row) in src.chunks(mb).enumerate().take(h) {
        for (b, &v) in row.iter().enumerate() {
            dst[b * width + offset + j] += v;
        }
    }
}

/// Steps from which a forward pass packs its weights for batches of at
/// least a vector. Packing reads and writes the weights once more per
/// pass (and gathers a panel's rows float by float), which a few steps do
/// not pay back where the unpacked GEMM has whole vectors of batch to run
/// on. ABBA, forward, 2 threads, Zen 4, unpacked against packed: LSTM
/// h512 batch 32 at 1, 4, 8, 10 and 16 steps 3.21x, 1.37x, 1.06x, 1.02x and
/// 0.93x; h256 batch 16 at 8 and 10 steps 1.12x and 0.95x, batch 32 at 10
/// 0.84x; h128 batch 16 at 4 and 10 steps 1.37x and 0.83x; GRU h512 batch
/// 32 at 1, 2 and 4 steps 2.76x, 1.82x and 1.33x. Narrower batches always
/// pack: unpacked they run on a tile that wastes most of its lanes.
pub(super) const FWD_PACK_MIN_STEPS: usize = 10;

/// Whether a forward pass of `t` steps at batch `mb` packs its weights
/// (see [`FWD_PACK_MIN_STEPS`]).
pub(super) fn packs_forward(isa: Isa, t: usize, mb: usize) -> bool {
    t >= FWD_PACK_MIN_STEPS || mb < isa.f32_lanes()
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
    bias: &mut [f32],
    w_t: &mut [f32],
    [packed_ih, packed_hh]: [&mut PackedRows; 2],
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
    let gates = shape.cell.gates();
    let pack = packs_forward(isa, t, mb);
    let p_hh = match pack {
        true => pack_for_steps(isa, &w.w_hh, gates, h, h, mb, packed_hh),
        false => None,
    };
    // Where the recurrent weights pack, so do the input's wherever they
    // can, and the input's product runs per step on them too: the columns
    // of one product over every step would be gathered row by row at every
    // step, each row a stride of `t·mb` floats away (17% of an h256 mb16
    // 150-step LSTM forward, in cache and TLB misses). Not past a batch of
    // 32, where the per-step product reads its weights once per column
    // tile (h512 mb128 LSTM forward: 192 ms with it, 152 ms with one
    // product over every step; PyTorch 135-167 ms).
    let per_step = input_product_per_step(shape, l);
    // At a batch of one the product over every step comes out step by step
    // (`[t][gh]`: its rows are the columns, no gather), so a `W_ih` too
    // large for the cache beside `W_hh` is read once, not at every step.
    let rows = rows_input_product(shape, l);
    let p_ih = if pack && (per_step || (p_hh.is_some() && mb <= 32 && !rows)) {
        pack_input_for_steps(isa, &w.w_ih, gates, h, in_f, mb, p_hh, packed_ih)
    } else {
        None
    };
    // The workspace's `w_t` is sized for the layers that take this path.
    debug_assert!(!rows || (p_ih.is_none() && !per_step));
    let per_step = per_step || p_ih.is_some();
    if per_step {
        for k in 0..t {
            let x_k = &input[k * mb * in_f..][..mb * in_f];
            transpose(
                isa,
                x_k,
                mb,
                in_f,
                &mut scratch[k * in_f * mb..][..in_f * mb],
            );
        }
    } else if rows {
        // `[t][gh] = X·W_ihᵀ`. Given `W_ih` itself, the `gemm` crate
        // packs it for every pass, which took more of the pass than its
        // micro-kernel (h256 LSTM over 50 steps, 2 threads: 14% of the
        // samples against 10%); on AVX-512 it is transposed first (about
        // 6%), and the crate reads the rows as they are (ABBA,
        // results/reference/cpu-rnn-small/abba-wih-t-618aab1-5a3c6a3.txt:
        // LSTM 1.02x at h256, 1.18x at h512; GRU 1.14x, 1.26x). The tiled
        // transpose on other ISAs cost more than the crate's packing (0.97x
        // with AVX2 kernels).
        let wt = &mut w_t[..gh * in_f];
        let (b, b_transposed) = match transpose_avx512(isa, &w.w_ih, gh, in_f, wt) {
            true => (&*wt, false),
            false => (&w.w_ih[..], true),
        };
        gemm(
            isa,
            tb,
            gh,
            in_f,
            &input[..tb * in_f],
            false,
            b,
            b_transposed,
            &mut set.dgx,
            false,
        );
    } else if isa == Isa::Avx512 {
        // `X` transposed once (`[in][t·mb]`, in `scratch`, free until the
        // steps), then the GEMM with no packing: the `gemm` crate, given
        // `X` itself, packed it at 320-350 GFLOP/s where this runs at
        // 400-460 with the transpose (2 threads, Zen 5: 4096x3200x1024,
        // 4096x400x1024, 2048x3200x512 1.2-1.4x, 6144x400x1536 1.0-1.1x;
        // DeepBench's h1024 LSTM forwards 1.16-1.19x, ABBA). Not measured
        // with AVX2 kernels, whose tiles are a quarter the size.
        let xt = &mut scratch[..in_f * tb];
        transpose(isa, &input[..tb * in_f], tb, in_f, xt);
        rows_gemm(isa, gh, tb, in_f, &w.w_ih, xt, &mut set.dgx, false);
    } else {
        gemm(
            isa,
            gh,
            tb,
            in_f,
            &w.w_ih,
            false,
            &input[..tb * in_f],
            true,
            &mut set.dgx,
            false,
        );
    }
    // Row q's bias (the GRU adds its b_hh to the hidden product instead:
    // b_hn is multiplied by r), summed once per layer and direction here
    // rather than per step and row.
    for (q, b) in bias.iter_mut().enumerate() {
        *b = w.b_ih[q] + if gru { 0.0 } else { w.b_hh[q] };
    }
    let bias = &*bias;
    // A small layer's steps on a team of threads, each owning the same
    // hidden units at every step (see `team_steps`).
    if let Some(size) = team_steps::team_size(shape, p_hh, !per_step || p_ih.is_some()) {
        let input = match p_ih {
            Some(packed) => StepInput::PerStep {
                packed,
                xt: &scratch[..t * in_f * mb],
                in_f,
            },
            None if rows => StepInput::Rows(&set.dgx[..]),
            None => StepInput::Columns(&set.dgx[..]),
        };
        let p_hh = p_hh.expect("team_size needs packed weights");
        team_steps::forward(
            isa,
            shape,
            reversed,
            size,
            input,
            p_hh,
            bias,
            &w.b_hh,
            [&mut set.gates, &mut set.h, &mut set.aux, hproj],
            h0,
            c0,
        );
        return;
    }
    let xw = &mut set.dgx;
    let mut prev: Option<usize> = None;
    for k in steps(t, reversed) {
        let pre = &mut set.gates[k * row..][..row];
        // Step k's input product as `[gh][mb]`, with the biases.
        if per_step {
            let xt = &scratch[k * in_f * mb..][..in_f * mb];
            step_gemm(isa, gh, mb, in_f, &w.w_ih, p_ih, xt, pre, false);
            crate::on_isa!(isa, {
                for (q, dst) in pre.chunks_mut(mb).enumerate() {
                    let b = bias[q];
                    for d in dst {
                        *d += b;
                    }
                }
            });
        } else if rows {
            // Step k's row of `[t][gh]` (a batch of one).
            for (q, d) in pre.iter_mut().enumerate() {
                *d = xw[k * gh + q] + bias[q];
            }
        } else {
            // Step k's columns of `[gh][t·mb]`.
            crate::on_isa!(isa, {
                for (q, dst) in pre.chunks_mut(mb).enumerate() {
                    let b = bias[q];
                    for (d, &v) in dst.iter_mut().zip(&xw[q * tb + k * mb..][..mb]) {
                        *d = v + b;
                    }
                }
            });
        }
        let (h_prev, h_out) = split_rows(&mut set.h, prev, k, state, h0);
        match shape.cell {
            Cell::Gru => {
                step_gemm(isa, gh, mb, h, &w.w_hh, p_hh, h_prev, hproj, false);
                add_rows(isa, hproj, mb, &w.b_hh);
                let hn = &mut set.aux[k * state..][..state];
                gates::gru_fwd(isa, state, pre, hproj, h_prev, hn, h_out);
            }
            Cell::Lstm => {
                step_gemm(isa, gh, mb, h, &w.w_hh, p_hh, h_prev, pre, true);
                let (c_prev, c_out) = split_rows(&mut set.aux, prev, k, state, c0);
                gates::lstm_fwd(isa, state, pre, c_prev, c_out, h_out);
            }
            Cell::RnnRelu | Cell::RnnTanh => {
                step_gemm(isa, gh, mb, h, &w.w_hh, p_hh, h_prev, pre, true);
                gates::rnn_fwd(isa, shape.cell == Cell::RnnRelu, pre, h_out);
            }
        }
        prev = Some(k);
    }
}
