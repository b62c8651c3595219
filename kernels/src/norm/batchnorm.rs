//! Batch normalisation, training mode, over `rows` pixels (N·H·W) of `c`
//! channels: statistics of the batch, `y = γ·(x-μ)/√(σ²+ε) + β`.
//!
//! Per-channel sums run in f32 over blocks of [`BLOCK`] rows (so the inner
//! loop vectorises across channels) and are carried in f64, so a 200,000-row
//! reduction loses no more than a 32-term one.

use crate::on_isa;
use crate::stream;
use crate::Isa;
use rayon::prelude::*;

/// Rows summed in f32 before the partial sum moves to f64.
const BLOCK: usize = 32;

/// What the forward pass keeps, per channel, for the backward pass.
pub struct BatchStats {
    pub mean: Vec<f32>,
    /// The biased variance.
    pub var: Vec<f32>,
    pub invstd: Vec<f32>,
    /// `y = x·scale + shift`. A fused ReLU's backward recomputes each
    /// element's sign from these exact values, so it decides every element
    /// as the forward pass did.
    pub scale: Vec<f32>,
    pub shift: Vec<f32>,
}

impl BatchStats {
    pub fn new(c: usize) -> BatchStats {
        BatchStats {
            mean: vec![0.0; c],
            var: vec![0.0; c],
            invstd: vec![0.0; c],
            scale: vec![0.0; c],
            shift: vec![0.0; c],
        }
    }
}

/// Row ranges for the parallel reductions: about four per thread.
fn row_tasks(rows: usize) -> usize {
    let per = rows.div_ceil(4 * rayon::current_num_threads()).max(BLOCK);
    per.div_ceil(BLOCK) * BLOCK
}

