//! The elementwise half of a recurrent step: one fused pass per step over
//! a batch of gate pre-activations, forward and backward, for each cell.
//! The loops are plain slices that LLVM vectorises, compiled for the ISA
//! chosen at run time ([`crate::on_isa!`]); the exponential is a
//! polynomial (Cephes' `expf`) so that it vectorises too, where `f32::exp`
//! would be a scalar library call.
//!
//! A step's values are laid out `[feature][mb]` (the layout in which the
//! recurrent GEMMs run fastest, see [`super`]), so each gate is one slab
//! of `n = hidden·mb` values and the pass is elementwise over the slabs,
//! split in ranges across threads. Gate order is PyTorch's: LSTM
//! `i, f, g, o`; GRU `r, z, n`.

use crate::Isa;
use rayon::prelude::*;

/// Values per parallel task: a step's pass of fewer runs on the calling
/// thread.
const PAR_MIN: usize = 1 << 14;

/// `a·b + c`, as the ISA runs it best: one fused instruction where the
/// ISA has FMA ([`Fused`]; the gate passes run 1.3x faster on AVX-512 for
/// it), a multiply and an add where it has not ([`Split`]: `mul_add`
/// without FMA hardware is a library call).
pub(super) trait MulAdd {
    fn fma(a: f32, b: f32, c: f32) -> f32;
}

pub(super) struct Fused;
pub(super) struct Split;

impl MulAdd for Fused {
    #[inline(always)]
    fn fma(a: f32, b: f32, c: f32) -> f32 {
        a.mul_add(b, c)
    }
}

impl MulAdd for Split {
    #[inline(always)]
    fn fma(a: f32, b: f32, c: f32) -> f32 {
        a * b + c
    }
}

/// Runs `$body` (an expression naming the type `$m`) compiled for `isa`
/// ([`crate::on_isa!`]) with `$m` the [`MulAdd`] that ISA runs best:
/// [`Fused`] only where `on_isa!` does compile for an ISA with FMA.
macro_rules! on_isa_fma {
    ($isa:expr, $m:ident, $body:expr) => {{
        let isa: Isa = $isa;
        let fma = isa != Isa::Scalar && isa.is_supported();
        crate::on_isa!(isa, {
            if fma {
                type $m = Fused;
                $body
            } else {
                type $m = Split;
                $body
            }
        })
    }};
}

/// `e^x` for `x` in about ±88 (clamped there), within 2 ulp, its
/// multiply-adds as `M` runs them.
#[inline(always)]
fn exp_with<M: MulAdd>(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // ln 2 split in two, so that k·ln2 is subtracted without rounding.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Keeps 2^k a normal float: k in [-126, 127].
    let x = x.clamp(-87.0, 88.0);
    let k = M::fma(x, LOG2E, 0.5).floor();
    let r = M::fma(-k, LN2_LO, M::fma(-k, LN2_HI, x));
    let mut p = 1.987_569_1e-4f32;
    p = M::fma(p, r, 1.398_199_9e-3);
    p = M::fma(p, r, 8.333_452e-3);
    p = M::fma(p, r, 4.166_579_6e-2);
    p = M::fma(p, r, 1.666_666_5e-1);
    p = M::fma(p, r, 5.000_000_1e-1_f64 as f32);
    let e = M::fma(p * r, r, r) + 1.0;
    // 2^k from k's bits, not `k as i32`: Rust's saturating float-to-int
    // cast does not vectorise (LLVM turns it into a scalar conversion per
    // lane). k is a whole number in [-126, 127], so k + 1.5·2^23 is exact
    // and its low mantissa bits are k + 0x40_0000.
    let kbits = (k + 12_582_912.0).to_bits();
    f32::from_bits((kbits.wrapping_sub(0x4B40_0000).wrapping_add(127)) << 23) * e
}

#[inline(always)]
fn sigmoid_with<M: MulAdd>(x: f32) -> f32 {
    1.0 / (1.0 + exp_with::<M>(-x))
}

