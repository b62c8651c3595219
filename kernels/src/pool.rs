//! Max and average pooling, NHWC, forward and backward. Each output pixel's
//! window is clipped to the input; vectors run across channels.

use crate::on_isa;
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
    let max_row = max_row_for(isa);
    y.par_chunks_mut(p.ow * c)
        .zip(argmax.par_chunks_mut(p.ow * c))
        .enumerate()
        .for_each(|(row, (y, am))| {
            let (n, oh) = (row / p.oh, row % p.oh);
            let img = &x[n * p.ih * p.iw * c..(n + 1) * p.ih * p.iw * c];
            max_row(p, img, oh, y, am);
        });
}

/// One output row `oh` of max pooling over one image: `y` and `am` hold
/// the row's `ow · c` outputs and winners.
type MaxRow = fn(&PoolShape, &[f32], usize, &mut [f32], &mut [u32]);

/// The max-pooling row kernel for `isa`, chosen once per call; the window
/// kernels are inlined into it, so nothing is called per pixel.
fn max_row_for(isa: Isa) -> MaxRow {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 if Isa::Avx512.is_supported() => x86::max_row_avx512,
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 if Isa::Avx2.is_supported() => x86::max_row_avx2,
        _ => |p, img, oh, y, am| max_row(p, img, oh, y, am, max_window_scalar),
    }
}

/// One output pixel's window: input rows `r0..r1`, columns `c0..c1` of an
/// image `iw` pixels wide with `c` channels.
#[derive(Clone, Copy)]
struct Window {
    rows: (usize, usize),
    cols: (usize, usize),
    iw: usize,
    c: usize,
}

impl Window {
    /// The window's pixels (`h·iw + w`), row by row.
    fn pixels(self) -> impl Iterator<Item = usize> {
        let (c0, c1) = self.cols;
        (self.rows.0..self.rows.1).flat_map(move |h| (c0..c1).map(move |w| h * self.iw + w))
    }

    /// The pixel a window with no winner names: its first.
    fn first(self) -> u32 {
        (self.rows.0 * self.iw + self.cols.0) as u32
    }
}

/// The output row's pixels, each window computed whole by `pixel` (every
/// channel of one output pixel: its maximum and the pixel that won).
#[inline(always)]
fn max_row(
    p: &PoolShape,
    img: &[f32],
    oh: usize,
    y: &mut [f32],
    am: &mut [u32],
    pixel: impl Fn(&mut [f32], &mut [u32], &[f32], Window),
) {
    let c = p.c;
    let (r0, r1, _) = p.rows(oh);
    for ow in 0..p.ow {
        let (c0, c1, _) = p.cols(ow);
        let w = Window {
            rows: (r0, r1),
            cols: (c0, c1),
            iw: p.iw,
            c,
        };
        pixel(
            &mut y[ow * c..ow * c + c],
            &mut am[ow * c..ow * c + c],
            img,
            w,
        );
    }
}

/// Channels `from..` of one window, lane by lane (the scalar kernel, and
/// every vector kernel's tail). Keeps the first maximum; a NaN input wins
/// and stays (it must not be hidden). LLVM does not vectorise this
/// compare-and-select pair, hence the `std::arch` kernels.
fn max_window_tail(y: &mut [f32], am: &mut [u32], img: &[f32], w: Window, from: usize) {
    let (y, am) = (&mut y[from..], &mut am[from..]);
    y.fill(f32::NEG_INFINITY);
    am.fill(w.first());
    for pix in w.pixels() {
        let xs = &img[pix * w.c + from..pix * w.c + w.c];
        for ((y, am), &x) in y.iter_mut().zip(am.iter_mut()).zip(xs) {
            if x > *y || x.is_nan() {
                *y = x;
                *am = pix as u32;
            }
        }
    }
}