/// Σ f(row) per channel over all rows, each task summing its rows.
/// `f` adds one row's contribution into the f32 block accumulators; mark
/// it `#[inline(always)]` (see [`on_isa!`](crate::on_isa)). Where `out`
/// is not empty (`rows x c`), `f` also gets that row of it to write, so a
/// pass can leave a tensor behind while it sums; otherwise an empty slice.
/// Where `out` is larger than half the cache counted on that row is staged on
/// the stack and streamed out ([`stream::copy`]): `f` must write all of it
/// and read none of it.
///
/// The accumulators are plain slices and every loop here zips (no
/// indexing): a store through a `Vec` may alias its header as far as LLVM
/// knows, so indexed loops over `Vec`s reload pointers per element and
/// stay scalar.
fn channel_sums<const K: usize>(
    isa: Isa,
    rows: usize,
    c: usize,
    out: &mut [f32],
    row_fn: impl Fn(usize, &mut [f32], &mut [&mut [f32]; K]) + Sync,
) -> [Vec<f64>; K] {
    let per = row_tasks(rows);
    let tasks = rows.div_ceil(per);
    assert!(out.is_empty() || out.len() == rows * c, "out is rows x c");
    // Rows of `out` go through a block of rows on the stack and out with
    // non-temporal stores where it is larger than half the cache counted on.
    let stream = !out.is_empty() && c <= stream::BLOCK_FLOATS && stream::bypasses_cache(out.len());
    // Whole rows per staged block.
    let stage_rows = stream::BLOCK_FLOATS / c;
    let outs: Vec<&mut [f32]> = if out.is_empty() {
        (0..tasks).map(|_| &mut [][..]).collect()
    } else {
        out.chunks_mut(per * c).collect()
    };
    outs.into_par_iter()
        .enumerate()
        .map(|(t, out)| {
            // Zeroed only where it is used.
            let mut stage_mem;
            let stage: &mut [f32] = if stream {
                stage_mem = [0.0f32; stream::BLOCK_FLOATS];
                &mut stage_mem
            } else {
                &mut []
            };
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
                    if stream {
                        // Groups of rows through the stage, so that a
                        // copy's unaligned ends are per group, not per row.
                        let mut g0 = r;
                        while g0 < end {
                            let g1 = (g0 + stage_rows).min(end);
                            for row in g0..g1 {
                                row_fn(row, &mut stage[(row - g0) * c..][..c], &mut block);
                            }
                            let n = (g1 - g0) * c;
                            stream::copy(isa, &mut out[(g0 - r0) * c..][..n], &stage[..n]);
                            g0 = g1;
                        }
                    } else {
                        for row in r..end {
                            let o = if out.is_empty() {
                                &mut [][..]
                            } else {
                                &mut out[(row - r0) * c..][..c]
                            };
                            row_fn(row, o, &mut block);
                        }
                    }
                    for (tot, b) in total.iter_mut().zip(&block) {
                        for (t, &v) in tot.iter_mut().zip(b.iter()) {
                            *t += v as f64;
                        }
                    }
                });
                r = end;
            }
            if stream {
                stream::fence();
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

/// What the forward pass does after the normalisation, in its one pass
/// over the output.
#[derive(Clone, Copy, Debug)]
pub enum Epilogue<'a> {
    None,
    /// `y = max(BN(x), 0)`: the ReLU after it.
    Relu,
    /// `y = max(BN(x) + z, 0)`: the residual add after it and that add's
    /// ReLU (`z` the add's other input), with the same roundings as the
    /// three apart.
    AddRelu(&'a [f32]),
}

/// `y = x·scale[c] + shift[c]`, then `max(y, 0)` if `RELU`, row-parallel.
fn scale_shift<const RELU: bool>(
    isa: Isa,
    c: usize,
    x: &[f32],
    scale: &[f32],
    shift: &[f32],
    y: &mut [f32],
) {
    let rows_per = (crate::simd::CHUNK / c).max(1);
    let stream = stream::bypasses_cache(y.len());
    y.par_chunks_mut(rows_per * c)
        .zip(x.par_chunks(rows_per * c))
        .for_each(|(y, x)| {
            on_isa!(
                isa,
                stream::rows_out(
                    isa,
                    c,
                    y,
                    stream,
                    #[inline(always)]
                    |r0, y| {
                        let x = &x[r0 * c..][..y.len()];
                        for (y, x) in y.chunks_exact_mut(c).zip(x.chunks_exact(c)) {
                            let coefs = scale.iter().zip(shift);
                            for ((y, &x), (&a, &b)) in y.iter_mut().zip(x).zip(coefs) {
                                let v = x * a + b;
                                *y = if RELU { v.max(0.0) } else { v };
                            }
                        }
                    }
                )
            )
        });
}

/// `y = max(x·scale[c] + shift[c] + z, 0)`, row-parallel: the residual add
/// and its ReLU in the pass that writes the batch norm's output.
fn scale_shift_add_relu(
    isa: Isa,
    c: usize,
    x: &[f32],
    z: &[f32],
    scale: &[f32],
    shift: &[f32],
    y: &mut [f32],
) {
    assert_eq!(z.len(), x.len(), "z is shaped as x");
    rows_of_three(
        isa,
        c,
        y,
        x,
        z,
        #[inline(always)]
        |y, x, z| {
            let coefs = scale.iter().zip(shift);
            for ((y, (&x, &z)), (&a, &b)) in y.iter_mut().zip(x.iter().zip(z)).zip(coefs) {
                *y = (x * a + b + z).max(0.0);
            }
        },
    );
}

/// `f(out, a, b)` on every row of `c` floats of the three tensors,
/// row-parallel in chunks of about [`CHUNK`](crate::simd::CHUNK) floats,
/// compiled for `isa`: mark `f` `#[inline(always)]` (see
/// [`on_isa!`](crate::on_isa)). `out` is written with non-temporal stores
/// where it is larger than half the cache counted on ([`stream::rows_out`]):
/// `f` must write all of its `out` row and read none of it.
fn rows_of_three(
    isa: Isa,
    c: usize,
    out: &mut [f32],
    a: &[f32],
    b: &[f32],
    f: impl Fn(&mut [f32], &[f32], &[f32]) + Sync,
) {
    let rows_per = (crate::simd::CHUNK / c).max(1);
    let stream = stream::bypasses_cache(out.len());
    out.par_chunks_mut(rows_per * c)
        .zip(a.par_chunks(rows_per * c).zip(b.par_chunks(rows_per * c)))
        .for_each(|(out, (a, b))| {
            on_isa!(
                isa,
                stream::rows_out(
                    isa,
                    c,
                    out,
                    stream,
                    #[inline(always)]
                    |r0, out| {
                        let (a, b) = (&a[r0 * c..][..out.len()], &b[r0 * c..][..out.len()]);
                        for ((out, a), b) in out
                            .chunks_exact_mut(c)
                            .zip(a.chunks_exact(c))
                            .zip(b.chunks_exact(c))
                        {
                            f(out, a, b);
                        }
                    }
                )
            )
        });
}

/// Forward, training mode: `y`, and the batch statistics in `st`; `epi`
/// says what else the pass writing `y` does (a fused ReLU, or a residual
/// add and its ReLU).
#[allow(clippy::too_many_arguments)]
pub fn fwd_train(
    isa: Isa,
    c: usize,
    x: &[f32],
    gamma: &[f32],
    beta: &[f32],
    eps: f32,
    epi: Epilogue,
    y: &mut [f32],
    st: &mut BatchStats,
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
        &mut [],
        #[inline(always)]
        |r, _, [s, ss]| {
            let x = &x[r * c..r * c + c];
            for ((s, ss), (&x, &x0)) in s.iter_mut().zip(ss.iter_mut()).zip(x.iter().zip(x0)) {
                let d = x - x0;
                *s += d;
                *ss += d * d;
            }
        },
    );
    let m = rows as f64;
    for i in 0..c {
        let d = s[i] / m;
        let mu = x0[i] as f64 + d;
        let v = (ss[i] / m - d * d).max(0.0);
        let is = 1.0 / (v + eps as f64).sqrt();
        st.mean[i] = mu as f32;
        st.var[i] = v as f32;
        st.invstd[i] = is as f32;
        st.scale[i] = (gamma[i] as f64 * is) as f32;
        st.shift[i] = (beta[i] as f64 - mu * gamma[i] as f64 * is) as f32;
    }
    let (sc, sh) = (&st.scale[..], &st.shift[..]);
    match epi {
        Epilogue::None => scale_shift::<false>(isa, c, x, sc, sh, y),
        Epilogue::Relu => scale_shift::<true>(isa, c, x, sc, sh, y),
        Epilogue::AddRelu(z) => scale_shift_add_relu(isa, c, x, z, sc, sh, y),
    }
}

