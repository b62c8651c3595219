//! The three transforms of Winograd's F(4x4, 3x3) (Lavin and Gray, "Fast
//! Algorithms for Convolutional Neural Networks", 2015), on blocks of
//! [`CB`] channels at a time: each channel is one lane, so every line below
//! is one vector operation per 16 channels once compiled for AVX-512
//! (callers run them inside [`crate::on_isa!`]).
//!
//! With the interpolation points 0, ±1, ±2 and ∞, a 6x6 input tile `d` and a
//! 3x3 filter `g` give the 4x4 output tile `Aᵀ[(G g Gᵀ) ⊙ (Bᵀ d B)]A`:
//!
//! ```text
//! Bᵀ = [4  0 -5  0 1 0]    G = [ 1/4     0     0 ]   Aᵀ = [1 1  1 1  1 0]
//!      [0 -4 -4  1 1 0]        [-1/6  -1/6  -1/6 ]        [0 1 -1 2 -2 0]
//!      [0  4 -4 -1 1 0]        [-1/6   1/6  -1/6 ]        [0 1  1 4  4 0]
//!      [0 -2 -1  2 1 0]        [1/24  1/12   1/6 ]        [0 1 -1 8 -8 1]
//!      [0  2 -1 -2 1 0]        [1/24 -1/12   1/6 ]
//!      [0  4  0 -5 0 1]        [ 0     0      1  ]
//! ```
//!
//! 36 products per 16 outputs where the direct convolution does 144.

/// Channels per transform call: the lanes of four AVX-512 vectors.
pub const CB: usize = 64;
/// Input tile side (`m + r - 1`).
pub const ALPHA: usize = 6;
/// Output tile side.
pub const M: usize = 4;
/// Points of the transformed tile, one GEMM each.
pub const XI: usize = ALPHA * ALPHA;

pub type Lanes = [f32; CB];

/// `Bᵀ·v` along one axis: `src[s0 + i·ss]` for `i < 6` into
/// `dst[d0 + i·ds]`.
#[inline(always)]
fn bt(src: &[Lanes], s0: usize, ss: usize, dst: &mut [Lanes], d0: usize, ds: usize) {
    for c in 0..CB {
        let v = |i: usize| src[s0 + i * ss][c];
        let (v0, v1, v2, v3, v4, v5) = (v(0), v(1), v(2), v(3), v(4), v(5));
        dst[d0][c] = 4.0 * v0 - 5.0 * v2 + v4;
        dst[d0 + ds][c] = -4.0 * (v1 + v2) + v3 + v4;
        dst[d0 + 2 * ds][c] = 4.0 * (v1 - v2) - v3 + v4;
        dst[d0 + 3 * ds][c] = 2.0 * (v3 - v1) - v2 + v4;
        dst[d0 + 4 * ds][c] = 2.0 * (v1 - v3) - v2 + v4;
        dst[d0 + 5 * ds][c] = 4.0 * v1 - 5.0 * v3 + v5;
    }
}

/// `Aᵀ·v` along one axis: six points in, four outputs out.
#[inline(always)]
fn at(src: &[Lanes], s0: usize, ss: usize, dst: &mut [Lanes], d0: usize, ds: usize) {
    for c in 0..CB {
        let v = |i: usize| src[s0 + i * ss][c];
        let (v0, v1, v2, v3, v4, v5) = (v(0), v(1), v(2), v(3), v(4), v(5));
        let (p12, m12, p34, m34) = (v1 + v2, v1 - v2, v3 + v4, v3 - v4);
        dst[d0][c] = v0 + p12 + p34;
        dst[d0 + ds][c] = m12 + 2.0 * m34;
        dst[d0 + 2 * ds][c] = p12 + 4.0 * p34;
        dst[d0 + 3 * ds][c] = m12 + 8.0 * m34 + v5;
    }
}

/// `G·v` along one axis: three taps in, six points out.
#[inline(always)]
fn g(src: &[Lanes], s0: usize, ss: usize, dst: &mut [Lanes], d0: usize, ds: usize) {
    for c in 0..CB {
        let v = |i: usize| src[s0 + i * ss][c];
        let (v0, v1, v2) = (v(0), v(1), v(2));
        let even = v0 + v2;
        dst[d0][c] = 0.25 * v0;
        dst[d0 + ds][c] = -(even + v1) * (1.0 / 6.0);
        dst[d0 + 2 * ds][c] = -(even - v1) * (1.0 / 6.0);
        let quarter = v0 * (1.0 / 24.0) + v2 * (1.0 / 6.0);
        dst[d0 + 3 * ds][c] = quarter + v1 * (1.0 / 12.0);
        dst[d0 + 4 * ds][c] = quarter - v1 * (1.0 / 12.0);
        dst[d0 + 5 * ds][c] = v2;
    }
}