fn max_window_scalar(y: &mut [f32], am: &mut [u32], img: &[f32], w: Window) {
    max_window_tail(y, am, img, w, 0)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! Each window in registers: per block of channels, the running
    //! maximum and its pixel stay in vector registers over the whole
    //! window and are stored once (the kernel that loaded and stored them
    //! for every window pixel ran the ResNet-50 stem pool's forward at a
    //! fifth of the copy bandwidth).
    use super::{max_row, max_window_tail, PoolShape, Window};
    use std::arch::x86_64::*;

    pub fn max_row_avx512(p: &PoolShape, img: &[f32], oh: usize, y: &mut [f32], am: &mut [u32]) {
        debug_assert!(is_x86_feature_detected!("avx512f"));
        // SAFETY: chosen by `max_row_for` only where AVX-512F is present.
        unsafe { avx512_max_row(p, img, oh, y, am) }
    }

    pub fn max_row_avx2(p: &PoolShape, img: &[f32], oh: usize, y: &mut [f32], am: &mut [u32]) {
        debug_assert!(is_x86_feature_detected!("avx2"));
        // SAFETY: chosen by `max_row_for` only where AVX2 is present.
        unsafe { avx2_max_row(p, img, oh, y, am) }
    }

    // The closures below are defined inside `#[target_feature]` functions,
    // so they are compiled with those features and inline the kernels.
    #[target_feature(enable = "avx512f")]
    unsafe fn avx512_max_row(p: &PoolShape, img: &[f32], oh: usize, y: &mut [f32], am: &mut [u32]) {
        max_row(p, img, oh, y, am, |y, am, img, w| {
            let mut ch = 0;
            // SAFETY: AVX-512F is present; each block lies inside the
            // window's pixels' channels and the output's `c`.
            unsafe {
                while ch + 64 <= w.c {
                    avx512_block::<4>(y, am, img, w, ch);
                    ch += 64;
                }
                while ch + 16 <= w.c {
                    avx512_block::<1>(y, am, img, w, ch);
                    ch += 16;
                }
            }
            max_window_tail(y, am, img, w, ch);
        })
    }

    #[target_feature(enable = "avx2")]
    unsafe fn avx2_max_row(p: &PoolShape, img: &[f32], oh: usize, y: &mut [f32], am: &mut [u32]) {
        max_row(p, img, oh, y, am, |y, am, img, w| {
            let mut ch = 0;
            // SAFETY: AVX2 is present; each block lies inside the window's
            // pixels' channels and the output's `c`.
            unsafe {
                while ch + 32 <= w.c {
                    avx2_block::<4>(y, am, img, w, ch);
                    ch += 32;
                }
                while ch + 8 <= w.c {
                    avx2_block::<1>(y, am, img, w, ch);
                    ch += 8;
                }
            }
            max_window_tail(y, am, img, w, ch);
        })
    }

    /// Channels `ch..ch + 16·N` of one window.
    ///
    /// # Safety
    /// AVX-512F; `ch + 16·N <= w.c`, `y` and `am` hold `w.c` values, `img`
    /// every pixel of the window.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn avx512_block<const N: usize>(
        y: &mut [f32],
        am: &mut [u32],
        img: &[f32],
        w: Window,
        ch: usize,
    ) {
        debug_assert!(ch + 16 * N <= w.c && y.len() >= w.c && am.len() >= w.c);
        let mut yv = [_mm512_set1_ps(f32::NEG_INFINITY); N];
        let mut av = [_mm512_set1_epi32(w.first() as i32); N];
        for pix in w.pixels() {
            let p = _mm512_set1_epi32(pix as i32);
            let xp = img[pix * w.c + ch..pix * w.c + ch + 16 * N].as_ptr();
            for j in 0..N {
                // SAFETY: 16·N floats from xp were bounds-checked above.
                let x = unsafe { _mm512_loadu_ps(xp.add(16 * j)) };
                let take = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(x, yv[j])
                    | _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x);
                yv[j] = _mm512_mask_mov_ps(yv[j], take, x);
                av[j] = _mm512_mask_mov_epi32(av[j], take, p);
            }
        }
        for j in 0..N {
            // SAFETY: ch + 16·N <= w.c <= the lengths of y and am.
            unsafe {
                _mm512_storeu_ps(y.as_mut_ptr().add(ch + 16 * j), yv[j]);
                _mm512_storeu_si512(am.as_mut_ptr().add(ch + 16 * j).cast(), av[j]);
            }
        }
    }

    /// Channels `ch..ch + 8·N` of one window.
    ///
    /// # Safety
    /// AVX2; `ch + 8·N <= w.c`, `y` and `am` hold `w.c` values, `img`
    /// every pixel of the window.
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn avx2_block<const N: usize>(
        y: &mut [f32],
        am: &mut [u32],
        img: &[f32],
        w: Window,
        ch: usize,
    ) {
        debug_assert!(ch + 8 * N <= w.c && y.len() >= w.c && am.len() >= w.c);
        let mut yv = [_mm256_set1_ps(f32::NEG_INFINITY); N];
        let mut av = [_mm256_castsi256_ps(_mm256_set1_epi32(w.first() as i32)); N];
        for pix in w.pixels() {
            let p = _mm256_castsi256_ps(_mm256_set1_epi32(pix as i32));
            let xp = img[pix * w.c + ch..pix * w.c + ch + 8 * N].as_ptr();
            for j in 0..N {
                // SAFETY: 8·N floats from xp were bounds-checked above.
                let x = unsafe { _mm256_loadu_ps(xp.add(8 * j)) };
                let take = _mm256_or_ps(
                    _mm256_cmp_ps::<_CMP_GT_OQ>(x, yv[j]),
                    _mm256_cmp_ps::<_CMP_UNORD_Q>(x, x),
                );
                yv[j] = _mm256_blendv_ps(yv[j], x, take);
                av[j] = _mm256_blendv_ps(av[j], p, take);
            }
        }
        for j in 0..N {
            // SAFETY: ch + 8·N <= w.c <= the lengths of y and am.
            unsafe {
                _mm256_storeu_ps(y.as_mut_ptr().add(ch + 8 * j), yv[j]);
                _mm256_storeu_ps(am.as_mut_ptr().add(ch + 8 * j).cast(), av[j]);
            }
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
        on_isa!(isa, {
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
                for v in y.iter_mut() {
                    *v *= inv;
                }
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
        on_isa!(isa, {
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
    fn every_isas_max_lanes_keep_ties_first_and_nans() {
        // One output over a 1x5 window: blocks of four vectors, single
        // vectors and a tail on every ISA.
        for c in [37, 45, 77, 141] {
            every_isas_max_lanes_agree(c);
        }
    }

    fn every_isas_max_lanes_agree(c: usize) {
        let p = PoolShape {
            mb: 1,
            c,
            ih: 1,
            iw: 5,
            oh: 1,
            ow: 1,
            kh: 1,
            kw: 5,
            sh: 1,
            sw: 1,
            ph: 0,
            pw: 0,
            count_pad: true,
        };
        let img: Vec<f32> = (0..5usize)
            .flat_map(|pix| {
                (0..c).map(move |l| match (l + pix) % 6 {
                    0 => f32::NAN,
                    1 => 1.0, // ties between pixels
                    k => (k as f32) * if pix % 2 == 0 { 1.0 } else { -1.0 },
                })
            })
            .collect();
        let run = |f: MaxRow| {
            let (mut y, mut am) = (vec![0.0; c], vec![0u32; c]);
            f(&p, &img, 0, &mut y, &mut am);
            (y.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), am)
        };
        let want = run(max_row_for(Isa::Scalar));
        assert!(want.1.iter().any(|&a| a > 0), "later pixels win somewhere");
        for isa in Isa::supported() {
            assert_eq!(run(max_row_for(isa)), want, "{isa:?}");
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
