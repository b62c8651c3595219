//! The elementwise half of a recurrent step: one fused pass per step over
//! a batch of gate pre-activations, forward and backward, for each cell.
//! The loops are plain slices that LLVM vectorises, compiled for the ISA
//! chosen at run time ([`crate::on_isa!`]); the exponential is a
//! polynomial (Cephes' `expf`) so that it vectorises too, where `f32::exp`
//! would be a scalar library call.
//!
//! Gate order is PyTorch's: LSTM `i, f, g, o`; GRU `r, z, n`. A row of
//! gates is `gates · hidden` values, gate after gate.

use crate::Isa;
use rayon::prelude::*;

/// Gate values per parallel task: below this a step's pass runs on the
/// calling thread.
const PAR_MIN: usize = 1 << 15;

/// `e^x` for `x` in about ±88 (clamped there), within 2 ulp.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // ln 2 split in two, so that k·ln2 is subtracted without rounding.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Keeps 2^k a normal float: k in [-126, 127].
    let x = x.clamp(-87.0, 88.0);
    let k = (x * LOG2E + 0.5).floor();
    let r = x - k * LN2_HI - k * LN2_LO;
    let mut p = 1.987_569_1e-4f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 5.000_000_1e-1;
    let e = p * r * r + r + 1.0;
    f32::from_bits(((k as i32 + 127) as u32) << 23) * e
}

#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp(-x))
}

#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    1.0 - 2.0 / (exp(2.0 * x) + 1.0)
}

/// LSTM forward for one step: `pre` (`[mb][4h]`, the input's and the
/// hidden state's products and both biases) becomes the activated gates
/// `i, f, g, o`; `c = f·c_prev + i·g` and `h = o·tanh(c)`.
pub fn lstm_fwd(
    isa: Isa,
    hidden: usize,
    pre: &mut [f32],
    c_prev: &[f32],
    c: &mut [f32],
    h: &mut [f32],
) {
    let body = |pre: &mut [f32], c_prev: &[f32], c: &mut [f32], h: &mut [f32]| {
        crate::on_isa!(isa, {
            let (gi, rest) = pre.split_at_mut(hidden);
            let (gf, rest) = rest.split_at_mut(hidden);
            let (gg, go) = rest.split_at_mut(hidden);
            for j in 0..hidden {
                let i = sigmoid(gi[j]);
                let f = sigmoid(gf[j]);
                let g = tanh(gg[j]);
                let o = sigmoid(go[j]);
                let cj = f * c_prev[j] + i * g;
                gi[j] = i;
                gf[j] = f;
                gg[j] = g;
                go[j] = o;
                c[j] = cj;
                h[j] = o * tanh(cj);
            }
        })
    };
    let g4 = 4 * hidden;
    if pre.len() < PAR_MIN {
        for (((p, cp), c), h) in pre
            .chunks_mut(g4)
            .zip(c_prev.chunks(hidden))
            .zip(c.chunks_mut(hidden))
            .zip(h.chunks_mut(hidden))
        {
            body(p, cp, c, h);
        }
    } else {
        pre.par_chunks_mut(g4)
            .zip(c_prev.par_chunks(hidden))
            .zip(c.par_chunks_mut(hidden))
            .zip(h.par_chunks_mut(hidden))
            .for_each(|(((p, cp), c), h)| body(p, cp, c, h));
    }
}

/// LSTM backward for one step. In: the activated gates `act` (`[mb][4h]`),
/// `c_prev`, `c`, the gradient `dh` reaching `h` (the output's plus the
/// next step's) and `dc` reaching `c` from the next step. Out: `dgates`
/// (the pre-activation gradients `di, df, dg, do`) and, in place of `dc`,
/// the gradient reaching `c_prev`.
pub fn lstm_bwd(
    isa: Isa,
    hidden: usize,
    act: &[f32],
    c_prev: &[f32],
    c: &[f32],
    dh: &[f32],
    dc: &mut [f32],
    dgates: &mut [f32],
) {
    let body = |act: &[f32], cp: &[f32], c: &[f32], dh: &[f32], dc: &mut [f32], dg: &mut [f32]| {
        crate::on_isa!(isa, {
            let (ai, rest) = act.split_at(hidden);
            let (af, rest) = rest.split_at(hidden);
            let (ag, ao) = rest.split_at(hidden);
            let (di, rest) = dg.split_at_mut(hidden);
            let (df, rest) = rest.split_at_mut(hidden);
            let (dgg, dout) = rest.split_at_mut(hidden);
            for j in 0..hidden {
                let (i, f, g, o) = (ai[j], af[j], ag[j], ao[j]);
                let tc = tanh(c[j]);
                let dcj = dh[j] * o * (1.0 - tc * tc) + dc[j];
                dout[j] = dh[j] * tc * o * (1.0 - o);
                di[j] = dcj * g * i * (1.0 - i);
                df[j] = dcj * cp[j] * f * (1.0 - f);
                dgg[j] = dcj * i * (1.0 - g * g);
                dc[j] = dcj * f;
            }
        })
    };
    let g4 = 4 * hidden;
    if act.len() < PAR_MIN {
        for (((((a, cp), c), dh), dc), dg) in act
            .chunks(g4)
            .zip(c_prev.chunks(hidden))
            .zip(c.chunks(hidden))
            .zip(dh.chunks(hidden))
            .zip(dc.chunks_mut(hidden))
            .zip(dgates.chunks_mut(g4))
        {
            body(a, cp, c, dh, dc, dg);
        }
    } else {
        act.par_chunks(g4)
            .zip(c_prev.par_chunks(hidden))
            .zip(c.par_chunks(hidden))
            .zip(dh.par_chunks(hidden))
            .zip(dc.par_chunks_mut(hidden))
            .zip(dgates.par_chunks_mut(g4))
            .for_each(|(((((a, cp), c), dh), dc), dg)| body(a, cp, c, dh, dc, dg));
    }
}

