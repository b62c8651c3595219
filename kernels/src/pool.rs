//! Max and average pooling, NHWC, forward and backward. Each output pixel's
//! window is clipped to the input; vectors run across channels.

use crate::simd::with_isa;
use crate::Isa;
use rayon::prelude::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolShape {
    pub mb: usize,
    pub c: usize,
    pub ih: usize,
    pub iw: usize,
    pub oh: usize,
    pub ow: usize,
    pub kh: usize,
    pub kw: usize,
    pub sh: usize,
    pub sw: usize,
    pub ph: usize,
    pub pw: usize,
    /// Average pooling divides by the window including padding (PyTorch's
    /// `count_include_pad=True`), else by the cells inside the input.
    pub count_pad: bool,
}

impl PoolShape {
    pub fn src_len(&self) -> usize {
        self.mb * self.ih * self.iw * self.c
    }
    pub fn dst_len(&self) -> usize {
        self.mb * self.oh * self.ow * self.c
    }

    /// The input rows `lo..hi` under output row `o`, and the padded window
    /// length (for the average's divisor).
    fn rows(&self, o: usize) -> (usize, usize, usize) {
        window(o, self.sh, self.ph, self.kh, self.ih)
    }
    fn cols(&self, o: usize) -> (usize, usize, usize) {
        window(o, self.sw, self.pw, self.kw, self.iw)
    }

    /// The divisor of the average at output pixel (oh, ow).
    fn divisor(&self, oh: usize, ow: usize) -> f32 {
        let (r0, r1, rp) = self.rows(oh);
        let (c0, c1, cp) = self.cols(ow);
        if self.count_pad {
            (rp * cp) as f32
        } else {
            ((r1 - r0) * (c1 - c0)) as f32
        }
    }
}

/// Input range `lo..hi` of a window, and its length counting padding but
/// not running past the far padding (PyTorch's rule in ceil mode).
fn window(o: usize, s: usize, p: usize, k: usize, n: usize) -> (usize, usize, usize) {
    let start = (o * s) as isize - p as isize;
    let end = (start + k as isize).min((n + p) as isize);
    let padded = (end - start) as usize;
    let lo = start.max(0) as usize;
    let hi = (end.min(n as isize)).max(lo as isize) as usize;
    (lo, hi, padded)
}

/// Max pooling forward; `argmax` receives, per output element, the input
/// pixel (`h·iw + w` within its image) that won.
pub fn max_fwd(isa: Isa, p: &PoolShape, x: &[f32], y: &mut [f32], argmax: &mut [u32]) {
    let c = p.c;
    y.par_chunks_mut(p.ow * c)
        .zip(argmax.par_chunks_mut(p.ow * c))
        .enumerate()
        .for_each(|(row, (y, am))| {
            let (n, oh) = (row / p.oh, row % p.oh);
            let img = &x[n * p.ih * p.iw * c..(n + 1) * p.ih * p.iw * c];
            let (r0, r1, _) = p.rows(oh);
            with_isa(isa, || {
                for ow in 0..p.ow {
                    let (c0, c1, _) = p.cols(ow);
                    let (y, am) = (&mut y[ow * c..ow * c + c], &mut am[ow * c..ow * c + c]);
                    y.fill(f32::NEG_INFINITY);
                    am.fill((r0 * p.iw + c0) as u32);
                    for ih in r0..r1 {
                        for iw in c0..c1 {
                            let pix = ih * p.iw + iw;
                            let xs = &img[pix * c..pix * c + c];
                            max_into(y, am, xs, pix as u32);
                        }
                    }
                }
            })
        });
}

/// `y = max(y, xs)` lane by lane, recording `pix` where `xs` won. Keeps
/// the first maximum; a NaN input wins and stays (it must not be hidden).
/// Blocks of 16 channels in fixed-size arrays so that it vectorises.
#[inline(always)]
fn max_into(y: &mut [f32], am: &mut [u32], xs: &[f32], pix: u32) {
    const L: usize = 16;
    let full = xs.len() / L * L;
    for ((y, am), xs) in y[..full]
        .chunks_exact_mut(L)
        .zip(am[..full].chunks_exact_mut(L))
        .zip(xs[..full].chunks_exact(L))
    {
        let y: &mut [f32; L] = y.try_into().expect("L lanes");
        let am: &mut [u32; L] = am.try_into().expect("L lanes");
        let xs: &[f32; L] = xs.try_into().expect("L lanes");
        for l in 0..L {
            let take = xs[l] > y[l] || xs[l].is_nan();
            y[l] = if take { xs[l] } else { y[l] };
            am[l] = if take { pix } else { am[l] };
        }
    }
    for i in full..xs.len() {
        if xs[i] > y[i] || xs[i].is_nan() {
            y[i] = xs[i];
            am[i] = pix;
        }
    }
}