/// `V = Bᵀ d B` of one 6x6 tile, `d[y·6 + x]` to `v[i·6 + j]`; `t` is
/// scratch (the caller's, so that it is not zeroed per tile).
#[inline(always)]
pub fn input(d: &[Lanes; XI], v: &mut [Lanes; XI], t: &mut [Lanes; XI]) {
    for y in 0..ALPHA {
        // Along x: row y of d into row y of t.
        bt(d, y * ALPHA, 1, t, y * ALPHA, 1);
    }
    for j in 0..ALPHA {
        // Along y: column j of t into column j of v.
        bt(t, j, ALPHA, v, j, ALPHA);
    }
}

/// `Y = Aᵀ m A` of one tile, `m[i·6 + j]` to `y[a·4 + b]`; `t` is scratch.
#[inline(always)]
pub fn output(m: &[Lanes; XI], y: &mut [Lanes; M * M], t: &mut [Lanes; M * ALPHA]) {
    for j in 0..ALPHA {
        // Along i: column j of m into column j of t (4 rows of 6).
        at(m, j, ALPHA, t, j, ALPHA);
    }
    for a in 0..M {
        // Along j: row a of t into row a of y.
        at(t, a * ALPHA, 1, y, a * M, 1);
    }
}

/// `U = G w Gᵀ` of one 3x3 filter, `w[r·3 + s]` to `u[i·6 + j]`; `t` is
/// scratch (the caller's, so that it is not zeroed per row).
#[inline(always)]
pub fn filter(w: &[Lanes; 9], u: &mut [Lanes; XI], t: &mut [Lanes; ALPHA * 3]) {
    for s in 0..3 {
        // Along r: column s of w into column s of t (6 rows of 3).
        g(w, s, 3, t, s, 3);
    }
    for i in 0..ALPHA {
        // Along s: row i of t into row i of u.
        g(t, i * 3, 1, u, i * ALPHA, 1);
    }
}

/// `A·v` along one axis (`A = (Aᵀ)ᵀ`, 6x4): four values in, six points out.
#[inline(always)]
fn a(src: &[Lanes], s0: usize, ss: usize, dst: &mut [Lanes], d0: usize, ds: usize) {
    for c in 0..CB {
        let v = |i: usize| src[s0 + i * ss][c];
        let (v0, v1, v2, v3) = (v(0), v(1), v(2), v(3));
        let (e, o) = (v0 + v2, v1 + v3);
        let (e4, o2) = (v0 + 4.0 * v2, 2.0 * v1 + 8.0 * v3);
        dst[d0][c] = v0;
        dst[d0 + ds][c] = e + o;
        dst[d0 + 2 * ds][c] = e - o;
        dst[d0 + 3 * ds][c] = e4 + o2;
        dst[d0 + 4 * ds][c] = e4 - o2;
        dst[d0 + 5 * ds][c] = v3;
    }
}

/// `Gᵀ·v` along one axis: six points in, three taps out.
#[inline(always)]
fn gt(src: &[Lanes], s0: usize, ss: usize, dst: &mut [Lanes], d0: usize, ds: usize) {
    for c in 0..CB {
        let v = |i: usize| src[s0 + i * ss][c];
        let (v0, v1, v2, v3, v4, v5) = (v(0), v(1), v(2), v(3), v(4), v(5));
        let (p12, m12, p34, m34) = (v1 + v2, v2 - v1, v3 + v4, v3 - v4);
        dst[d0][c] = 0.25 * v0 - p12 * (1.0 / 6.0) + p34 * (1.0 / 24.0);
        dst[d0 + ds][c] = m12 * (1.0 / 6.0) + m34 * (1.0 / 12.0);
        dst[d0 + 2 * ds][c] = (p34 - p12) * (1.0 / 6.0) + v5;
    }
}

/// The backward-filter's gradient transform `H = A h Aᵀ` of one 4x4 tile
/// of diff_dst, `h[a·4 + b]` to `out[i·6 + j]`; `t` is scratch. (With it,
/// `Gᵀ[(A h Aᵀ) ⊙ (Bᵀ d B)]G` is the 3x3 correlation of a 6x6 input tile
/// `d` with `h`: F(3x3, 4x4), the same points.)
#[inline(always)]
pub fn grad(h: &[Lanes; M * M], out: &mut [Lanes; XI], t: &mut [Lanes; M * ALPHA]) {
    for r in 0..M {
        // Along b: row r of h into row r of t (4 rows of 6).
        a(h, r * M, 1, t, r * ALPHA, 1);
    }
    for j in 0..ALPHA {
        // Along a: column j of t into column j of out.
        a(t, j, ALPHA, out, j, ALPHA);
    }
}

