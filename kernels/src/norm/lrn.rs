//! Local response normalisation across channels (AlexNet), NHWC, in the
//! Caffe/PyTorch form: `s = k + α/n·Σ x²` over the `n` channels centred on
//! each channel (window clipped at the edges), `y = x·s^-β`.

use rayon::prelude::*;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LrnParams {
    pub size: usize,
    pub alpha: f32,
    pub beta: f32,
    pub k: f32,
}

impl LrnParams {
    /// The channels `lo..hi` in the window of channel `i` of `c`.
    fn window(&self, i: usize, c: usize) -> (usize, usize) {
        let before = (self.size - 1) / 2;
        let after = self.size - 1 - before;
        (i.saturating_sub(before), (i + after + 1).min(c))
    }
}

/// Pixels per parallel task.
const PIXELS: usize = 64;

/// Forward: writes `y` and the scale `s` the backward pass needs.
pub fn fwd(p: &LrnParams, c: usize, x: &[f32], y: &mut [f32], scale: &mut [f32]) {
    let a = p.alpha / p.size as f32;
    y.par_chunks_mut(PIXELS * c)
        .zip(scale.par_chunks_mut(PIXELS * c))
        .zip(x.par_chunks(PIXELS * c))
        .for_each(|((y, s), x)| {
            let mut sq = vec![0.0f32; c + 1];
            for ((y, s), x) in y.chunks_mut(c).zip(s.chunks_mut(c)).zip(x.chunks(c)) {
                // Prefix sums of x² make each window two loads.
                for i in 0..c {
                    sq[i + 1] = sq[i] + x[i] * x[i];
                }
                for i in 0..c {
                    let (lo, hi) = p.window(i, c);
                    s[i] = p.k + a * (sq[hi] - sq[lo]);
                    y[i] = x[i] * s[i].powf(-p.beta);
                }
            }
        });
}

/// Backward: `dx_i = dy_i·s_i^-β − 2αβ/n·x_i·Σ_{j: i ∈ win(j)} dy_j·y_j/s_j`.
pub fn bwd(
    p: &LrnParams,
    c: usize,
    x: &[f32],
    y: &[f32],
    scale: &[f32],
    dy: &[f32],
    dx: &mut [f32],
) {
    let coef = 2.0 * p.alpha * p.beta / p.size as f32;
    let before = (p.size - 1) / 2;
    let after = p.size - 1 - before;
    dx.par_chunks_mut(PIXELS * c)
        .enumerate()
        .for_each(|(t, dx)| {
            let o = t * PIXELS * c;
            let mut acc = vec![0.0f32; c + 1];
            for (px, dx) in dx.chunks_mut(c).enumerate() {
                let b = o + px * c;
                let (x, y, s, dy) = (&x[b..b + c], &y[b..b + c], &scale[b..b + c], &dy[b..b + c]);
                for j in 0..c {
                    acc[j + 1] = acc[j] + dy[j] * y[j] / s[j];
                }
                for i in 0..c {
                    // Channel j's window holds i when j-before <= i <= j+after.
                    let lo = i.saturating_sub(after);
                    let hi = (i + before + 1).min(c);
                    dx[i] = dy[i] * s[i].powf(-p.beta) - coef * x[i] * (acc[hi] - acc[lo]);
                }
            }
        });
}

/// Naive reference in f64.
pub fn reference_fwd(p: &LrnParams, c: usize, x: &[f32], y: &mut [f32]) {
    for (y, x) in y.chunks_mut(c).zip(x.chunks(c)) {
        for i in 0..c {
            let (lo, hi) = p.window(i, c);
            let s: f64 = (lo..hi).map(|j| (x[j] as f64).powi(2)).sum();
            let s = p.k as f64 + p.alpha as f64 / p.size as f64 * s;
            y[i] = (x[i] as f64 * s.powf(-p.beta as f64)) as f32;
        }
    }
}

/// Naive reference gradient in f64, straight from the chain rule.
pub fn reference_bwd(p: &LrnParams, c: usize, x: &[f32], dy: &[f32], dx: &mut [f32]) {
    let a = p.alpha as f64 / p.size as f64;
    let beta = p.beta as f64;
    for ((dx, x), dy) in dx.chunks_mut(c).zip(x.chunks(c)).zip(dy.chunks(c)) {
        let s: Vec<f64> = (0..c)
            .map(|j| {
                let (lo, hi) = p.window(j, c);
                p.k as f64 + a * (lo..hi).map(|m| (x[m] as f64).powi(2)).sum::<f64>()
            })
            .collect();
        for i in 0..c {
            let mut g = dy[i] as f64 * s[i].powf(-beta);
            for j in 0..c {
                let (lo, hi) = p.window(j, c);
                if (lo..hi).contains(&i) {
                    // ∂y_j/∂x_i through s_j.
                    g -= dy[j] as f64
                        * x[j] as f64
                        * beta
                        * s[j].powf(-beta - 1.0)
                        * a
                        * 2.0
                        * x[i] as f64;
                }
            }
            dx[i] = g as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv::reference::rel_l2_error;
    use crate::rng::fill_uniform;

    #[test]
    fn matches_the_reference() {
        for &(size, c, pixels) in &[(5, 96, 70), (5, 3, 4), (4, 10, 3), (3, 256, 130)] {
            let p = LrnParams {
                size,
                alpha: 0.5,
                beta: 0.75,
                k: 1.0,
            };
            let n = c * pixels;
            let (mut x, mut dy) = (vec![0.0; n], vec![0.0; n]);
            fill_uniform(&mut x, 1, 2.0);
            fill_uniform(&mut dy, 2, 1.0);
            let (mut y, mut s, mut dx) = (vec![f32::NAN; n], vec![f32::NAN; n], vec![f32::NAN; n]);
            fwd(&p, c, &x, &mut y, &mut s);
            bwd(&p, c, &x, &y, &s, &dy, &mut dx);
            let (mut wy, mut wdx) = (vec![0.0; n], vec![0.0; n]);
            reference_fwd(&p, c, &x, &mut wy);
            reference_bwd(&p, c, &x, &dy, &mut wdx);
            assert!(rel_l2_error(&y, &wy) < 1e-5, "fwd size {size} c {c}");
            let e = rel_l2_error(&dx, &wdx);
            assert!(e < 1e-5, "bwd size {size} c {c}: {e}");
        }
    }
}
