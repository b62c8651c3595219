//! Where torchvision's transforms cut and how big they resize: its
//! `RandomResizedCrop.get_params`, `Resize(int)` and `CenterCrop`
//! arithmetic, Python's rounding included, and the seeded generator that
//! stands in for torch's.

use cnnbench_kernels::rng::SplitMix64;

/// SplitMix64: small, seeded, and enough for crop positions and flips.
/// (torch's generator is not reproduced: the same distributions, not the
/// same draws.)
pub struct Rng(SplitMix64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(SplitMix64::new(seed ^ 0x9E37_79B9_7F4A_7C15))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in [lo, hi).
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        let u = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        lo + (hi - lo) * u
    }

    /// Uniform in lo..=hi (lo when hi < lo). The modulo's bias is below
    /// 2^-40 for the spans used here.
    pub fn int(&mut self, lo: usize, hi: usize) -> usize {
        let span = (hi.saturating_sub(lo) as u64).saturating_add(1);
        lo + (self.next_u64() % span) as usize
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

/// A rectangle of the source image: top row, left column, height, width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Crop {
    pub top: usize,
    pub left: usize,
    pub height: usize,
    pub width: usize,
}

/// `RandomResizedCrop.get_params(img, scale=(0.08, 1.0), ratio=(3/4,
/// 4/3))`, step for step: ten tries at an area and a log-uniform aspect
/// ratio that fit, else the centre crop with the ratio clamped.
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
            // torch.randint(0, height - h + 1), then the same for width.
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
    // round(width / (3/4)) < height when the ratio is below 3/4 (and the
    // same for the width), so this clamp never bites; it only keeps a
    // float surprise from becoming an out-of-bounds crop.
    let (w, h) = (w.clamp(1, width.max(1)), h.clamp(1, height.max(1)));
    Crop {
        top: (height - h) / 2,
        left: (width - w) / 2,
        height: h,
        width: w,
    }
}

/// `Resize(short)` on a `width`x`height` image: the shorter side becomes
/// `short`, the longer `int(short·long/short_side)` (the product first,
/// as Python evaluates it).
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

/// `CenterCrop(size)` of a `width`x`height` image: `int(round((side −
/// size) / 2))` from the top and the left. `None` where the image is
/// smaller than the crop (never after the eval resize, which makes the
/// shorter side longer than `size`).
pub fn center_crop(width: usize, height: usize, size: usize) -> Option<Crop> {
    if width < size || height < size {
        return None;
    }
    Some(Crop {
        top: round_half_even((height - size) as f64 / 2.0) as usize,
        left: round_half_even((width - size) as f64 / 2.0) as usize,
        height: size,
        width: size,
    })
}
