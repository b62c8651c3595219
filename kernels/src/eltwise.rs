//! Elementwise kernels: ReLU, sums (residual add, gradient accumulation),
//! dropout, channel concat/split and the SGD update. All stream over memory
//! in chunks of [`CHUNK`] on rayon's global pool, compiled for the ISA the
//! caller passes (see [`on_isa!`](crate::on_isa)). Each has a scalar reference next to it
//! where the fast one is more than a one-line loop.

use crate::on_isa;
use crate::rng::SplitMix64;
use crate::simd::CHUNK;
use crate::Isa;
use rayon::prelude::*;

/// `y = max(x, 0)`.
pub fn relu_fwd(isa: Isa, x: &[f32], y: &mut [f32]) {
    assert_eq!(x.len(), y.len());
    y.par_chunks_mut(CHUNK)
        .zip(x.par_chunks(CHUNK))
        .for_each(|(y, x)| {
            on_isa!(isa, {
                for (y, &x) in y.iter_mut().zip(x) {
                    *y = x.max(0.0);
                }
            })
        });
}

/// `dx = (Σ dys) · [y > 0]`: the gradient of every consumer of the ReLU's
/// output is summed on the way, so a branching ReLU needs no extra pass.
pub fn relu_bwd(isa: Isa, y: &[f32], dys: &[&[f32]], dx: &mut [f32]) {
    assert!(dys.iter().all(|d| d.len() == y.len()) && dx.len() == y.len());
    dx.par_chunks_mut(CHUNK).enumerate().for_each(|(ci, dx)| {
        let (o, n) = (ci * CHUNK, dx.len());
        let y = &y[o..o + n];
        on_isa!(
            isa,
            match dys {
                [d] => {
                    for ((dx, &y), &d) in dx.iter_mut().zip(y).zip(&d[o..o + n]) {
                        *dx = if y > 0.0 { d } else { 0.0 };
                    }
                }
                // A ResNet block's output: the next block and its shortcut.
                [d0, d1] => {
                    let ds = d0[o..o + n].iter().zip(&d1[o..o + n]);
                    for ((dx, &y), (&a, &b)) in dx.iter_mut().zip(y).zip(ds) {
                        // The sum before the select: a conditional add
                        // does not vectorise.
                        let s = a + b;
                        *dx = if y > 0.0 { s } else { 0.0 };
                    }
                }
                _ => {
                    dx.copy_from_slice(&dys[0][o..o + n]);
                    for d in &dys[1..] {
                        for (dx, &d) in dx.iter_mut().zip(&d[o..o + n]) {
                            *dx += d;
                        }
                    }
                    for (dx, &y) in dx.iter_mut().zip(y) {
                        if y <= 0.0 {
                            *dx = 0.0;
                        }
                    }
                }
            }
        )
    });
}

/// `dst = Σ srcs` (the residual add forward, and gradient sums).
pub fn sum(isa: Isa, srcs: &[&[f32]], dst: &mut [f32]) {
    sum_impl::<false>(isa, srcs, dst)
}

/// `dst = max(Σ srcs, 0)`: a residual add with the ReLU after it fused.
pub fn sum_relu(isa: Isa, srcs: &[&[f32]], dst: &mut [f32]) {
    sum_impl::<true>(isa, srcs, dst)
}

fn sum_impl<const RELU: bool>(isa: Isa, srcs: &[&[f32]], dst: &mut [f32]) {
    assert!(!srcs.is_empty() && srcs.iter().all(|s| s.len() == dst.len()));
    dst.par_chunks_mut(CHUNK).enumerate().for_each(|(ci, dst)| {
        let o = ci * CHUNK;
        let n = dst.len();
        on_isa!(isa, {
            dst.copy_from_slice(&srcs[0][o..o + n]);
            for s in &srcs[1..] {
                for (d, &v) in dst.iter_mut().zip(&s[o..o + n]) {
                    *d += v;
                }
            }
            // The chunk is still in cache.
            if RELU {
                for v in dst.iter_mut() {
                    *v = v.max(0.0);
                }
            }
        })
    });
}