/// Backward: `dx`, `dγ = Σ dy·x̂`, `dβ = Σ dy`. With `relu` (the forward
/// pass was fused with a ReLU and `dy` is the ReLU's output gradient), `dy`
/// is first zeroed where the forward pass's `x·scale + shift` was not
/// positive: the ReLU's backward in the same passes, with no extra read.
#[allow(clippy::too_many_arguments)]
pub fn bwd(
    isa: Isa,
    c: usize,
    x: &[f32],
    dy: &[f32],
    gamma: &[f32],
    st: &BatchStats,
    relu: bool,
    dx: &mut [f32],
    dgamma: &mut [f32],
    dbeta: &mut [f32],
) {
    if relu {
        bwd_impl::<true>(isa, c, x, dy, gamma, st, dx, dgamma, dbeta);
    } else {
        bwd_impl::<false>(isa, c, x, dy, gamma, st, dx, dgamma, dbeta);
    }
}

/// The gradient reaching the batch norm: `dy`, or with `RELU` the ReLU's
/// backward of it, from the sign of the forward's own `x·scale + shift`. A
/// select, not a branch, so that the loops vectorise. Written as `v > 0
/// keeps dy`: a NaN's forward output is `max(NaN, 0) = 0`, so its gradient
/// is 0 too.
#[inline(always)]
fn masked<const RELU: bool>(dy: f32, x: f32, scale: f32, shift: f32) -> f32 {
    if !RELU || x * scale + shift > 0.0 {
        dy
    } else {
        0.0
    }
}

#[allow(clippy::too_many_arguments)]
fn bwd_impl<const RELU: bool>(
    isa: Isa,
    c: usize,
    x: &[f32],
    dy: &[f32],
    gamma: &[f32],
    st: &BatchStats,
    dx: &mut [f32],
    dgamma: &mut [f32],
    dbeta: &mut [f32],
) {
    let rows = x.len() / c;
    assert!(dy.len() == x.len() && dx.len() == x.len() && rows > 0);
    let (mean, scale, shift) = (&st.mean[..], &st.scale[..], &st.shift[..]);
    let sums = channel_sums::<2>(
        isa,
        rows,
        c,
        &mut [],
        #[inline(always)]
        |r, _, [sd, sdx]| {
            // Indexed over slices cut to one length (bounds checks hoisted
            // out of the loop). Beside the zip of seven iterators it
            // replaced: level, in ABBA runs of the streaming bench.
            let (x, dy) = (&x[r * c..][..c], &dy[r * c..][..c]);
            let (sd, sdx) = (&mut sd[..c], &mut sdx[..c]);
            let (mean, scale, shift) = (&mean[..c], &scale[..c], &shift[..c]);
            for i in 0..c {
                let g = masked::<RELU>(dy[i], x[i], scale[i], shift[i]);
                sd[i] += g;
                sdx[i] += g * (x[i] - mean[i]);
            }
        },
    );
    bwd_finish::<RELU>(isa, c, x, dy, gamma, st, sums, dx, dgamma, dbeta);
}