/// The backward-filter's inverse `dw = Gᵀ x G` of one point-wise sum,
/// `x[i·6 + j]` to `w[r·3 + s]`; `t` is scratch.
#[inline(always)]
pub fn filter_grad(x: &[Lanes; XI], w: &mut [Lanes; 9], t: &mut [Lanes; 3 * ALPHA]) {
    for j in 0..ALPHA {
        // Along i: column j of x into column j of t (3 rows of 6).
        gt(x, j, ALPHA, t, j, ALPHA);
    }
    for r in 0..3 {
        // Along j: row r of t into row r of w.
        gt(t, r * ALPHA, 1, w, r * 3, 1);
    }
}

/// `Bᵀ·v` along one axis, from six rows read in place to six rows written
/// in place. Separate reference arguments, so that LLVM knows (after
/// inlining too) that no output row overlaps an input and vectorises the
/// lanes without run-time overlap checks.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn bt_rows(
    s: [&Lanes; ALPHA],
    o0: &mut Lanes,
    o1: &mut Lanes,
    o2: &mut Lanes,
    o3: &mut Lanes,
    o4: &mut Lanes,
    o5: &mut Lanes,
) {
    let [s0, s1, s2, s3, s4, s5] = s;
    for c in 0..CB {
        let (v0, v1, v2, v3, v4, v5) = (s0[c], s1[c], s2[c], s3[c], s4[c], s5[c]);
        o0[c] = 4.0 * v0 - 5.0 * v2 + v4;
        o1[c] = -4.0 * (v1 + v2) + v3 + v4;
        o2[c] = 4.0 * (v1 - v2) - v3 + v4;
        o3[c] = 2.0 * (v3 - v1) - v2 + v4;
        o4[c] = 2.0 * (v1 - v3) - v2 + v4;
        o5[c] = 4.0 * v1 - 5.0 * v3 + v5;
    }
}

/// `Aᵀ·v + add` along one axis, rows in place as [`bt_rows`].
#[inline(always)]
fn at_rows(
    s: [&Lanes; ALPHA],
    add: &Lanes,
    o0: &mut Lanes,
    o1: &mut Lanes,
    o2: &mut Lanes,
    o3: &mut Lanes,
) {
    let [s0, s1, s2, s3, s4, s5] = s;
    for c in 0..CB {
        let (v0, v1, v2, v3, v4, v5) = (s0[c], s1[c], s2[c], s3[c], s4[c], s5[c]);
        let (p12, m12, p34, m34) = (v1 + v2, v1 - v2, v3 + v4, v3 - v4);
        o0[c] = v0 + p12 + p34 + add[c];
        o1[c] = m12 + 2.0 * m34 + add[c];
        o2[c] = p12 + 4.0 * p34 + add[c];
        o3[c] = m12 + 8.0 * m34 + v5 + add[c];
    }
}

/// [`input`] read and written in place: `d[y·6 + x]` is point (y, x) of
/// the tile (a row of zeros for the padding), `v[i·6 + j]` where point
/// (i, j) of V goes.
///
/// # Safety
/// The 36 rows at `v` must be writable, distinct, and overlap none of `d`
/// or `t`.
#[inline(always)]
pub unsafe fn input_in_place(d: &[&Lanes; XI], v: &[*mut Lanes; XI], t: &mut [Lanes; XI]) {
    for y in 0..ALPHA {
        // Along x: row y of d into row y of t.
        let row: [&Lanes; ALPHA] = [
            d[y * 6],
            d[y * 6 + 1],
            d[y * 6 + 2],
            d[y * 6 + 3],
            d[y * 6 + 4],
            d[y * 6 + 5],
        ];
        let [o0, o1, o2, o3, o4, o5] = &mut t[y * ALPHA..y * ALPHA + ALPHA] else {
            unreachable!()
        };
        bt_rows(row, o0, o1, o2, o3, o4, o5);
    }
    for j in 0..ALPHA {
        // Along y: column j of t into column j of V.
        let col = [
            &t[j],
            &t[6 + j],
            &t[12 + j],
            &t[18 + j],
            &t[24 + j],
            &t[30 + j],
        ];
        // SAFETY: six distinct rows of V, overlapping nothing read (caller).
        unsafe {
            bt_rows(
                col,
                &mut *v[j],
                &mut *v[6 + j],
                &mut *v[12 + j],
                &mut *v[18 + j],
                &mut *v[24 + j],
                &mut *v[30 + j],
            )
        };
    }
}

