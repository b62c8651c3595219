//! Batch normalisation, training mode, over `rows` pixels (N·H·W) of `c`
//! channels: statistics of the batch, `y = γ·(x-μ)/√(σ²+ε) + β`.
//!
//! Per-channel sums run in f32 over blocks of [`BLOCK`] rows (so the inner
//! loop vectorises across channels) and are carried in f64, so a 200,000-row
//! reduction loses no more than a 32-term one.

use crate::on_isa;
use crate::Isa;
use rayon::prelude::*;

/// Rows summed in f32 before the partial sum moves to f64.
const BLOCK: usize = 32;

/// Batch statistics saved by the forward pass for the backward pass.
pub struct Stats<'a> {
    pub mean: &'a [f32],
    pub invstd: &'a [f32],
}

/// Row ranges for the parallel reductions: about four per thread.
fn row_tasks(rows: usize) -> usize {
    let per = rows.div_ceil(4 * rayon::current_num_threads()).max(BLOCK);
    per.div_ceil(BLOCK) * BLOCK
}

/// Σ f(row) per channel over all rows, each task summing its rows.
/// `f` adds one row's contribution into the f32 block accumulators; mark
/// it `#[inline(always)]` (see [`on_isa!`](crate::on_isa)).
///
/// The accumulators are plain slices and every loop here zips (no
/// indexing): a store through a `Vec` may alias its header as far as LLVM
/// knows, so indexed loops over `Vec`s reload pointers per element and
/// stay scalar.
fn channel_sums<const K: usize>(
    isa: Isa,
    rows: usize,
    c: usize,
    row_fn: impl Fn(usize, &mut [&mut [f32]; K]) + Sync,
) -> [Vec<f64>; K] {
    let per = row_tasks(rows);
    let tasks = rows.div_ceil(per);
    (0..tasks)
        .into_par_iter()
        .map(|t| {
            let mut total: [Vec<f64>; K] = std::array::from_fn(|_| vec![0.0; c]);
            let mut block_mem = vec![0.0f32; K * c];
            let mut parts = block_mem.chunks_exact_mut(c);
            let mut block: [&mut [f32]; K] =
                std::array::from_fn(|_| parts.next().expect("K blocks of c"));
            let (r0, r1) = (t * per, ((t + 1) * per).min(rows));
            let mut r = r0;
            while r < r1 {
                let end = (r + BLOCK).min(r1);
                on_isa!(isa, {
                    for b in block.iter_mut() {
                        b.fill(0.0);
                    }
                    for row in r..end {
                        row_fn(row, &mut block);
                    }
                    for (tot, b) in total.iter_mut().zip(&block) {
                        for (t, &v) in tot.iter_mut().zip(b.iter()) {
                            *t += v as f64;
                        }
                    }
                });
                r = end;
            }
            total
        })
        .reduce(
            || std::array::from_fn(|_| vec![0.0; c]),
            |mut a, b| {
                for (a, b) in a.iter_mut().zip(&b) {
                    for (a, b) in a.iter_mut().zip(b) {
                        *a += b;
                    }
                }
                a
            },
        )
}

/// `y = x·scale[c] + shift[c]`, row-parallel.
fn scale_shift(isa: Isa, c: usize, x: &[f32], scale: &[f32], shift: &[f32], y: &mut [f32]) {
    let rows_per = (crate::simd::CHUNK / c).max(1);
    y.par_chunks_mut(rows_per * c)
        .zip(x.par_chunks(rows_per * c))
        .for_each(|(y, x)| {
            on_isa!(isa, {
                for (y, x) in y.chunks_exact_mut(c).zip(x.chunks_exact(c)) {
                    let coefs = scale.iter().zip(shift);
                    for ((y, &x), (&a, &b)) in y.iter_mut().zip(x).zip(coefs) {
                        *y = x * a + b;
                    }
                }
            })
        });
}