#[inline(always)]
fn tanh_with<M: MulAdd>(x: f32) -> f32 {
    1.0 - 2.0 / (exp_with::<M>(2.0 * x) + 1.0)
}

/// Values per block of a gate pass. A block runs as a few short loops,
/// one activation over all its values and then the next, instead of one
/// loop with each cell's whole chain (an LSTM cell's is five exponentials
/// and divisions long, about 160 cycles): the out-of-order core cannot
/// hold enough of those chains to overlap them, while each short loop's
/// iterations are independent. LSTM forward gate pass on the Zen 5, 512
/// values, AVX-512: 2.4 ns a value as one loop, 1.6 in blocks of 64, 1.2
/// with [`Fused`] as well, 1.05 in blocks of 128. Over 2048 values
/// (`lstm_gate_pass_speed`), before and after: AVX-512 1.80 and 0.93 ns,
/// AVX2 3.25 and 1.75.
const BLOCK: usize = 128;

/// The blocks of `0..len`.
fn blocks(len: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    (0..len)
        .step_by(BLOCK)
        .map(move |b| b..(b + BLOCK).min(len))
}

/// Runs `body(range)` over `0..n` in pieces of [`PAR_MIN`] values, in
/// parallel when there is more than one; the bodies write disjoint
/// ranges of the slices they were given through [`Shared`].
fn for_ranges(n: usize, body: impl Fn(std::ops::Range<usize>) + Sync) {
    if n <= PAR_MIN {
        body(0..n);
    } else {
        (0..n.div_ceil(PAR_MIN))
            .into_par_iter()
            .for_each(|k| body(k * PAR_MIN..((k + 1) * PAR_MIN).min(n)));
    }
}

/// A slice handed to parallel tasks (or to the members of a team, see
/// `super::team`) that each read or write a disjoint range of it: the gate
/// passes take their buffers as these, so that one body serves a whole
/// step split in ranges across the pool and one team member's units.
#[derive(Clone, Copy)]
pub(super) struct Shared(*mut f32, usize);
// SAFETY: tasks write disjoint ranges (see `for_ranges` and `super::team`).
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    pub(super) fn new(s: &mut [f32]) -> Shared {
        Shared(s.as_mut_ptr(), s.len())
    }

    /// A view that is only ever read through ([`Shared::get`]).
    pub(super) fn of(s: &[f32]) -> Shared {
        Shared(s.as_ptr().cast_mut(), s.len())
    }

    /// The first value's address.
    pub(super) fn ptr(self) -> *mut f32 {
        self.0
    }

    /// Slab `q` of `len` values.
    pub(super) fn slab(self, q: usize, len: usize) -> Shared {
        assert!((q + 1) * len <= self.1);
        // SAFETY: in bounds (checked).
        Shared(unsafe { self.0.add(q * len) }, len)
    }

    /// # Safety
    /// No other live reference may cover `r` (each task takes its own),
    /// and the buffer must outlive the slice.
    pub(super) unsafe fn range<'a>(self, r: std::ops::Range<usize>) -> &'a mut [f32] {
        assert!(r.end <= self.1);
        // SAFETY: in bounds (checked); disjoint per the caller.
        unsafe { std::slice::from_raw_parts_mut(self.0.add(r.start), r.len()) }
    }

    /// # Safety
    /// Nobody may write `r` while the slice lives, and the buffer must
    /// outlive it.
    pub(super) unsafe fn get<'a>(self, r: std::ops::Range<usize>) -> &'a [f32] {
        assert!(r.end <= self.1);
        // SAFETY: in bounds (checked); unwritten per the caller.
        unsafe { std::slice::from_raw_parts(self.0.add(r.start), r.len()) }
    }
}

/// The buffers of one step's gate pass, each a [`Shared`] view; the
/// `*_range` bodies run elements `r` of every gate slab of them.
pub(super) type Views<const N: usize> = [Shared; N];