/// Backward of `y = max(BN(x) + z, 0)`, the forward with
/// [`Epilogue::AddRelu`]: `y` is its output and `Σ dy_parts` (one or two
/// tensors: the readers' gradients of `y`) its gradient. The reduction pass
/// also writes `dz = relu'(y)·Σ dy_parts`, the gradient of `z` and of the
/// normalisation's output; then `dx`, `dγ` and `dβ` as [`bwd`] from `dz`.
/// The ReLU's and the add's backward are no passes of their own.
#[allow(clippy::too_many_arguments)]
pub fn bwd_add_relu(
    isa: Isa,
    c: usize,
    x: &[f32],
    y: &[f32],
    dy_parts: &[&[f32]],
    gamma: &[f32],
    st: &BatchStats,
    dz: &mut [f32],
    dx: &mut [f32],
    dgamma: &mut [f32],
    dbeta: &mut [f32],
) {
    let rows = x.len() / c;
    assert!(y.len() == x.len() && dz.len() == x.len() && dx.len() == x.len() && rows > 0);
    assert!(dy_parts.iter().all(|p| p.len() == x.len()));
    let mean = &st.mean[..];
    assert_eq!(mean.len(), c, "statistics of c channels");
    // relu'(y)·dy into dz, and the sums of it, for one row, indexed over
    // slices cut to one length as `bwd_impl`'s sums.
    #[inline(always)]
    fn row<const P: usize>(
        r: usize,
        (x, y, parts): (&[f32], &[f32], [&[f32]; P]),
        mean: &[f32],
        dz: &mut [f32],
        [sd, sdx]: &mut [&mut [f32]; 2],
    ) {
        let c = mean.len();
        let (x, y) = (&x[r * c..][..c], &y[r * c..][..c]);
        let parts = parts.map(|p| &p[r * c..][..c]);
        let (dz, sd, sdx) = (&mut dz[..c], &mut sd[..c], &mut sdx[..c]);
        for i in 0..c {
            let dy = if P == 2 {
                parts[0][i] + parts[P - 1][i]
            } else {
                parts[0][i]
            };
            let g = if y[i] > 0.0 { dy } else { 0.0 };
            dz[i] = g;
            sd[i] += g;
            sdx[i] += g * (x[i] - mean[i]);
        }
    }
    let sums = match *dy_parts {
        [p] => channel_sums::<2>(
            isa,
            rows,
            c,
            dz,
            #[inline(always)]
            |r, dz, block| row(r, (x, y, [p]), mean, dz, block),
        ),
        [p, q] => channel_sums::<2>(
            isa,
            rows,
            c,
            dz,
            #[inline(always)]
            |r, dz, block| row(r, (x, y, [p, q]), mean, dz, block),
        ),
        _ => panic!("one or two gradient parts, not {}", dy_parts.len()),
    };
    bwd_finish::<false>(isa, c, x, dz, gamma, st, sums, dx, dgamma, dbeta);
}