/// Max pooling backward: each output gradient goes to its argmax.
pub fn max_bwd(p: &PoolShape, dy: &[f32], argmax: &[u32], dx: &mut [f32]) {
    let c = p.c;
    let (img_in, img_out) = (p.ih * p.iw * c, p.oh * p.ow * c);
    dx.par_chunks_mut(img_in).enumerate().for_each(|(n, dx)| {
        dx.fill(0.0);
        let (dy, am) = (
            &dy[n * img_out..(n + 1) * img_out],
            &argmax[n * img_out..(n + 1) * img_out],
        );
        for (dy, am) in dy.chunks(c).zip(am.chunks(c)) {
            for i in 0..c {
                dx[am[i] as usize * c + i] += dy[i];
            }
        }
    });
}

/// Average pooling forward.
pub fn avg_fwd(isa: Isa, p: &PoolShape, x: &[f32], y: &mut [f32]) {
    let c = p.c;
    y.par_chunks_mut(p.ow * c).enumerate().for_each(|(row, y)| {
        let (n, oh) = (row / p.oh, row % p.oh);
        let img = &x[n * p.ih * p.iw * c..(n + 1) * p.ih * p.iw * c];
        let (r0, r1, _) = p.rows(oh);
        with_isa(isa, || {
            for ow in 0..p.ow {
                let (c0, c1, _) = p.cols(ow);
                let y = &mut y[ow * c..ow * c + c];
                y.fill(0.0);
                for ih in r0..r1 {
                    for iw in c0..c1 {
                        let pix = ih * p.iw + iw;
                        for (y, &v) in y.iter_mut().zip(&img[pix * c..pix * c + c]) {
                            *y += v;
                        }
                    }
                }
                let inv = 1.0 / p.divisor(oh, ow);
                y.iter_mut().for_each(|v| *v *= inv);
            }
        })
    });
}

/// Average pooling backward: each output gradient spread over its window.
pub fn avg_bwd(isa: Isa, p: &PoolShape, dy: &[f32], dx: &mut [f32]) {
    let c = p.c;
    let (img_in, img_out) = (p.ih * p.iw * c, p.oh * p.ow * c);
    dx.par_chunks_mut(img_in).enumerate().for_each(|(n, dx)| {
        let dy = &dy[n * img_out..(n + 1) * img_out];
        with_isa(isa, || {
            dx.fill(0.0);
            for oh in 0..p.oh {
                let (r0, r1, _) = p.rows(oh);
                for ow in 0..p.ow {
                    let (c0, c1, _) = p.cols(ow);
                    let inv = 1.0 / p.divisor(oh, ow);
                    let g = &dy[(oh * p.ow + ow) * c..(oh * p.ow + ow) * c + c];
                    for ih in r0..r1 {
                        for iw in c0..c1 {
                            let pix = ih * p.iw + iw;
                            for (d, &g) in dx[pix * c..pix * c + c].iter_mut().zip(g) {
                                *d += g * inv;
                            }
                        }
                    }
                }
            }
        })
    });
}

/// Naive references, element by element in f64.
pub mod reference {
    use super::PoolShape;

    fn each_output(
        p: &PoolShape,
        mut f: impl FnMut(usize, usize, usize, usize, &[(usize, usize)], f32),
    ) {
        for n in 0..p.mb {
            for oh in 0..p.oh {
                for ow in 0..p.ow {
                    let (r0, r1, _) = p.rows(oh);
                    let (c0, c1, _) = p.cols(ow);
                    let cells: Vec<(usize, usize)> = (r0..r1)
                        .flat_map(|h| (c0..c1).map(move |w| (h, w)))
                        .collect();
                    for c in 0..p.c {
                        f(n, oh, ow, c, &cells, p.divisor(oh, ow));
                    }
                }
            }
        }
    }