/// GRU forward for one step (PyTorch's form, `n = tanh(x_n + r·(W_hn h +
/// b_hn))`). `pre` holds the input's product with both biases of `r` and
/// `z` and `b_in` (`[mb][3h]`) and becomes the activated `r, z, n`;
/// `hproj` is the hidden state's product with `b_hh` added, whose `n` part
/// is kept in `hn` for the backward; `h = (1 - z)·n + z·h_prev`.
pub fn gru_fwd(
    isa: Isa,
    hidden: usize,
    pre: &mut [f32],
    hproj: &[f32],
    h_prev: &[f32],
    hn: &mut [f32],
    h: &mut [f32],
) {
    let body = |pre: &mut [f32], hp: &[f32], hprev: &[f32], hn: &mut [f32], h: &mut [f32]| {
        crate::on_isa!(isa, {
            let (gr, rest) = pre.split_at_mut(hidden);
            let (gz, gn) = rest.split_at_mut(hidden);
            let (pr, rest) = hp.split_at(hidden);
            let (pz, pn) = rest.split_at(hidden);
            for j in 0..hidden {
                let r = sigmoid(gr[j] + pr[j]);
                let z = sigmoid(gz[j] + pz[j]);
                let n = tanh(gn[j] + r * pn[j]);
                gr[j] = r;
                gz[j] = z;
                gn[j] = n;
                hn[j] = pn[j];
                h[j] = (1.0 - z) * n + z * hprev[j];
            }
        })
    };
    let g3 = 3 * hidden;
    if pre.len() < PAR_MIN {
        for ((((p, hp), hprev), hn), h) in pre
            .chunks_mut(g3)
            .zip(hproj.chunks(g3))
            .zip(h_prev.chunks(hidden))
            .zip(hn.chunks_mut(hidden))
            .zip(h.chunks_mut(hidden))
        {
            body(p, hp, hprev, hn, h);
        }
    } else {
        pre.par_chunks_mut(g3)
            .zip(hproj.par_chunks(g3))
            .zip(h_prev.par_chunks(hidden))
            .zip(hn.par_chunks_mut(hidden))
            .zip(h.par_chunks_mut(hidden))
            .for_each(|((((p, hp), hprev), hn), h)| body(p, hp, hprev, hn, h));
    }
}

