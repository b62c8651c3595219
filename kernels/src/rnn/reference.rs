//! The naive reference: every cell's equations written out per element in
//! f64 (PyTorch's documented forms), forward and back through time, with
//! no GEMM, no fusion and no shared code with the fast path beyond the
//! shapes.

// Index loops mirror the equations; iterator chains would hide them.
#![allow(clippy::needless_range_loop)]

use super::shape::{Cell, Direction, Outputs, RnnShape, Weights};

fn sig(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// What one step keeps for its backward.
#[derive(Clone, Default)]
struct Step {
    h_prev: Vec<f64>,
    c_prev: Vec<f64>,
    /// Activated gates, `[mb][gates·h]`.
    act: Vec<f64>,
    /// GRU: `W_hn h + b_hn`; LSTM: the new cell state.
    aux: Vec<f64>,
    h: Vec<f64>,
}

/// `Σ_k w[j][k]·v[k]` for a row-major `[rows][cols]` matrix.
fn dot_row(w: &[f32], cols: usize, j: usize, v: &[f64]) -> f64 {
    w[j * cols..][..cols]
        .iter()
        .zip(v)
        .map(|(&a, &b)| a as f64 * b)
        .sum()
}

/// Forward and backward of `shape` on `x`, the initial states, the
/// weights and the output gradients.
#[allow(clippy::too_many_arguments)]
pub fn run(
    shape: &RnnShape,
    x: &[f32],
    hx: &[f32],
    cx: &[f32],
    weights: &[Weights],
    dy: &[f32],
    dhy: &[f32],
    dcy: &[f32],
) -> Outputs {
    let (t, mb, h) = (shape.t, shape.mb, shape.hidden);
    let dirs = shape.direction.count();
    let g = shape.cell.gates();
    let lstm = shape.cell == Cell::Lstm;
    let mut res = Outputs {
        hy: vec![0.0; shape.state_len()],
        cy: vec![0.0; shape.state_len()],
        dhx: vec![0.0; shape.state_len()],
        dcx: vec![0.0; shape.state_len()],
        dw: (0..shape.sets())
            .map(|s| Weights::zeros(shape, s))
            .collect(),
        ..Outputs::default()
    };
    // Forward, keeping every layer's input and every step.
    let mut layer_in: Vec<Vec<f64>> = vec![x.iter().map(|&v| v as f64).collect()];
    let mut saved: Vec<Vec<Step>> = Vec::new();
    for l in 0..shape.layers {
        let in_f = shape.layer_input(l);
        let input = &layer_in[l];
        let mut outs = vec![vec![0f64; t * mb * h]; dirs];
        for d in 0..dirs {
            let s = l * dirs + d;
            let w = &weights[s];
            let rev = shape.direction == Direction::Right2Left || d == 1;
            let mut hcur: Vec<f64> = hx[s * mb * h..][..mb * h]
                .iter()
                .map(|&v| v as f64)
                .collect();
            let mut ccur: Vec<f64> = if lstm {
                cx[s * mb * h..][..mb * h]
                    .iter()
                    .map(|&v| v as f64)
                    .collect()
            } else {
                vec![0.0; mb * h]
            };
            let mut steps = vec![Step::default(); t];
            for i in 0..t {
                let k = if rev { t - 1 - i } else { i };
                let mut st = Step {
                    h_prev: hcur.clone(),
                    c_prev: ccur.clone(),
                    act: vec![0.0; mb * g * h],
                    aux: vec![0.0; mb * h],
                    h: vec![0.0; mb * h],
                };
                for b in 0..mb {
                    let xin = &input[(k * mb + b) * in_f..][..in_f];
                    let hp = &hcur[b * h..][..h];
                    // Pre-activations, input and hidden sides apart.
                    let xs = |j: usize| dot_row(&w.w_ih, in_f, j, xin) + w.b_ih[j] as f64;
                    let hs = |j: usize| dot_row(&w.w_hh, h, j, hp) + w.b_hh[j] as f64;
                    for u in 0..h {
                        let a = &mut st.act[b * g * h..][..g * h];
                        let o = b * h + u;
                        match shape.cell {
                            Cell::RnnRelu | Cell::RnnTanh => {
                                let p = xs(u) + hs(u);
                                let v = if shape.cell == Cell::RnnRelu {
                                    p.max(0.0)
                                } else {
                                    p.tanh()
                                };
                                a[u] = v;
                                st.h[o] = v;
                            }
                            Cell::Lstm => {
                                let gi = sig(xs(u) + hs(u));
                                let gf = sig(xs(h + u) + hs(h + u));
                                let gg = (xs(2 * h + u) + hs(2 * h + u)).tanh();
                                let go = sig(xs(3 * h + u) + hs(3 * h + u));
                                let c = gf * ccur[o] + gi * gg;
                                a[u] = gi;
                                a[h + u] = gf;
                                a[2 * h + u] = gg;
                                a[3 * h + u] = go;
                                st.aux[o] = c;
                                st.h[o] = go * c.tanh();
                            }
                            Cell::Gru => {
                                let r = sig(xs(u) + hs(u));
                                let z = sig(xs(h + u) + hs(h + u));
                                let hn = hs(2 * h + u);
                                let n = (xs(2 * h + u) + r * hn).tanh();
                                a[u] = r;
                                a[h + u] = z;
                                a[2 * h + u] = n;
                                st.aux[o] = hn;
                                st.h[o] = (1.0 - z) * n + z * hp[u];
                            }
                        }
                    }
                }
                hcur = st.h.clone();
                if lstm {
                    ccur = st.aux.clone();
                }
                outs[d][k * mb * h..][..mb * h].copy_from_slice(&st.h);
                steps[k] = st;
            }
            for (dst, v) in res.hy[s * mb * h..][..mb * h].iter_mut().zip(&hcur) {
                *dst = *v as f32;
            }
            for (dst, v) in res.cy[s * mb * h..][..mb * h].iter_mut().zip(&ccur) {
                *dst = *v as f32;
            }
            saved.push(steps);
        }
        let out_f = shape.output();
        let mut out = vec![0f64; t * mb * out_f];
        for r in 0..t * mb {
            for u in 0..h {
                match shape.direction {
                    Direction::Concat => {
                        out[r * out_f + u] = outs[0][r * h + u];
                        out[r * out_f + h + u] = outs[1][r * h + u];
                    }
                    Direction::Sum => out[r * out_f + u] = outs[0][r * h + u] + outs[1][r * h + u],
                    _ => out[r * out_f + u] = outs[0][r * h + u],
                }
            }
        }
        layer_in.push(out);
    }
    res.y = layer_in[shape.layers].iter().map(|&v| v as f32).collect();
    if !lstm {
        res.cy.clear();
    }

    // Backward, layer by layer from the top.
    let mut dout: Vec<f64> = dy.iter().map(|&v| v as f64).collect();
    for l in (0..shape.layers).rev() {
        let in_f = shape.layer_input(l);
        let out_f = shape.output();
        let mut din = vec![0f64; t * mb * in_f];
        for d in 0..dirs {
            let s = l * dirs + d;
            let w = &weights[s];
            let rev = shape.direction == Direction::Right2Left || d == 1;
            let steps = &saved[s];
            let mut dh: Vec<f64> = dhy[s * mb * h..][..mb * h]
                .iter()
                .map(|&v| v as f64)
                .collect();
            let mut dc: Vec<f64> = if lstm {
                dcy[s * mb * h..][..mb * h]
                    .iter()
                    .map(|&v| v as f64)
                    .collect()
            } else {
                vec![0.0; mb * h]
            };
            let dw = &mut res.dw[s];
            let mut gw_ih = vec![0f64; w.w_ih.len()];
            let mut gw_hh = vec![0f64; w.w_hh.len()];
            let mut gb_ih = vec![0f64; w.b_ih.len()];
            let mut gb_hh = vec![0f64; w.b_hh.len()];
            for i in (0..t).rev() {
                let k = if rev { t - 1 - i } else { i };
                let st = &steps[k];
                let mut dh_prev = vec![0f64; mb * h];
                let mut dc_prev = vec![0f64; mb * h];
                for b in 0..mb {
                    let xin = &layer_in[l][(k * mb + b) * in_f..][..in_f];
                    // Pre-activation gradients, input and hidden sides.
                    let mut gx = vec![0f64; g * h];
                    let mut gh = vec![0f64; g * h];
                    for u in 0..h {
                        let o = b * h + u;
                        let up = match shape.direction {
                            Direction::Concat => dout[(k * mb + b) * out_f + d * h + u],
                            _ => dout[(k * mb + b) * out_f + u],
                        };
                        let dhu = dh[o] + up;
                        let a = &st.act[b * g * h..][..g * h];
                        match shape.cell {
                            Cell::RnnRelu => {
                                let v = if st.h[o] > 0.0 { dhu } else { 0.0 };
                                gx[u] = v;
                                gh[u] = v;
                            }
                            Cell::RnnTanh => {
                                let v = dhu * (1.0 - st.h[o] * st.h[o]);
                                gx[u] = v;
                                gh[u] = v;
                            }
                            Cell::Lstm => {
                                let (gi, gf, gg, go) = (a[u], a[h + u], a[2 * h + u], a[3 * h + u]);
                                let c = st.aux[o];
                                let tc = c.tanh();
                                let dcu = dhu * go * (1.0 - tc * tc) + dc[o];
                                let v = [
                                    dcu * gg * gi * (1.0 - gi),
                                    dcu * st.c_prev[o] * gf * (1.0 - gf),
                                    dcu * gi * (1.0 - gg * gg),
                                    dhu * tc * go * (1.0 - go),
                                ];
                                for (q, v) in v.iter().enumerate() {
                                    gx[q * h + u] = *v;
                                    gh[q * h + u] = *v;
                                }
                                dc_prev[o] = dcu * gf;
                            }
                            Cell::Gru => {
                                let (r, z, n) = (a[u], a[h + u], a[2 * h + u]);
                                let dn = dhu * (1.0 - z) * (1.0 - n * n);
                                let dz = dhu * (st.h_prev[o] - n) * z * (1.0 - z);
                                let dr = dn * st.aux[o] * r * (1.0 - r);
                                gx[u] = dr;
                                gx[h + u] = dz;
                                gx[2 * h + u] = dn;
                                gh[u] = dr;
                                gh[h + u] = dz;
                                gh[2 * h + u] = dn * r;
                                dh_prev[o] += dhu * z;
                            }
                        }
                    }
                    let hp = &st.h_prev[b * h..][..h];
                    for j in 0..g * h {
                        gb_ih[j] += gx[j];
                        gb_hh[j] += gh[j];
                        for q in 0..in_f {
                            gw_ih[j * in_f + q] += gx[j] * xin[q];
                            din[(k * mb + b) * in_f + q] += gx[j] * w.w_ih[j * in_f + q] as f64;
                        }
                        for q in 0..h {
                            gw_hh[j * h + q] += gh[j] * hp[q];
                            dh_prev[b * h + q] += gh[j] * w.w_hh[j * h + q] as f64;
                        }
                    }
                }
                dh = dh_prev;
                dc = dc_prev;
            }
            for (dst, v) in res.dhx[s * mb * h..][..mb * h].iter_mut().zip(&dh) {
                *dst = *v as f32;
            }
            for (dst, v) in res.dcx[s * mb * h..][..mb * h].iter_mut().zip(&dc) {
                *dst = *v as f32;
            }
            let f = |v: Vec<f64>| v.into_iter().map(|x| x as f32).collect::<Vec<f32>>();
            dw.w_ih = f(gw_ih);
            dw.w_hh = f(gw_hh);
            dw.b_ih = f(gb_ih);
            dw.b_hh = f(gb_hh);
        }
        dout = din;
    }
    res.dx = dout.iter().map(|&v| v as f32).collect();
    if !lstm {
        res.dcx.clear();
    }
    res
}
