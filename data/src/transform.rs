//! torchvision's ImageNet transforms, into NHWC f32: `RandomResizedCrop`
//! (its exact sampling, Python's rounding included), `RandomHorizontalFlip`
//! and `Normalize` for training, `Resize` + `CenterCrop` + `Normalize` for
//! evaluation. Resampling is fast_image_resize's bilinear convolution
//! (Pillow's filter, antialiased, SIMD); the flip and the normalisation are
//! one pass writing the batch's slot.

use crate::decode::{self, Rgb};
use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};
use std::time::Instant;

pub use crate::decode::decoder_name;

/// Which of torchvision's recipes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransformKind {
    /// RandomResizedCrop(size) + RandomHorizontalFlip + Normalize.
    Train,
    /// Resize(shorter side to round(size·256/224)) + CenterCrop(size) + Normalize.
    Eval,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transform {
    pub kind: TransformKind,
    /// The output's side: 224, 227 (AlexNet), 299 (Inception-V3).
    pub size: usize,
}

/// Seconds one image spent per stage (reading the file is the loader's).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StageTimes {
    pub decode: f64,
    /// Crop, resize, flip.
    pub augment: f64,
    /// Normalizing into the batch's f32 slot.
    pub copy: f64,
}

/// Why an image was skipped, in one line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageError(pub String);

impl std::fmt::Display for ImageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ImageError {}

/// Buffers one thread reuses from image to image (decoded pixels, resize
/// destination), so nothing is allocated per pixel.
#[derive(Default)]
pub struct Scratch {
    rgb: Rgb,
    /// The resized image (train: the output; eval: before the crop).
    resized: Vec<u8>,
    resizer: Resizer,
}

/// A crop of the source: top row, left column, height, width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Crop {
    pub top: usize,
    pub left: usize,
    pub height: usize,
    pub width: usize,
}

/// SplitMix64: small, seeded, and enough for crop positions and flips.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [lo, hi).
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        let u = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        lo + (hi - lo) * u
    }

    /// Uniform in lo..=hi.
    pub fn int(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as usize
    }
}

/// Python's `round`: halves to even (`round(2.5) == 2`), as torchvision's
/// arithmetic does.
pub fn round_half_even(x: f64) -> f64 {
    let r = x.round();
    if (x - x.trunc()).abs() == 0.5 && r % 2.0 != 0.0 {
        r - x.signum()
    } else {
        r
    }
}

/// `RandomResizedCrop.get_params(img, scale=(0.08, 1.0), ratio=(3/4,
/// 4/3))`: ten tries at an area and a log-uniform aspect ratio that fit,
/// else the centre crop with the ratio clamped.
pub fn random_resized_crop(width: usize, height: usize, rng: &mut Rng) -> Crop {
    let (scale, ratio) = ((0.08, 1.0), (3.0 / 4.0, 4.0 / 3.0));
    let area = (width * height) as f64;
    let log_ratio = (f64::ln(ratio.0), f64::ln(ratio.1));
    for _ in 0..10 {
        let target_area = area * rng.uniform(scale.0, scale.1);
        let aspect = rng.uniform(log_ratio.0, log_ratio.1).exp();
        let w = round_half_even((target_area * aspect).sqrt()) as usize;
        let h = round_half_even((target_area / aspect).sqrt()) as usize;
        if 0 < w && w <= width && 0 < h && h <= height {
            let top = rng.int(0, height - h);
            let left = rng.int(0, width - w);
            return Crop {
                top,
                left,
                height: h,
                width: w,
            };
        }
    }
    let in_ratio = width as f64 / height as f64;
    let (w, h) = if in_ratio < ratio.0 {
        (width, round_half_even(width as f64 / ratio.0) as usize)
    } else if in_ratio > ratio.1 {
        (round_half_even(height as f64 * ratio.1) as usize, height)
    } else {
        (width, height)
    };
    Crop {
        top: (height - h) / 2,
        left: (width - w) / 2,
        height: h,
        width: w,
    }
}

/// `Resize(short)` on a `width`x`height` image: the shorter side becomes
/// `short`, the longer `int(short·long/short_side)`.
pub fn resized_size(width: usize, height: usize, short: usize) -> (usize, usize) {
    if width <= height {
        (
            short,
            (short as f64 * height as f64 / width as f64) as usize,
        )
    } else {
        (
            (short as f64 * width as f64 / height as f64) as usize,
            short,
        )
    }
}

/// The eval recipe's resize for an output of `size`: 256 for 224 (259
/// for 227, 342 for 299).
pub fn eval_resize(size: usize) -> usize {
    round_half_even(size as f64 * 256.0 / 224.0) as usize
}