/// [`output`] read and written in place, plus `add` (the bias, or zeros):
/// `m[i·6 + j]` is point (i, j) of M, `y[a·4 + b]` where output (a, b) goes.
///
/// # Safety
/// The 16 rows at `y` must be writable, distinct, and overlap none of `m`,
/// `add` or `t`.
#[inline(always)]
pub unsafe fn output_in_place(
    m: &[&Lanes; XI],
    add: &Lanes,
    y: &[*mut Lanes; M * M],
    t: &mut [Lanes; M * ALPHA],
) {
    const ZERO: Lanes = [0.0; CB];
    for j in 0..ALPHA {
        // Along i: column j of M into t[j·4 + a].
        let col = [m[j], m[6 + j], m[12 + j], m[18 + j], m[24 + j], m[30 + j]];
        let [o0, o1, o2, o3] = &mut t[j * M..j * M + M] else {
            unreachable!()
        };
        at_rows(col, &ZERO, o0, o1, o2, o3);
    }
    for a in 0..M {
        // Along j: row a of t into row a of Y.
        let row = [
            &t[a],
            &t[4 + a],
            &t[8 + a],
            &t[12 + a],
            &t[16 + a],
            &t[20 + a],
        ];
        let r = &y[a * M..a * M + M];
        // SAFETY: four distinct rows overlapping nothing read (caller).
        unsafe { at_rows(row, add, &mut *r[0], &mut *r[1], &mut *r[2], &mut *r[3]) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One channel's tile through the three transforms against the direct
    /// 3x3 correlation, in f64 sums of the f32 results.
    #[test]
    fn one_tile_matches_the_direct_correlation() {
        let mut d = [[0.0; CB]; XI];
        let mut w = [[0.0; CB]; 9];
        for c in 0..CB {
            for (i, x) in d.iter_mut().enumerate() {
                x[c] = ((i * 7 + c * 3) % 11) as f32 / 11.0 - 0.5;
            }
            for (i, x) in w.iter_mut().enumerate() {
                x[c] = ((i * 5 + c) % 7) as f32 / 7.0 - 0.4;
            }
        }
        let (mut v, mut u) = ([[0.0; CB]; XI], [[0.0; CB]; XI]);
        input(&d, &mut v, &mut [[0.0; CB]; XI]);
        filter(&w, &mut u, &mut [[0.0; CB]; ALPHA * 3]);
        let mut m = [[0.0; CB]; XI];
        for xi in 0..XI {
            for c in 0..CB {
                m[xi][c] = v[xi][c] * u[xi][c];
            }
        }
        let mut y = [[0.0; CB]; M * M];
        output(&m, &mut y, &mut [[0.0; CB]; M * ALPHA]);
        for c in 0..CB {
            for a in 0..M {
                for b in 0..M {
                    let mut want = 0.0f64;
                    for r in 0..3 {
                        for s in 0..3 {
                            want += d[(a + r) * ALPHA + b + s][c] as f64 * w[r * 3 + s][c] as f64;
                        }
                    }
                    let got = y[a * M + b][c] as f64;
                    assert!(
                        (got - want).abs() < 1e-5,
                        "c {c} ({a}, {b}): {got} vs {want}"
                    );
                }
            }
        }
    }
    /// One channel's 6x6 input tile and 4x4 gradient tile through the
    /// backward-filter's transforms against the direct 3x3 correlation.
    #[test]
    fn one_gradient_tile_matches_the_direct_correlation() {
        let mut d = [[0.0; CB]; XI];
        let mut h = [[0.0; CB]; M * M];
        for c in 0..CB {
            for (i, x) in d.iter_mut().enumerate() {
                x[c] = ((i * 7 + c * 3) % 11) as f32 / 11.0 - 0.5;
            }
            for (i, x) in h.iter_mut().enumerate() {
                x[c] = ((i * 5 + c) % 9) as f32 / 9.0 - 0.4;
            }
        }
        let (mut v, mut g) = ([[0.0; CB]; XI], [[0.0; CB]; XI]);
        input(&d, &mut v, &mut [[0.0; CB]; XI]);
        grad(&h, &mut g, &mut [[0.0; CB]; M * ALPHA]);
        let mut x = [[0.0; CB]; XI];
        for xi in 0..XI {
            for c in 0..CB {
                x[xi][c] = v[xi][c] * g[xi][c];
            }
        }
        let mut w = [[0.0; CB]; 9];
        filter_grad(&x, &mut w, &mut [[0.0; CB]; 3 * ALPHA]);
        for c in 0..CB {
            for r in 0..3 {
                for s in 0..3 {
                    let mut want = 0.0f64;
                    for a in 0..M {
                        for b in 0..M {
                            want += d[(a + r) * ALPHA + b + s][c] as f64 * h[a * M + b][c] as f64;
                        }
                    }
                    let got = w[r * 3 + s][c] as f64;
                    assert!(
                        (got - want).abs() < 1e-5,
                        "c {c} ({r}, {s}): {got} vs {want}"
                    );
                }
            }
        }
    }
}