/// LSTM forward for one step, the step's values laid out `[feature][mb]`
/// (`n = h·mb` per gate): `pre` (the input's and the hidden state's
/// products and both biases, gates `i, f, g, o` one after another) becomes
/// the activated gates; `c = f·c_prev + i·g` and `h = o·tanh(c)`.
pub fn lstm_fwd(isa: Isa, n: usize, pre: &mut [f32], c_prev: &[f32], c: &mut [f32], h: &mut [f32]) {
    let v = [
        Shared::new(pre),
        Shared::of(c_prev),
        Shared::new(c),
        Shared::new(h),
    ];
    // SAFETY: each range is this task's alone.
    for_ranges(n, |r| unsafe { lstm_fwd_range(isa, n, v, r) });
}

/// [`lstm_fwd`] on elements `r` of each slab: views `[pre, c_prev, c, h]`.
///
/// # Safety
/// Nobody else touches elements `r` of the views meanwhile.
pub(super) unsafe fn lstm_fwd_range(isa: Isa, n: usize, v: Views<4>, r: std::ops::Range<usize>) {
    let [pre, c_prev, c, h] = v;
    let (gi, gf, gg, go) = (
        pre.slab(0, n).range(r.clone()),
        pre.slab(1, n).range(r.clone()),
        pre.slab(2, n).range(r.clone()),
        pre.slab(3, n).range(r.clone()),
    );
    let (cp, c, h) = (c_prev.get(r.clone()), c.range(r.clone()), h.range(r));
    on_isa_fma!(isa, M, {
        for b in blocks(gi.len()) {
            let (gi, gf, gg, go) = (
                &mut gi[b.clone()],
                &mut gf[b.clone()],
                &mut gg[b.clone()],
                &mut go[b.clone()],
            );
            let (cp, c, h) = (&cp[b.clone()], &mut c[b.clone()], &mut h[b]);
            for g in [&mut *gi, &mut *gf, &mut *go] {
                for v in g.iter_mut() {
                    *v = sigmoid_with::<M>(*v);
                }
            }
            for v in gg.iter_mut() {
                *v = tanh_with::<M>(*v);
            }
            for j in 0..c.len() {
                c[j] = M::fma(gf[j], cp[j], gi[j] * gg[j]);
            }
            for j in 0..h.len() {
                h[j] = go[j] * tanh_with::<M>(c[j]);
            }
        }
    })
}

/// LSTM backward for one step (`[feature][mb]`, `n = h·mb`). In: the
/// activated gates `act`, `c_prev`, `c`, the gradient `dh` reaching `h`
/// and `dc` reaching `c` from the next step. Out: `dgates` (the
/// pre-activation gradients `di, df, dg, do`) and, in place of `dc`, the
/// gradient reaching `c_prev`.
#[allow(clippy::too_many_arguments)]
pub fn lstm_bwd(
    isa: Isa,
    n: usize,
    act: &[f32],
    c_prev: &[f32],
    c: &[f32],
    dh: &[f32],
    dc: &mut [f32],
    dgates: &mut [f32],
) {
    let v = [
        Shared::of(act),
        Shared::of(c_prev),
        Shared::of(c),
        Shared::of(dh),
        Shared::new(dc),
        Shared::new(dgates),
    ];
    // SAFETY: each range is this task's alone.
    for_ranges(n, |r| unsafe { lstm_bwd_range(isa, n, v, r) });
}