/// Forward, training mode. Writes `y`, the batch `mean`, the biased
/// variance `var` and `invstd = 1/√(var+ε)`.
#[allow(clippy::too_many_arguments)]
pub fn fwd_train(
    isa: Isa,
    c: usize,
    x: &[f32],
    gamma: &[f32],
    beta: &[f32],
    eps: f32,
    y: &mut [f32],
    mean: &mut [f32],
    var: &mut [f32],
    invstd: &mut [f32],
) {
    let rows = x.len() / c;
    assert!(x.len() == rows * c && y.len() == x.len() && rows > 0);
    // Sums of x - x₀ (the first row) keep E[x²] - E[x]² from cancelling
    // when the mean is large against the spread.
    let x0 = &x[..c];
    let [s, ss] = channel_sums::<2>(
        isa,
        rows,
        c,
        #[inline(always)]
        |r, [s, ss]| {
            let x = &x[r * c..r * c + c];
            for ((s, ss), (&x, &x0)) in s.iter_mut().zip(ss.iter_mut()).zip(x.iter().zip(x0)) {
                let d = x - x0;
                *s += d;
                *ss += d * d;
            }
        },
    );
    let m = rows as f64;
    let mut scale = vec![0.0; c];
    let mut shift = vec![0.0; c];
    for i in 0..c {
        let d = s[i] / m;
        let mu = x0[i] as f64 + d;
        let v = (ss[i] / m - d * d).max(0.0);
        let is = 1.0 / (v + eps as f64).sqrt();
        mean[i] = mu as f32;
        var[i] = v as f32;
        invstd[i] = is as f32;
        scale[i] = (gamma[i] as f64 * is) as f32;
        shift[i] = (beta[i] as f64 - mu * gamma[i] as f64 * is) as f32;
    }
    scale_shift(isa, c, x, &scale, &shift, y);
}

/// Backward: `dx`, `dγ = Σ dy·x̂`, `dβ = Σ dy`.
#[allow(clippy::too_many_arguments)]
pub fn bwd(
    isa: Isa,
    c: usize,
    x: &[f32],
    dy: &[f32],
    gamma: &[f32],
    stats: Stats,
    dx: &mut [f32],
    dgamma: &mut [f32],
    dbeta: &mut [f32],
) {
    let rows = x.len() / c;
    assert!(dy.len() == x.len() && dx.len() == x.len() && rows > 0);
    let mean = stats.mean;
    let [sd, sdx] = channel_sums::<2>(
        isa,
        rows,
        c,
        #[inline(always)]
        |r, [sd, sdx]| {
            let (x, dy) = (&x[r * c..r * c + c], &dy[r * c..r * c + c]);
            let sums = sd.iter_mut().zip(sdx.iter_mut());
            for ((sd, sdx), ((&x, &dy), &mu)) in sums.zip(x.iter().zip(dy).zip(mean)) {
                *sd += dy;
                *sdx += dy * (x - mu);
            }
        },
    );
    let m = rows as f64;
    // dx = γ·is·(dy - Σdy/M - x̂·Σ(dy·x̂)/M), with x̂ = (x-μ)·is, as
    // dx = a·dy + b·x + k per channel.
    let (mut a, mut b, mut k) = (vec![0.0; c], vec![0.0; c], vec![0.0; c]);
    for i in 0..c {
        let is = stats.invstd[i] as f64;
        let g = gamma[i] as f64;
        dbeta[i] = sd[i] as f32;
        dgamma[i] = (sdx[i] * is) as f32;
        let ai = g * is;
        let bi = -g * is * is * is * sdx[i] / m;
        a[i] = ai as f32;
        b[i] = bi as f32;
        k[i] = (-ai * sd[i] / m - bi * mean[i] as f64) as f32;
    }
    let rows_per = (crate::simd::CHUNK / c).max(1);
    dx.par_chunks_mut(rows_per * c)
        .zip(x.par_chunks(rows_per * c).zip(dy.par_chunks(rows_per * c)))
        .for_each(|(dx, (x, dy))| {
            on_isa!(isa, {
                for ((dx, x), dy) in dx
                    .chunks_exact_mut(c)
                    .zip(x.chunks_exact(c))
                    .zip(dy.chunks_exact(c))
                {
                    let coefs = a.iter().zip(&b).zip(&k);
                    for ((dx, (&x, &dy)), ((&a, &b), &k)) in
                        dx.iter_mut().zip(x.iter().zip(dy)).zip(coefs)
                    {
                        *dx = a * dy + b * x + k;
                    }
                }
            })
        });
}

