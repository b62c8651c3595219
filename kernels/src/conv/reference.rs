//! Naive convolution, accumulated in f64: the yardstick for every algorithm.
//! Slow on purpose; used by tests and `--check`, never timed. It runs on
//! rayon over independent outputs (images, rows or channels) only to keep
//! checks of real layers bearable; each element is still a plain loop.

use super::shape::ConvShape;
use rayon::prelude::*;

/// dst = conv(src, wei) + bias.
pub fn fwd(p: &ConvShape, src: &[f32], wei: &[f32], bias: Option<&[f32]>, dst: &mut [f32]) {
    let (icg, ocg) = (p.icg(), p.ocg());
    // One output row (n, oh) per work item.
    dst[..p.dst_len()]
        .par_chunks_mut(p.ow * p.oc)
        .enumerate()
        .for_each(|(row, dst_row)| {
            let (n, oh) = (row / p.oh, row % p.oh);
            for ow in 0..p.ow {
                for g in 0..p.g {
                    for k in 0..ocg {
                        let oc = g * ocg + k;
                        let mut acc = bias.map_or(0.0, |b| b[oc] as f64);
                        for r in 0..p.kh {
                            let Some(ih) = p.in_row(oh, r) else { continue };
                            for s in 0..p.kw {
                                let Some(iw) = p.in_col(ow, s) else { continue };
                                for c in 0..icg {
                                    acc += src[p.src_idx(n, ih, iw, g * icg + c)] as f64
                                        * wei[p.wei_idx(g, r, s, c, k)] as f64;
                                }
                            }
                        }
                        dst_row[ow * p.oc + oc] = acc as f32;
                    }
                }
            }
        });
}

/// diff_src = conv_transpose(diff_dst, wei).
pub fn bwd_data(p: &ConvShape, diff_dst: &[f32], wei: &[f32], diff_src: &mut [f32]) {
    let (icg, ocg) = (p.icg(), p.ocg());
    let image = p.ih * p.iw * p.ic;
    // One image per work item: images never share diff_src elements.
    diff_src[..p.src_len()]
        .par_chunks_mut(image)
        .enumerate()
        .for_each(|(n, out)| {
            let mut acc = vec![0f64; image];
            for oh in 0..p.oh {
                for ow in 0..p.ow {
                    for g in 0..p.g {
                        for r in 0..p.kh {
                            let Some(ih) = p.in_row(oh, r) else { continue };
                            for s in 0..p.kw {
                                let Some(iw) = p.in_col(ow, s) else { continue };
                                for c in 0..icg {
                                    let mut sum = 0f64;
                                    for k in 0..ocg {
                                        sum += diff_dst[p.dst_idx(n, oh, ow, g * ocg + k)] as f64
                                            * wei[p.wei_idx(g, r, s, c, k)] as f64;
                                    }
                                    acc[p.src_idx(0, ih, iw, g * icg + c)] += sum;
                                }
                            }
                        }
                    }
                }
            }
            for (d, a) in out.iter_mut().zip(acc) {
                *d = a as f32;
            }
        });
}

/// diff_wei = corr(src, diff_dst); diff_bias = sum of diff_dst per channel.
pub fn bwd_filter(
    p: &ConvShape,
    src: &[f32],
    diff_dst: &[f32],
    diff_wei: &mut [f32],
    diff_bias: Option<&mut [f32]>,
) {
    let (icg, ocg) = (p.icg(), p.ocg());
    // One (group, input channel) per work item; it owns wei[g][..][..][c][..].
    let sums: Vec<(usize, usize, Vec<f64>)> = (0..p.g * icg)
        .into_par_iter()
        .map(|gc| {
            let (g, c) = (gc / icg, gc % icg);
            let mut acc = vec![0f64; p.kh * p.kw * ocg];
            for n in 0..p.mb {
                for oh in 0..p.oh {
                    for ow in 0..p.ow {
                        for r in 0..p.kh {
                            let Some(ih) = p.in_row(oh, r) else { continue };
                            for s in 0..p.kw {
                                let Some(iw) = p.in_col(ow, s) else { continue };
                                let x = src[p.src_idx(n, ih, iw, g * icg + c)] as f64;
                                for k in 0..ocg {
                                    acc[(r * p.kw + s) * ocg + k] +=
                                        x * diff_dst[p.dst_idx(n, oh, ow, g * ocg + k)] as f64;
                                }
                            }
                        }
                    }
                }
            }
            (g, c, acc)
        })
        .collect();
    for (g, c, acc) in sums {
        for r in 0..p.kh {
            for s in 0..p.kw {
                for k in 0..ocg {
                    diff_wei[p.wei_idx(g, r, s, c, k)] = acc[(r * p.kw + s) * ocg + k] as f32;
                }
            }
        }
    }
    if let Some(db) = diff_bias {
        let mut sums = vec![0f64; p.oc];
        for px in diff_dst[..p.dst_len()].chunks_exact(p.oc) {
            for (s, &v) in sums.iter_mut().zip(px) {
                *s += v as f64;
            }
        }
        for (d, s) in db.iter_mut().zip(sums) {
            *d = s as f32;
        }
    }
}

/// Relative L2 error `||got - want|| / ||want||` (or the absolute norm when
/// `want` is all zeros), computed in f64.
pub fn rel_l2_error(got: &[f32], want: &[f32]) -> f64 {
    assert_eq!(got.len(), want.len());
    let (mut diff, mut norm) = (0f64, 0f64);
    for (&g, &w) in got.iter().zip(want) {
        let d = g as f64 - w as f64;
        diff += d * d;
        norm += (w as f64) * (w as f64);
    }
    if !diff.is_finite() {
        return f64::INFINITY;
    }
    if norm == 0.0 {
        diff.sqrt()
    } else {
        (diff / norm).sqrt()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 1-channel 3x3 input, 2x2 kernel, stride 1: small enough to work out
    /// by hand, so the reference itself is checked against arithmetic.
    #[test]
    fn hand_computed_values() {
        let p = ConvShape {
            mb: 1,
            g: 1,
            ic: 1,
            ih: 3,
            iw: 3,
            oc: 1,
            oh: 2,
            ow: 2,
            kh: 2,
            kw: 2,
            sh: 1,
            sw: 1,
            ph: 0,
            pw: 0,
            dh: 0,
            dw: 0,
        };
        let src = [1., 2., 3., 4., 5., 6., 7., 8., 9.];
        let wei = [1., 0., 0., -1.]; // x[i][j] - x[i+1][j+1]
        let mut dst = [0f32; 4];
        fwd(&p, &src, &wei, Some(&[10.0]), &mut dst);
        assert_eq!(dst, [6., 6., 6., 6.]);
        let dd = [1., 2., 3., 4.];
        let mut ds = [0f32; 9];
        bwd_data(&p, &dd, &wei, &mut ds);
        assert_eq!(ds, [1., 2., 0., 3., 3., -2., 0., -3., -4.]);
        let (mut dw, mut db) = ([0f32; 4], [0f32; 1]);
        bwd_filter(&p, &src, &dd, &mut dw, Some(&mut db));
        // dw[r][s] = sum over outputs of dd * x[oh+r][ow+s]
        assert_eq!(dw, [37., 47., 67., 77.]);
        assert_eq!(db, [10.]);
    }
}