/// Decodes `bytes` (JPEG or PNG, told by their first bytes), converts to
/// RGB as PIL's `convert("RGB")` does, applies `t` with the randomness of
/// `seed` (train: crop and flip), and writes `t.size`² pixels as NHWC f32,
/// normalized, into `out` (length `t.size`²·3).
pub fn load_image(
    bytes: &[u8],
    t: &Transform,
    seed: u64,
    scratch: &mut Scratch,
    out: &mut [f32],
) -> Result<StageTimes, ImageError> {
    let size = t.size;
    if size == 0 || out.len() != size * size * 3 {
        return Err(ImageError(format!(
            "an output of {} values for a {size}x{size} RGB image",
            out.len()
        )));
    }
    let t0 = Instant::now();
    decode::decode(bytes, &mut scratch.rgb)?;
    let t1 = Instant::now();
    let (w, h) = (scratch.rgb.width, scratch.rgb.height);
    let mut rng = Rng::new(seed);
    let flip = match t.kind {
        TransformKind::Train => {
            let c = random_resized_crop(w, h, &mut rng);
            resize(scratch, c, (size, size))?;
            rng.next_u64() & 1 == 1
        }
        TransformKind::Eval => {
            let (rw, rh) = resized_size(w, h, eval_resize(size));
            if rw < size || rh < size {
                return Err(ImageError(format!(
                    "{w}x{h} is too small to crop {size}x{size}"
                )));
            }
            let whole = Crop {
                top: 0,
                left: 0,
                height: h,
                width: w,
            };
            resize(scratch, whole, (rw, rh))?;
            // CenterCrop: int(round((side - size) / 2)).
            let top = round_half_even((rh - size) as f64 / 2.0) as usize;
            let left = round_half_even((rw - size) as f64 / 2.0) as usize;
            let rows = &scratch.resized[(top * rw + left) * 3..];
            let t2 = Instant::now();
            normalize(rows, rw * 3, size, false, out);
            return Ok(StageTimes {
                decode: (t1 - t0).as_secs_f64(),
                augment: (t2 - t1).as_secs_f64(),
                copy: t2.elapsed().as_secs_f64(),
            });
        }
    };
    let t2 = Instant::now();
    normalize(&scratch.resized, size * 3, size, flip, out);
    Ok(StageTimes {
        decode: (t1 - t0).as_secs_f64(),
        augment: (t2 - t1).as_secs_f64(),
        copy: t2.elapsed().as_secs_f64(),
    })
}

/// Resamples `crop` of the decoded image to `to` (bilinear, antialiased)
/// into `scratch.resized`, packed.
fn resize(scratch: &mut Scratch, crop: Crop, to: (usize, usize)) -> Result<(), ImageError> {
    let rgb = &scratch.rgb;
    let bad = |e: &dyn std::fmt::Display| ImageError(format!("resizing: {e}"));
    let src = ImageRef::new(
        rgb.width as u32,
        rgb.height as u32,
        rgb.data(),
        PixelType::U8x3,
    )
    .map_err(|e| bad(&e))?;
    let need = to.0 * to.1 * 3;
    if scratch.resized.len() < need {
        scratch.resized.resize(need, 0);
    }
    let mut dst = Image::from_slice_u8(
        to.0 as u32,
        to.1 as u32,
        &mut scratch.resized[..need],
        PixelType::U8x3,
    )
    .map_err(|e| bad(&e))?;
    let opts = ResizeOptions::new()
        .resize_alg(ResizeAlg::Convolution(FilterType::Bilinear))
        .crop(
            crop.left as f64,
            crop.top as f64,
            crop.width as f64,
            crop.height as f64,
        );
    scratch
        .resizer
        .resize(&src, &mut dst, &opts)
        .map_err(|e| bad(&e))
}