/// Naive references in f64: the same outputs as [`fwd_train`] and [`bwd`].
pub mod reference {
    #[allow(clippy::too_many_arguments)]
    pub fn fwd_train(
        c: usize,
        x: &[f32],
        gamma: &[f32],
        beta: &[f32],
        eps: f32,
        y: &mut [f32],
        mean: &mut [f32],
        var: &mut [f32],
        invstd: &mut [f32],
    ) {
        let rows = x.len() / c;
        for i in 0..c {
            let mu = (0..rows).map(|r| x[r * c + i] as f64).sum::<f64>() / rows as f64;
            let v = (0..rows)
                .map(|r| (x[r * c + i] as f64 - mu).powi(2))
                .sum::<f64>()
                / rows as f64;
            let is = 1.0 / (v + eps as f64).sqrt();
            for r in 0..rows {
                let xh = (x[r * c + i] as f64 - mu) * is;
                y[r * c + i] = (gamma[i] as f64 * xh + beta[i] as f64) as f32;
            }
            mean[i] = mu as f32;
            var[i] = v as f32;
            invstd[i] = is as f32;
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub fn bwd(
        c: usize,
        x: &[f32],
        dy: &[f32],
        gamma: &[f32],
        mean: &[f32],
        invstd: &[f32],
        dx: &mut [f32],
        dgamma: &mut [f32],
        dbeta: &mut [f32],
    ) {
        let rows = x.len() / c;
        let m = rows as f64;
        for i in 0..c {
            let (mu, is) = (mean[i] as f64, invstd[i] as f64);
            let xh = |r: usize| (x[r * c + i] as f64 - mu) * is;
            let sd: f64 = (0..rows).map(|r| dy[r * c + i] as f64).sum();
            let sdx: f64 = (0..rows).map(|r| dy[r * c + i] as f64 * xh(r)).sum();
            for r in 0..rows {
                let g = gamma[i] as f64 * is;
                dx[r * c + i] = (g * (dy[r * c + i] as f64 - sd / m - xh(r) * sdx / m)) as f32;
            }
            dgamma[i] = sdx as f32;
            dbeta[i] = sd as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv::reference::rel_l2_error;
    use crate::rng::fill_uniform;

    #[test]
    fn matches_the_reference_on_every_isa() {
        for &(rows, c) in &[(7, 3), (1000, 64), (33, 17), (2 * 56 * 56, 16)] {
            let n = rows * c;
            let mut x = vec![0.0; n];
            fill_uniform(&mut x, 1, 1.0);
            // A large offset: the one-pass variance must still be accurate.
            x.iter_mut().for_each(|v| *v = *v * 0.5 + 3.0);
            let mut dy = vec![0.0; n];
            fill_uniform(&mut dy, 2, 1.0);
            let mut g = vec![0.0; c];
            let mut b = vec![0.0; c];
            fill_uniform(&mut g, 3, 1.0);
            fill_uniform(&mut b, 4, 1.0);
            let mut want = [vec![0.0; n], vec![0.0; c], vec![0.0; c], vec![0.0; c]];
            let [wy, wm, wv, wi] = &mut want;
            reference::fwd_train(c, &x, &g, &b, 1e-5, wy, wm, wv, wi);
            let (mut wdx, mut wdg, mut wdb) = (vec![0.0; n], vec![0.0; c], vec![0.0; c]);
            reference::bwd(c, &x, &dy, &g, wm, wi, &mut wdx, &mut wdg, &mut wdb);
            for isa in Isa::supported() {
                let mut y = vec![f32::NAN; n];
                let (mut m, mut v, mut is) = (vec![0.0; c], vec![0.0; c], vec![0.0; c]);
                fwd_train(isa, c, &x, &g, &b, 1e-5, &mut y, &mut m, &mut v, &mut is);
                assert!(rel_l2_error(&y, wy) < 1e-5, "y {rows}x{c} {isa}");
                assert!(rel_l2_error(&v, wv) < 1e-5, "var {rows}x{c} {isa}");
                let (mut dx, mut dg, mut db) = (vec![f32::NAN; n], vec![0.0; c], vec![0.0; c]);
                let st = Stats {
                    mean: &m,
                    invstd: &is,
                };
                bwd(isa, c, &x, &dy, &g, st, &mut dx, &mut dg, &mut db);
                let e = rel_l2_error(&dx, &wdx);
                assert!(e < 1e-4, "dx {rows}x{c} {isa}: {e}");
                assert!(rel_l2_error(&dg, &wdg) < 1e-5, "dgamma {rows}x{c} {isa}");
                assert!(rel_l2_error(&db, &wdb) < 1e-5, "dbeta {rows}x{c} {isa}");
            }
        }
    }
}