/// From the per-channel sums `[Σg, Σg·(x-μ)]` of the gradient `g` reaching
/// the batch norm (`masked` of `dy`): `dγ`, `dβ`, and the pass writing
/// `dx`.
#[allow(clippy::too_many_arguments)]
fn bwd_finish<const RELU: bool>(
    isa: Isa,
    c: usize,
    x: &[f32],
    dy: &[f32],
    gamma: &[f32],
    st: &BatchStats,
    [sd, sdx]: [Vec<f64>; 2],
    dx: &mut [f32],
    dgamma: &mut [f32],
    dbeta: &mut [f32],
) {
    let rows = x.len() / c;
    let (mean, scale, shift) = (&st.mean[..], &st.scale[..], &st.shift[..]);
    let m = rows as f64;
    // dx = γ·is·(g - Σg/M - x̂·Σ(g·x̂)/M), with x̂ = (x-μ)·is, as
    // dx = a·g + b·x + k per channel.
    let (mut a, mut b, mut k) = (vec![0.0; c], vec![0.0; c], vec![0.0; c]);
    for i in 0..c {
        let is = st.invstd[i] as f64;
        let g = gamma[i] as f64;
        dbeta[i] = sd[i] as f32;
        dgamma[i] = (sdx[i] * is) as f32;
        let ai = g * is;
        let bi = -g * is * is * is * sdx[i] / m;
        a[i] = ai as f32;
        b[i] = bi as f32;
        k[i] = (-ai * sd[i] / m - bi * mean[i] as f64) as f32;
    }
    rows_of_three(
        isa,
        c,
        dx,
        x,
        dy,
        #[inline(always)]
        |dx, x, dy| {
            // Indexed, as the sums above, over slices all cut to `c`: one
            // left uncut gave the loop a second exit (its bounds check),
            // and LLVM then ran the last 32 floats of every row scalar
            // (half of a 64-channel row). Cut: 64 channels, with a fused
            // ReLU, 14.0 -> 10.4 ms over 51 MB tensors (streaming bench,
            // `BN_C=64`, four alternating runs of the two bench binaries,
            // Zen 5, 2 threads).
            let (dx, x, dy) = (&mut dx[..c], &x[..c], &dy[..c]);
            let (a, b, k) = (&a[..c], &b[..c], &k[..c]);
            let (sc, sh) = (&scale[..c], &shift[..c]);
            for i in 0..c {
                let g = masked::<RELU>(dy[i], x[i], sc[i], sh[i]);
                dx[i] = a[i] * g + b[i] * x[i] + k[i];
            }
        },
    );
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
        // In this crate's tests outputs from 64 KiB stream (see
        // `stream::bypasses_cache`): 1000x64, 4000x17 (blocks that end
        // inside rows and lines) and 6272x16 do, the others do not.
        for &(rows, c) in &[(7, 3), (1000, 64), (33, 17), (4000, 17), (2 * 56 * 56, 16)] {
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
                let mut st = BatchStats::new(c);
                fwd_train(isa, c, &x, &g, &b, 1e-5, Epilogue::None, &mut y, &mut st);
                assert!(rel_l2_error(&y, wy) < 1e-5, "y {rows}x{c} {isa}");
                assert!(rel_l2_error(&st.var, wv) < 1e-5, "var {rows}x{c} {isa}");
                let (mut dx, mut dg, mut db) = (vec![f32::NAN; n], vec![0.0; c], vec![0.0; c]);
                bwd(isa, c, &x, &dy, &g, &st, false, &mut dx, &mut dg, &mut db);
                let e = rel_l2_error(&dx, &wdx);
                assert!(e < 1e-4, "dx {rows}x{c} {isa}: {e}");
                assert!(rel_l2_error(&dg, &wdg) < 1e-5, "dgamma {rows}x{c} {isa}");
                assert!(rel_l2_error(&db, &wdb) < 1e-5, "dbeta {rows}x{c} {isa}");
            }
        }
    }

    /// BN + ReLU in one pass each way equals the reference BN followed by
    /// a ReLU, whose backward masks with the fused forward's own signs.
    #[test]
    fn fused_relu_matches_the_reference_then_a_relu() {
        for &(rows, c) in &[(7, 3), (1000, 64), (33, 17)] {
            let n = rows * c;
            let mut x = vec![0.0; n];
            fill_uniform(&mut x, 5, 1.0);
            let mut dy = vec![0.0; n];
            fill_uniform(&mut dy, 6, 1.0);
            let (mut g, mut b) = (vec![0.0; c], vec![0.0; c]);
            fill_uniform(&mut g, 7, 1.0);
            fill_uniform(&mut b, 8, 1.0);
            let mut want = [vec![0.0; n], vec![0.0; c], vec![0.0; c], vec![0.0; c]];
            let [wy, wm, wv, wi] = &mut want;
            reference::fwd_train(c, &x, &g, &b, 1e-5, wy, wm, wv, wi);
            let wrelu: Vec<f32> = wy.iter().map(|v| v.max(0.0)).collect();
            for isa in Isa::supported() {
                let mut y = vec![f32::NAN; n];
                let mut st = BatchStats::new(c);
                fwd_train(isa, c, &x, &g, &b, 1e-5, Epilogue::Relu, &mut y, &mut st);
                assert!(rel_l2_error(&y, &wrelu) < 1e-5, "y {rows}x{c} {isa}");
                assert!(y.iter().all(|&v| v >= 0.0));
                let masked: Vec<f32> = dy
                    .iter()
                    .zip(&y)
                    .map(|(&d, &y)| if y > 0.0 { d } else { 0.0 })
                    .collect();
                let (mut wdx, mut wdg, mut wdb) = (vec![0.0; n], vec![0.0; c], vec![0.0; c]);
                reference::bwd(c, &x, &masked, &g, wm, wi, &mut wdx, &mut wdg, &mut wdb);
                let (mut dx, mut dg, mut db) = (vec![f32::NAN; n], vec![0.0; c], vec![0.0; c]);
                bwd(isa, c, &x, &dy, &g, &st, true, &mut dx, &mut dg, &mut db);
                let e = rel_l2_error(&dx, &wdx);
                assert!(e < 1e-4, "dx {rows}x{c} {isa}: {e}");
                assert!(rel_l2_error(&dg, &wdg) < 1e-5, "dgamma {rows}x{c} {isa}");
                assert!(rel_l2_error(&db, &wdb) < 1e-5, "dbeta {rows}x{c} {isa}");
            }
        }
    }

    /// BN + add + ReLU in one pass each way gives, bit for bit, what the
    /// batch norm, the add and the ReLU give apart (the same roundings in
    /// the same order), with the gradient in one part or two.
    #[test]
    fn fused_add_relu_equals_the_three_apart() {
        for &(rows, c) in &[(7, 3), (1000, 64), (33, 17), (4000, 17), (2 * 56 * 56, 16)] {
            let n = rows * c;
            let t = |seed| {
                let mut v = vec![0.0; n];
                fill_uniform(&mut v, seed, 1.0);
                v
            };
            let (x, z, p, q) = (t(11), t(12), t(13), t(14));
            let (mut g, mut b) = (vec![0.0; c], vec![0.0; c]);
            fill_uniform(&mut g, 15, 1.0);
            fill_uniform(&mut b, 16, 1.0);
            for isa in Isa::supported() {
                // Apart: BN, then y = max(bn + z, 0), then the ReLU's
                // gradient relu'(y)·(p + q) into BN's backward.
                let (mut bn, mut st) = (vec![0.0; n], BatchStats::new(c));
                fwd_train(isa, c, &x, &g, &b, 1e-5, Epilogue::None, &mut bn, &mut st);
                let want_y: Vec<f32> = bn.iter().zip(&z).map(|(v, z)| (v + z).max(0.0)).collect();
                let want_dz: Vec<f32> = (0..n)
                    .map(|i| if want_y[i] > 0.0 { p[i] + q[i] } else { 0.0 })
                    .collect();
                let (mut want_dx, mut want_dg, mut want_db) =
                    (vec![0.0; n], vec![0.0; c], vec![0.0; c]);
                bwd(
                    isa,
                    c,
                    &x,
                    &want_dz,
                    &g,
                    &st,
                    false,
                    &mut want_dx,
                    &mut want_dg,
                    &mut want_db,
                );
                // Fused.
                let (mut y, mut st) = (vec![f32::NAN; n], BatchStats::new(c));
                fwd_train(
                    isa,
                    c,
                    &x,
                    &g,
                    &b,
                    1e-5,
                    Epilogue::AddRelu(&z),
                    &mut y,
                    &mut st,
                );
                assert!(y == want_y, "y {rows}x{c} {isa}");
                let pq: Vec<f32> = p.iter().zip(&q).map(|(p, q)| p + q).collect();
                for parts in [&[&p[..], &q[..]][..], &[&pq[..]][..]] {
                    let mut dz = vec![f32::NAN; n];
                    let (mut dx, mut dg, mut db) = (vec![f32::NAN; n], vec![0.0; c], vec![0.0; c]);
                    bwd_add_relu(
                        isa, c, &x, &y, parts, &g, &st, &mut dz, &mut dx, &mut dg, &mut db,
                    );
                    let what = format!("{rows}x{c} {isa}, {} part(s)", parts.len());
                    assert!(dz == want_dz, "dz {what}");
                    assert!(dx == want_dx, "dx {what}");
                    assert!(dg == want_dg && db == want_db, "dgamma, dbeta {what}");
                }
            }
        }
    }
}