/// [`lstm_bwd`] on elements `r`: views `[act, c_prev, c, dh, dc, dgates]`.
///
/// # Safety
/// As [`lstm_fwd_range`].
pub(super) unsafe fn lstm_bwd_range(isa: Isa, n: usize, v: Views<6>, r: std::ops::Range<usize>) {
    let [act, c_prev, c, dh, dc, dgates] = v;
    let (ai, af, ag, ao) = (
        act.slab(0, n).get(r.clone()),
        act.slab(1, n).get(r.clone()),
        act.slab(2, n).get(r.clone()),
        act.slab(3, n).get(r.clone()),
    );
    let (di, df, dgg, dout) = (
        dgates.slab(0, n).range(r.clone()),
        dgates.slab(1, n).range(r.clone()),
        dgates.slab(2, n).range(r.clone()),
        dgates.slab(3, n).range(r.clone()),
    );
    let (cp, c, dh) = (c_prev.get(r.clone()), c.get(r.clone()), dh.get(r.clone()));
    let dc = dc.range(r);
    on_isa_fma!(isa, M, {
        // One tanh per cell: a short enough chain to overlap as it is.
        for j in 0..di.len() {
            let (i, f, g, o) = (ai[j], af[j], ag[j], ao[j]);
            let tc = tanh_with::<M>(c[j]);
            let dcj = dh[j] * o * (1.0 - tc * tc) + dc[j];
            dout[j] = dh[j] * tc * o * (1.0 - o);
            di[j] = dcj * g * i * (1.0 - i);
            df[j] = dcj * cp[j] * f * (1.0 - f);
            dgg[j] = dcj * i * (1.0 - g * g);
            dc[j] = dcj * f;
        }
    })
}

/// GRU forward for one step (`[feature][mb]`, `n = h·mb`; PyTorch's form,
/// `n = tanh(x_n + r·(W_hn h + b_hn))`). `pre` holds the input's product
/// with `b_ih` (gates `r, z, n`) and becomes the activated gates; `hproj`
/// is the hidden state's product with `b_hh`, whose `n` part is kept in
/// `hn` for the backward; `h = (1 - z)·n + z·h_prev`.
pub fn gru_fwd(
    isa: Isa,
    n: usize,
    pre: &mut [f32],
    hproj: &[f32],
    h_prev: &[f32],
    hn: &mut [f32],
    h: &mut [f32],
) {
    let v = [
        Shared::new(pre),
        Shared::of(hproj),
        Shared::of(h_prev),
        Shared::new(hn),
        Shared::new(h),
    ];
    // SAFETY: each range is this task's alone.
    for_ranges(n, |r| unsafe { gru_fwd_range(isa, n, v, r) });
}

/// [`gru_fwd`] on elements `r`: views `[pre, hproj, h_prev, hn, h]`.
///
/// # Safety
/// As [`lstm_fwd_range`].
pub(super) unsafe fn gru_fwd_range(isa: Isa, n: usize, v: Views<5>, r: std::ops::Range<usize>) {
    let [pre, hproj, h_prev, hn, h] = v;
    let (gr, gz, gn) = (
        pre.slab(0, n).range(r.clone()),
        pre.slab(1, n).range(r.clone()),
        pre.slab(2, n).range(r.clone()),
    );
    let (pr, pz, pn) = (
        hproj.slab(0, n).get(r.clone()),
        hproj.slab(1, n).get(r.clone()),
        hproj.slab(2, n).get(r.clone()),
    );
    let (hp, hn, h) = (h_prev.get(r.clone()), hn.range(r.clone()), h.range(r));
    on_isa_fma!(isa, M, {
        for b in blocks(gr.len()) {
            let (gr, gz, gn) = (&mut gr[b.clone()], &mut gz[b.clone()], &mut gn[b.clone()]);
            let (pr, pz, pn) = (&pr[b.clone()], &pz[b.clone()], &pn[b.clone()]);
            let (hp, hn, h) = (&hp[b.clone()], &mut hn[b.clone()], &mut h[b]);
            for (g, &p) in gr.iter_mut().zip(pr) {
                *g = sigmoid_with::<M>(*g + p);
            }
            for (g, &p) in gz.iter_mut().zip(pz) {
                *g = sigmoid_with::<M>(*g + p);
            }
            for j in 0..gn.len() {
                gn[j] = tanh_with::<M>(M::fma(gr[j], pn[j], gn[j]));
            }
            hn.copy_from_slice(pn);
            for j in 0..h.len() {
                let (z, nn) = (gz[j], gn[j]);
                h[j] = M::fma(z, hp[j], (1.0 - z) * nn);
            }
        }
    })
}