    fn at(p: &PoolShape, n: usize, h: usize, w: usize, c: usize) -> usize {
        ((n * p.ih + h) * p.iw + w) * p.c + c
    }

    fn out(p: &PoolShape, n: usize, h: usize, w: usize, c: usize) -> usize {
        ((n * p.oh + h) * p.ow + w) * p.c + c
    }

    pub fn fwd(p: &PoolShape, max: bool, x: &[f32], y: &mut [f32]) {
        each_output(p, |n, oh, ow, c, cells, div| {
            let vals = cells.iter().map(|&(h, w)| x[at(p, n, h, w, c)] as f64);
            y[out(p, n, oh, ow, c)] = if max {
                vals.fold(f64::NEG_INFINITY, f64::max) as f32
            } else {
                (vals.sum::<f64>() / div as f64) as f32
            };
        });
    }

    pub fn bwd(p: &PoolShape, max: bool, x: &[f32], dy: &[f32], dx: &mut [f32]) {
        let mut acc = vec![0f64; dx.len()];
        each_output(p, |n, oh, ow, c, cells, div| {
            let g = dy[out(p, n, oh, ow, c)] as f64;
            if max {
                // The first maximum in scan order takes the gradient.
                let mut best = (f32::NEG_INFINITY, usize::MAX);
                for &(h, w) in cells {
                    let i = at(p, n, h, w, c);
                    if x[i] > best.0 {
                        best = (x[i], i);
                    }
                }
                acc[best.1] += g;
            } else {
                for &(h, w) in cells {
                    acc[at(p, n, h, w, c)] += g / div as f64;
                }
            }
        });
        for (d, a) in dx.iter_mut().zip(acc) {
            *d = a as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv::reference::rel_l2_error;
    use crate::rng::fill_uniform;

    fn shape(ih: usize, k: usize, s: usize, pad: usize, oh: usize, count_pad: bool) -> PoolShape {
        PoolShape {
            mb: 2,
            c: 19,
            ih,
            iw: ih,
            oh,
            ow: oh,
            kh: k,
            kw: k,
            sh: s,
            sw: s,
            ph: pad,
            pw: pad,
            count_pad,
        }
    }

    #[test]
    fn max_and_avg_match_the_reference() {
        for p in [
            shape(9, 3, 2, 1, 5, true),   // ResNet's stem pool
            shape(13, 3, 2, 0, 6, true),  // AlexNet's (ceil mode: 6)
            shape(14, 3, 2, 0, 7, false), // GoogLeNet's ceil-mode pools
            shape(7, 7, 1, 0, 1, true),   // global average
            shape(8, 3, 1, 1, 8, true),   // Inception's 3x3 s1 average
            shape(8, 3, 1, 1, 8, false),
        ] {
            let mut x = vec![0.0; p.src_len()];
            let mut dy = vec![0.0; p.dst_len()];
            fill_uniform(&mut x, 1, 1.0);
            fill_uniform(&mut dy, 2, 1.0);
            for isa in Isa::supported() {
                let (mut y, mut am) = (vec![f32::NAN; p.dst_len()], vec![0; p.dst_len()]);
                let mut want = vec![0.0; p.dst_len()];
                max_fwd(isa, &p, &x, &mut y, &mut am);
                reference::fwd(&p, true, &x, &mut want);
                assert_eq!(y, want, "max fwd {p:?}");
                let (mut dx, mut wdx) = (vec![f32::NAN; p.src_len()], vec![0.0; p.src_len()]);
                max_bwd(&p, &dy, &am, &mut dx);
                reference::bwd(&p, true, &x, &dy, &mut wdx);
                assert!(rel_l2_error(&dx, &wdx) < 1e-6, "max bwd {p:?}");
                avg_fwd(isa, &p, &x, &mut y);
                reference::fwd(&p, false, &x, &mut want);
                assert!(rel_l2_error(&y, &want) < 1e-6, "avg fwd {p:?}");
                avg_bwd(isa, &p, &dy, &mut dx);
                reference::bwd(&p, false, &x, &dy, &mut wdx);
                assert!(rel_l2_error(&dx, &wdx) < 1e-6, "avg bwd {p:?}");
            }
        }
    }
}