/// Writes `size`² RGB8 pixels (rows `stride` bytes apart) as
/// `(x/255 − mean)/std` NHWC f32, mirrored left to right with `flip`.
fn normalize(src: &[u8], stride: usize, size: usize, flip: bool, out: &mut [f32]) {
    let mut lut = [[0f32; 256]; 3];
    for (c, table) in lut.iter_mut().enumerate() {
        for (v, x) in table.iter_mut().enumerate() {
            *x = (v as f32 / 255.0 - crate::MEAN[c]) / crate::STD[c];
        }
    }
    for (y, row_out) in out.chunks_exact_mut(size * 3).enumerate() {
        let row = &src[y * stride..][..size * 3];
        if flip {
            for (o, p) in row_out.chunks_exact_mut(3).zip(row.chunks_exact(3).rev()) {
                o[0] = lut[0][p[0] as usize];
                o[1] = lut[1][p[1] as usize];
                o[2] = lut[2][p[2] as usize];
            }
        } else {
            for (o, p) in row_out.chunks_exact_mut(3).zip(row.chunks_exact(3)) {
                o[0] = lut[0][p[0] as usize];
                o[1] = lut[1][p[1] as usize];
                o[2] = lut[2][p[2] as usize];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::tests::jpeg;

    fn train(size: usize) -> Transform {
        Transform {
            kind: TransformKind::Train,
            size,
        }
    }

    #[test]
    fn python_rounding() {
        assert_eq!(round_half_even(2.5), 2.0);
        assert_eq!(round_half_even(3.5), 4.0);
        assert_eq!(round_half_even(0.5), 0.0);
        assert_eq!(round_half_even(2.6), 3.0);
        assert_eq!(eval_resize(224), 256);
        assert_eq!(eval_resize(299), 342);
        assert_eq!(eval_resize(227), 259);
    }

    #[test]
    fn crops_stay_inside_and_follow_torchvisions_bounds() {
        for (w, h) in [
            (500, 375),
            (375, 500),
            (64, 48),
            (3, 1000),
            (1000, 3),
            (1, 1),
        ] {
            let mut rng = Rng::new(7);
            for _ in 0..500 {
                let c = random_resized_crop(w, h, &mut rng);
                assert!(c.width >= 1 && c.height >= 1, "{w}x{h}: {c:?}");
                assert!(
                    c.left + c.width <= w && c.top + c.height <= h,
                    "{w}x{h}: {c:?}"
                );
            }
        }
        // A 1000x3 strip never fits a 3/4..4/3 crop: the centre crop with
        // the ratio clamped to 4/3 (h = 3, w = round(4) = 4).
        let c = random_resized_crop(1000, 3, &mut Rng::new(1));
        assert_eq!(
            c,
            Crop {
                top: 0,
                left: 498,
                height: 3,
                width: 4
            }
        );
    }

    #[test]
    fn resized_size_is_torchvisions() {
        assert_eq!(resized_size(500, 375, 256), (341, 256));
        assert_eq!(resized_size(375, 500, 256), (256, 341));
        assert_eq!(resized_size(256, 256, 256), (256, 256));
    }

    #[test]
    fn a_constant_image_normalizes_to_the_formula() {
        let px = vec![128u8; 4 * 4 * 3];
        let mut out = vec![0.0; 4 * 4 * 3];
        normalize(&px, 12, 4, false, &mut out);
        for (k, v) in out.iter().enumerate() {
            let c = k % 3;
            let want = (128.0 / 255.0 - crate::MEAN[c]) / crate::STD[c];
            assert!((v - want).abs() < 1e-6);
        }
    }

    #[test]
    fn flip_mirrors_each_row() {
        let px: Vec<u8> = (0..3 * 3 * 3).map(|v| v as u8 * 9).collect();
        let (mut a, mut b) = (vec![0.0; 27], vec![0.0; 27]);
        normalize(&px, 9, 3, false, &mut a);
        normalize(&px, 9, 3, true, &mut b);
        for y in 0..3 {
            for x in 0..3 {
                assert_eq!(a[(y * 3 + x) * 3..][..3], b[(y * 3 + 2 - x) * 3..][..3]);
            }
        }
    }

    #[test]
    fn train_and_eval_fill_the_slot_reproducibly() {
        let j = jpeg(120, 90, jpeg_encoder::ColorType::Rgb);
        let mut s = Scratch::default();
        let (mut a, mut b) = (vec![f32::NAN; 32 * 32 * 3], vec![f32::NAN; 32 * 32 * 3]);
        let t = load_image(&j, &train(32), 5, &mut s, &mut a).expect("train");
        assert!(t.decode > 0.0 && t.augment >= 0.0 && t.copy >= 0.0);
        load_image(&j, &train(32), 5, &mut s, &mut b).expect("train again");
        assert!(a.iter().all(|v| v.is_finite()));
        assert_eq!(a, b, "the same seed, the same crop and flip");
        let differs = (0..20).any(|seed| {
            load_image(&j, &train(32), seed, &mut s, &mut b).expect("train");
            a != b
        });
        assert!(differs, "seeds change the crop");
        let eval = Transform {
            kind: TransformKind::Eval,
            size: 32,
        };
        load_image(&j, &eval, 1, &mut s, &mut a).expect("eval");
        load_image(&j, &eval, 2, &mut s, &mut b).expect("eval");
        assert_eq!(a, b, "eval ignores the seed");
    }

    #[test]
    fn eval_of_a_flat_image_is_flat_and_a_wrong_slot_is_an_error() {
        let mut px = Vec::new();
        jpeg_encoder::Encoder::new(&mut px, 100)
            .encode(&[200u8; 50 * 40 * 3], 50, 40, jpeg_encoder::ColorType::Rgb)
            .expect("encode");
        let mut s = Scratch::default();
        let eval = Transform {
            kind: TransformKind::Eval,
            size: 16,
        };
        let mut out = vec![0.0; 16 * 16 * 3];
        load_image(&px, &eval, 0, &mut s, &mut out).expect("eval");
        for (k, v) in out.iter().enumerate() {
            let c = k % 3;
            let want = (200.0 / 255.0 - crate::MEAN[c]) / crate::STD[c];
            assert!((v - want).abs() < 0.03, "{v} vs {want}");
        }
        let mut short = vec![0.0; 10];
        assert!(load_image(&px, &eval, 0, &mut s, &mut short).is_err());
    }
}