/// GRU backward for one step (`[feature][mb]`, `n = h·mb`). In: the
/// activated `r, z, n` (`act`), the saved `hn`, `h_prev` and `dh`. Out:
/// the input side's pre-activation gradients `dgx` (`dr, dz, dn`), the
/// hidden side's `dgh` (`dr, dz, r·dn`), and `dh_prev`'s direct part
/// `dh·z`.
#[allow(clippy::too_many_arguments)]
pub fn gru_bwd(
    isa: Isa,
    n: usize,
    act: &[f32],
    hn: &[f32],
    h_prev: &[f32],
    dh: &[f32],
    dgx: &mut [f32],
    dgh: &mut [f32],
    dh_prev: &mut [f32],
) {
    let v = [
        Shared::of(act),
        Shared::of(hn),
        Shared::of(h_prev),
        Shared::of(dh),
        Shared::new(dgx),
        Shared::new(dgh),
        Shared::new(dh_prev),
    ];
    // SAFETY: each range is this task's alone.
    for_ranges(n, |r| unsafe { gru_bwd_range(isa, n, v, r) });
}

/// [`gru_bwd`] on elements `r`: views `[act, hn, h_prev, dh, dgx, dgh,
/// dh_prev]`.
///
/// # Safety
/// As [`lstm_fwd_range`].
pub(super) unsafe fn gru_bwd_range(isa: Isa, n: usize, v: Views<7>, r: std::ops::Range<usize>) {
    let [act, hn, h_prev, dh, dgx, dgh, dh_prev] = v;
    let (ar, az, an) = (
        act.slab(0, n).get(r.clone()),
        act.slab(1, n).get(r.clone()),
        act.slab(2, n).get(r.clone()),
    );
    let (xr, xz, xn) = (
        dgx.slab(0, n).range(r.clone()),
        dgx.slab(1, n).range(r.clone()),
        dgx.slab(2, n).range(r.clone()),
    );
    let (hr, hz, hnn) = (
        dgh.slab(0, n).range(r.clone()),
        dgh.slab(1, n).range(r.clone()),
        dgh.slab(2, n).range(r.clone()),
    );
    let (hn, hp, dh) = (hn.get(r.clone()), h_prev.get(r.clone()), dh.get(r.clone()));
    let dhp = dh_prev.range(r);
    crate::on_isa!(isa, {
        for j in 0..xr.len() {
            let (rr, z, nn) = (ar[j], az[j], an[j]);
            let d = dh[j];
            let dn = d * (1.0 - z) * (1.0 - nn * nn);
            let dz = d * (hp[j] - nn) * z * (1.0 - z);
            let dr = dn * hn[j] * rr * (1.0 - rr);
            xr[j] = dr;
            xz[j] = dz;
            xn[j] = dn;
            hr[j] = dr;
            hz[j] = dz;
            hnn[j] = dn * rr;
            dhp[j] = d * z;
        }
    })
}

/// Vanilla RNN forward for one step: `h = act(pre)` (ReLU or tanh), `pre`
/// holding both products and both biases.
pub fn rnn_fwd(isa: Isa, relu: bool, pre: &[f32], h: &mut [f32]) {
    let v = [Shared::of(pre), Shared::new(h)];
    // SAFETY: each range is this task's alone.
    for_ranges(pre.len(), |r| unsafe { rnn_fwd_range(isa, relu, v, r) });
}

