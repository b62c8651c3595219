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

/// `U = G w Gᵀ` of one 3x3 filter, `w[r·3 + s]` to `u[i·6 + j]`.
#[inline(always)]
pub fn filter(w: &[Lanes; 9], u: &mut [Lanes; XI]) {
    let mut t = [[0.0; CB]; ALPHA * 3];
    for s in 0..3 {
        // Along r: column s of w into column s of t (6 rows of 3).
        g(w, s, 3, &mut t, s, 3);
    }
    for i in 0..ALPHA {
        // Along s: row i of t into row i of u.
        g(&t, i * 3, 1, u, i * ALPHA, 1);
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
        filter(&w, &mut u);
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
}
