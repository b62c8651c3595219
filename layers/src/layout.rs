//! Memory layouts, and conversion to the logical order that other frameworks
//! read (N,C,H,W for activations; K,C/g,R,S for weights).

use cnnbench_kernels::conv::ConvShape;
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Channels innermost: `[n][h][w][c]`.
    Nhwc,
}

impl Layout {
    pub fn name(self) -> &'static str {
        match self {
            Layout::Nhwc => "nhwc",
        }
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `[n][h][w][c]` to `[n][c][h][w]`.
pub fn nhwc_to_nchw(x: &[f32], n: usize, h: usize, w: usize, c: usize) -> Vec<f32> {
    assert_eq!(x.len(), n * h * w * c);
    let mut out = vec![0f32; x.len()];
    for ni in 0..n {
        for hi in 0..h {
            for wi in 0..w {
                let src = &x[((ni * h + hi) * w + wi) * c..][..c];
                for (ci, &v) in src.iter().enumerate() {
                    out[((ni * c + ci) * h + hi) * w + wi] = v;
                }
            }
        }
    }
    out
}

/// CPU weights `[g][r][s][c/g][k/g]` to logical `[k][c/g][r][s]`
/// (k = g·(k/g) + k_in_group), the order PyTorch and oneDNN use.
pub fn ghwio_to_kcrs(w: &[f32], p: &ConvShape) -> Vec<f32> {
    assert_eq!(w.len(), p.wei_len());
    let (icg, ocg) = (p.icg(), p.ocg());
    let mut out = vec![0f32; w.len()];
    for g in 0..p.g {
        for r in 0..p.kh {
            for s in 0..p.kw {
                for c in 0..icg {
                    for k in 0..ocg {
                        let oc = g * ocg + k;
                        out[((oc * icg + c) * p.kh + r) * p.kw + s] = w[p.wei_idx(g, r, s, c, k)];
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nhwc_to_nchw_moves_channels_out() {
        // n=1, h=1, w=2, c=3: [[a0 a1 a2] [b0 b1 b2]] -> [a0 b0 a1 b1 a2 b2]
        let x = [0., 1., 2., 10., 11., 12.];
        assert_eq!(
            nhwc_to_nchw(&x, 1, 1, 2, 3),
            vec![0., 10., 1., 11., 2., 12.]
        );
    }

    #[test]
    fn weights_to_kcrs_with_groups() {
        let p = ConvShape {
            mb: 1,
            g: 2,
            ic: 2,
            ih: 3,
            iw: 3,
            oc: 4,
            oh: 2,
            ow: 3,
            kh: 2,
            kw: 1,
            sh: 1,
            sw: 1,
            ph: 0,
            pw: 0,
            dh: 0,
            dw: 0,
        };
        let w: Vec<f32> = (0..p.wei_len()).map(|i| i as f32).collect();
        let kcrs = ghwio_to_kcrs(&w, &p);
        // Every element lands exactly once.
        let mut sorted = kcrs.clone();
        sorted.sort_by(f32::total_cmp);
        assert_eq!(sorted, w);
        // oc 3 = group 1, k 1; c 0; r 1; s 0: ((oc·icg + c)·kh + r)·kw + s = 7.
        assert_eq!(kcrs[7], w[p.wei_idx(1, 1, 0, 0, 1)]);
    }
}