/// [`rnn_fwd`] on elements `r`: views `[pre, h]`.
///
/// # Safety
/// As [`lstm_fwd_range`].
pub(super) unsafe fn rnn_fwd_range(isa: Isa, relu: bool, v: Views<2>, r: std::ops::Range<usize>) {
    let (pre, h) = (v[0].get(r.clone()), v[1].range(r));
    on_isa_fma!(isa, M, {
        if relu {
            for (h, &p) in h.iter_mut().zip(pre) {
                *h = p.max(0.0);
            }
        } else {
            for (h, &p) in h.iter_mut().zip(pre) {
                *h = tanh_with::<M>(p);
            }
        }
    })
}

/// Vanilla RNN backward for one step: `dpre = dh·act'(h)`.
pub fn rnn_bwd(isa: Isa, relu: bool, h: &[f32], dh: &[f32], dpre: &mut [f32]) {
    let v = [Shared::of(h), Shared::of(dh), Shared::new(dpre)];
    // SAFETY: each range is this task's alone.
    for_ranges(h.len(), |r| unsafe { rnn_bwd_range(isa, relu, v, r) });
}

/// [`rnn_bwd`] on elements `r`: views `[h, dh, dpre]`.
///
/// # Safety
/// As [`lstm_fwd_range`].
pub(super) unsafe fn rnn_bwd_range(isa: Isa, relu: bool, v: Views<3>, r: std::ops::Range<usize>) {
    let (h, dh, dp) = (v[0].get(r.clone()), v[1].get(r.clone()), v[2].range(r));
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_sigmoid_and_tanh_are_within_a_few_ulp_of_std() {
        within_a_few_ulp::<Split>();
        within_a_few_ulp::<Fused>();
    }

    fn within_a_few_ulp<M: MulAdd>() {
        let mut worst = [0f64; 3];
        for k in -40_000..=40_000 {
            let x = k as f32 * 2.0e-3; // -80 .. 80
            let e = (exp_with::<M>(x) as f64 - (x as f64).exp()).abs() / (x as f64).exp();
            worst[0] = worst[0].max(e);
            let s = 1.0 / (1.0 + (-(x as f64)).exp());
            worst[1] = worst[1].max((sigmoid_with::<M>(x) as f64 - s).abs());
            worst[2] = worst[2].max((tanh_with::<M>(x) as f64 - (x as f64).tanh()).abs());
        }
        assert!(worst[0] < 4e-7, "exp relative error {}", worst[0]);
        assert!(worst[1] < 2e-7, "sigmoid absolute error {}", worst[1]);
        assert!(worst[2] < 3e-7, "tanh absolute error {}", worst[2]);
        assert_eq!(exp_with::<M>(-1000.0), exp_with::<M>(-87.0));
        assert!(exp_with::<M>(1000.0).is_finite());
        assert_eq!(tanh_with::<M>(50.0), 1.0);
        assert_eq!(tanh_with::<M>(-50.0), -1.0);
    }
}

/// Nanoseconds per element of the LSTM forward gate pass, on the detected
/// ISA or `CNNBENCH_ISA`'s:
/// `cargo test -p cnnbench-kernels --release lstm_gate_pass_speed -- --ignored --nocapture`.
#[cfg(test)]
#[test]
#[ignore]
fn lstm_gate_pass_speed() {
    let n = 2048;
    let isa = std::env::var("CNNBENCH_ISA")
        .ok()
        .and_then(|v| Isa::parse(&v))
        .filter(|i| i.is_supported())
        .unwrap_or_else(Isa::detect);
    let mut pre = vec![0.3f32; 4 * n];
    let (cp, mut c, mut h) = (vec![0.1f32; n], vec![0f32; n], vec![0f32; n]);
    let reps = 20_000;
    let t0 = crate::clock::Stopwatch::start();
    for r in 0..reps {
        pre[r % (4 * n)] = 0.3;
        lstm_fwd(isa, n, &mut pre, &cp, &mut c, &mut h);
    }
    let ns = t0.elapsed_s() * 1e9 / (reps * n) as f64;
    println!("lstm_fwd {isa}: {ns:.3} ns per element");
}