/// `dst += src`.
pub fn accumulate(isa: Isa, src: &[f32], dst: &mut [f32]) {
    assert_eq!(src.len(), dst.len());
    dst.par_chunks_mut(CHUNK)
        .zip(src.par_chunks(CHUNK))
        .for_each(|(d, s)| {
            on_isa!(isa, {
                for (d, &s) in d.iter_mut().zip(s) {
                    *d += s;
                }
            })
        });
}

/// The keep-mask of dropout for element `i` of a draw seeded by `seed`:
/// 1 when kept. Counter-based (a hash of seed and index), so any chunking
/// and any backend draw the same mask.
#[inline]
pub fn dropout_keep(seed: u64, i: usize, p: f32) -> bool {
    let mut g = SplitMix64::new(seed ^ (i as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93));
    let u = (g.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
    u >= p
}

/// `y = x · mask / (1 - p)`, the mask stored for the backward pass.
pub fn dropout_fwd(isa: Isa, x: &[f32], p: f32, seed: u64, mask: &mut [u8], y: &mut [f32]) {
    assert!(x.len() == y.len() && mask.len() == y.len());
    let scale = 1.0 / (1.0 - p);
    y.par_chunks_mut(CHUNK)
        .zip(mask.par_chunks_mut(CHUNK))
        .enumerate()
        .for_each(|(ci, (y, m))| {
            let o = ci * CHUNK;
            for (j, m) in m.iter_mut().enumerate() {
                *m = dropout_keep(seed, o + j, p) as u8;
            }
            let x = &x[o..o + y.len()];
            on_isa!(isa, {
                for ((y, &x), &m) in y.iter_mut().zip(x).zip(m.iter()) {
                    *y = x * (m as f32 * scale);
                }
            })
        });
}

/// `dx = dy · mask / (1 - p)`.
pub fn dropout_bwd(isa: Isa, dy: &[f32], p: f32, mask: &[u8], dx: &mut [f32]) {
    assert!(dy.len() == dx.len() && mask.len() == dx.len());
    let scale = 1.0 / (1.0 - p);
    dx.par_chunks_mut(CHUNK).enumerate().for_each(|(ci, dx)| {
        let o = ci * CHUNK;
        let (dy, mask) = (&dy[o..o + dx.len()], &mask[o..o + dx.len()]);
        on_isa!(isa, {
            for ((dx, &dy), &m) in dx.iter_mut().zip(dy).zip(mask) {
                *dx = dy * (m as f32 * scale);
            }
        })
    });
}

/// Channel concatenation of NHWC tensors: `parts[k]` has `widths[k]`
/// channels per pixel; `dst` has their sum. `pixels` is N·H·W.
pub fn concat_channels(pixels: usize, parts: &[&[f32]], widths: &[usize], dst: &mut [f32]) {
    let total: usize = widths.iter().sum();
    assert_eq!(dst.len(), pixels * total);
    let rows = (CHUNK / total).max(1);
    dst.par_chunks_mut(rows * total)
        .enumerate()
        .for_each(|(ci, block)| {
            for (r, out) in block.chunks_mut(total).enumerate() {
                let px = ci * rows + r;
                let mut o = 0;
                for (part, &w) in parts.iter().zip(widths) {
                    out[o..o + w].copy_from_slice(&part[px * w..px * w + w]);
                    o += w;
                }
            }
        });
}

/// The inverse of [`concat_channels`]: channels `offset..offset+width` of
/// each pixel of `src` (which has `total` channels) into `dst`.
pub fn split_channels(pixels: usize, src: &[f32], total: usize, offset: usize, dst: &mut [f32]) {
    let width = dst.len() / pixels.max(1);
    assert!(dst.len() == pixels * width && offset + width <= total);
    let rows = (CHUNK / width.max(1)).max(1);
    dst.par_chunks_mut(rows * width)
        .enumerate()
        .for_each(|(ci, block)| {
            for (r, out) in block.chunks_mut(width).enumerate() {
                let px = ci * rows + r;
                out.copy_from_slice(&src[px * total + offset..px * total + offset + width]);
            }
        });
}

/// SGD with momentum, PyTorch's form: `v = μ·v + g; w -= lr·v`.
pub fn sgd_update(isa: Isa, w: &mut [f32], g: &[f32], v: &mut [f32], lr: f32, momentum: f32) {
    assert!(w.len() == g.len() && v.len() == g.len());
    w.par_chunks_mut(CHUNK)
        .zip(v.par_chunks_mut(CHUNK))
        .zip(g.par_chunks(CHUNK))
        .for_each(|((w, v), g)| {
            on_isa!(isa, {
                for i in 0..w.len() {
                    v[i] = momentum * v[i] + g[i];
                    w[i] -= lr * v[i];
                }
            })
        });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::fill_uniform;

    fn isas() -> Vec<Isa> {
        Isa::supported()
    }

    #[test]
    fn relu_and_its_gradient_sum_the_consumers() {
        let n = 3 * CHUNK + 17;
        let mut x = vec![0.0; n];
        fill_uniform(&mut x, 1, 1.0);
        let mut d1 = vec![0.0; n];
        let mut d2 = vec![0.0; n];
        fill_uniform(&mut d1, 2, 1.0);
        fill_uniform(&mut d2, 3, 1.0);
        for isa in isas() {
            let mut y = vec![f32::NAN; n];
            relu_fwd(isa, &x, &mut y);
            let mut dx = vec![f32::NAN; n];
            relu_bwd(isa, &y, &[&d1, &d2], &mut dx);
            let mut dx1 = vec![f32::NAN; n];
            relu_bwd(isa, &y, &[&d1], &mut dx1);
            for i in 0..n {
                assert_eq!(y[i], x[i].max(0.0));
                let on = x[i] > 0.0;
                assert_eq!(dx[i], if on { d1[i] + d2[i] } else { 0.0 });
                assert_eq!(dx1[i], if on { d1[i] } else { 0.0 });
            }
        }
    }

    #[test]
    fn dropout_keeps_about_one_minus_p_and_scales() {
        let n = 100_000;
        let x = vec![1.0; n];
        let mut y = vec![f32::NAN; n];
        let mut m = vec![0; n];
        dropout_fwd(Isa::detect(), &x, 0.5, 7, &mut m, &mut y);
        let kept = m.iter().filter(|&&k| k == 1).count() as f64 / n as f64;
        assert!((kept - 0.5).abs() < 0.01, "{kept}");
        assert!(y.iter().all(|&v| v == 0.0 || v == 2.0));
        let mut dx = vec![f32::NAN; n];
        dropout_bwd(Isa::detect(), &x, 0.5, &m, &mut dx);
        assert_eq!(dx, y);
        // The mask depends on the seed and the index only.
        assert!((0..n).all(|i| dropout_keep(7, i, 0.5) == (m[i] == 1)));
    }

    #[test]
    fn concat_then_split_round_trips() {
        let pixels = 5000;
        let (a, b) = (vec![1.0; pixels * 3], vec![2.0; pixels * 13]);
        let mut c = vec![0.0; pixels * 16];
        concat_channels(pixels, &[&a, &b], &[3, 13], &mut c);
        assert_eq!(
            &c[..16],
            &[1., 1., 1., 2., 2., 2., 2., 2., 2., 2., 2., 2., 2., 2., 2., 2.]
        );
        let mut b2 = vec![0.0; pixels * 13];
        split_channels(pixels, &c, 16, 3, &mut b2);
        assert_eq!(b2, b);
    }

    #[test]
    fn sums_and_sgd() {
        let n = CHUNK + 5;
        let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let mut s = vec![0.0; n];
        sum(Isa::detect(), &[&a, &a, &a], &mut s);
        assert!(s.iter().zip(&a).all(|(s, a)| *s == 3.0 * a));
        let b: Vec<f32> = (0..n).map(|i| -(i as f32) * 2.0 + 100.0).collect();
        for isa in Isa::supported() {
            let mut r = vec![f32::NAN; n];
            sum_relu(isa, &[&a, &b], &mut r);
            assert!(r
                .iter()
                .zip(&a)
                .zip(&b)
                .all(|((r, a), b)| *r == (a + b).max(0.0)));
        }
        accumulate(Isa::Scalar, &a, &mut s);
        assert!(s.iter().zip(&a).all(|(s, a)| *s == 4.0 * a));
        let (mut w, mut v) = (vec![1.0; n], vec![1.0; n]);
        sgd_update(Isa::detect(), &mut w, &vec![2.0; n], &mut v, 0.5, 0.9);
        assert!(v.iter().all(|&v| v == 2.9) && w.iter().all(|&w| w == 1.0 - 1.45));
    }
}