/// GRU backward for one step. In: the activated `r, z, n` (`act`), the
/// saved `hn`, `h_prev` and `dh` (the gradient reaching `h`). Out: the
/// input side's pre-activation gradients `dgx` (`dr, dz, dn`), the hidden
/// side's `dgh` (`dr, dz, r·dn`), and `dh_prev`'s direct part `dh·z`.
#[allow(clippy::too_many_arguments)]
pub fn gru_bwd(
    isa: Isa,
    hidden: usize,
    act: &[f32],
    hn: &[f32],
    h_prev: &[f32],
    dh: &[f32],
    dgx: &mut [f32],
    dgh: &mut [f32],
    dh_prev: &mut [f32],
) {
    let body = |act: &[f32],
                hn: &[f32],
                hprev: &[f32],
                dh: &[f32],
                dgx: &mut [f32],
                dgh: &mut [f32],
                dhp: &mut [f32]| {
        crate::on_isa!(isa, {
            let (ar, rest) = act.split_at(hidden);
            let (az, an) = rest.split_at(hidden);
            let (xr, rest) = dgx.split_at_mut(hidden);
            let (xz, xn) = rest.split_at_mut(hidden);
            let (hr, rest) = dgh.split_at_mut(hidden);
            let (hz, hnn) = rest.split_at_mut(hidden);
            for j in 0..hidden {
                let (r, z, n) = (ar[j], az[j], an[j]);
                let d = dh[j];
                let dn = d * (1.0 - z) * (1.0 - n * n);
                let dz = d * (hprev[j] - n) * z * (1.0 - z);
                let dr = dn * hn[j] * r * (1.0 - r);
                xr[j] = dr;
                xz[j] = dz;
                xn[j] = dn;
                hr[j] = dr;
                hz[j] = dz;
                hnn[j] = dn * r;
                dhp[j] = d * z;
            }
        })
    };
    let g3 = 3 * hidden;
    if act.len() < PAR_MIN {
        for ((((((a, hn), hp), dh), x), g), dhp) in act
            .chunks(g3)
            .zip(hn.chunks(hidden))
            .zip(h_prev.chunks(hidden))
            .zip(dh.chunks(hidden))
            .zip(dgx.chunks_mut(g3))
            .zip(dgh.chunks_mut(g3))
            .zip(dh_prev.chunks_mut(hidden))
        {
            body(a, hn, hp, dh, x, g, dhp);
        }
    } else {
        act.par_chunks(g3)
            .zip(hn.par_chunks(hidden))
            .zip(h_prev.par_chunks(hidden))
            .zip(dh.par_chunks(hidden))
            .zip(dgx.par_chunks_mut(g3))
            .zip(dgh.par_chunks_mut(g3))
            .zip(dh_prev.par_chunks_mut(hidden))
            .for_each(|((((((a, hn), hp), dh), x), g), dhp)| body(a, hn, hp, dh, x, g, dhp));
    }
}

/// Vanilla RNN forward for one step: `h = act(pre)` (ReLU or tanh), `pre`
/// holding both products and both biases.
pub fn rnn_fwd(isa: Isa, relu: bool, pre: &[f32], h: &mut [f32]) {
    let body = |pre: &[f32], h: &mut [f32]| {
        crate::on_isa!(isa, {
            if relu {
                for (h, &p) in h.iter_mut().zip(pre) {
                    *h = p.max(0.0);
                }
            } else {
                for (h, &p) in h.iter_mut().zip(pre) {
                    *h = tanh(p);
                }
            }
        })
    };
    if pre.len() < PAR_MIN {
        body(pre, h);
    } else {
        pre.par_chunks(PAR_MIN)
            .zip(h.par_chunks_mut(PAR_MIN))
            .for_each(|(p, h)| body(p, h));
    }
}

/// Vanilla RNN backward for one step: `dpre = dh·act'(h)`.
pub fn rnn_bwd(isa: Isa, relu: bool, h: &[f32], dh: &[f32], dpre: &mut [f32]) {
    let body = |h: &[f32], dh: &[f32], dp: &mut [f32]| {
        crate::on_isa!(isa, {
            if relu {
                for ((dp, &h), &d) in dp.iter_mut().zip(h).zip(dh) {
                    *dp = if h > 0.0 { d } else { 0.0 };
                }
            } else {
                for ((dp, &h), &d) in dp.iter_mut().zip(h).zip(dh) {
                    *dp = d * (1.0 - h * h);
                }
            }
        })
    };
    if h.len() < PAR_MIN {
        body(h, dh, dpre);
    } else {
        h.par_chunks(PAR_MIN)
            .zip(dh.par_chunks(PAR_MIN))
            .zip(dpre.par_chunks_mut(PAR_MIN))
            .for_each(|((h, dh), dp)| body(h, dh, dp));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_sigmoid_and_tanh_are_within_a_few_ulp_of_std() {
        let mut worst = [0f64; 3];
        for k in -40_000..=40_000 {
            let x = k as f32 * 2.0e-3; // -80 .. 80
            let e = (exp(x) as f64 - (x as f64).exp()).abs() / (x as f64).exp();
            worst[0] = worst[0].max(e);
            let s = 1.0 / (1.0 + (-(x as f64)).exp());
            worst[1] = worst[1].max((sigmoid(x) as f64 - s).abs());
            worst[2] = worst[2].max((tanh(x) as f64 - (x as f64).tanh()).abs());
        }
        assert!(worst[0] < 4e-7, "exp relative error {}", worst[0]);
        assert!(worst[1] < 2e-7, "sigmoid absolute error {}", worst[1]);
        assert!(worst[2] < 3e-7, "tanh absolute error {}", worst[2]);
        assert_eq!(exp(-1000.0), exp(-87.0));
        assert!(exp(1000.0).is_finite());
        assert_eq!(tanh(50.0), 1.0);
        assert_eq!(tanh(-50.0), -1.0);
    }
}
