//! Naive convolution, accumulated in f64: the yardstick for every algorithm.
//! Slow on purpose; used by tests and `--check`, never timed.

use super::shape::ConvShape;

/// dst = conv(src, wei) + bias.
pub fn fwd(p: &ConvShape, src: &[f32], wei: &[f32], bias: Option<&[f32]>, dst: &mut [f32]) {
    let (icg, ocg) = (p.icg(), p.ocg());
    for n in 0..p.mb {
        for oh in 0..p.oh {
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
                        dst[p.dst_idx(n, oh, ow, oc)] = acc as f32;
                    }
                }
            }
        }
    }
}

/// diff_src = conv_transpose(diff_dst, wei).
pub fn bwd_data(p: &ConvShape, diff_dst: &[f32], wei: &[f32], diff_src: &mut [f32]) {
    let (icg, ocg) = (p.icg(), p.ocg());
    let mut acc = vec![0f64; p.src_len()];
    for n in 0..p.mb {
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
                                acc[p.src_idx(n, ih, iw, g * icg + c)] += sum;
                            }
                        }
                    }
                }
            }
        }
    }
    for (d, a) in diff_src.iter_mut().zip(acc) {
        *d = a as f32;
    }
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
    let mut acc = vec![0f64; p.wei_len()];
    for n in 0..p.mb {
        for oh in 0..p.oh {
            for ow in 0..p.ow {
                for g in 0..p.g {
                    for r in 0..p.kh {
                        let Some(ih) = p.in_row(oh, r) else { continue };
                        for s in 0..p.kw {
                            let Some(iw) = p.in_col(ow, s) else { continue };
                            for c in 0..icg {
                                let x = src[p.src_idx(n, ih, iw, g * icg + c)] as f64;
                                for k in 0..ocg {
                                    acc[p.wei_idx(g, r, s, c, k)] +=
                                        x * diff_dst[p.dst_idx(n, oh, ow, g * ocg + k)] as f64;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    for (d, a) in diff_wei.iter_mut().zip(acc) {
        *d = a as f32;
    }
    if let Some(db) = diff_bias {
        let mut sums = vec![0f64; p.oc];
        for px in diff_dst.chunks_exact(p.oc) {
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
