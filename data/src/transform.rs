//! torchvision's ImageNet transforms, into NHWC f32: `RandomResizedCrop`
//! (its exact sampling, Python's rounding included), `RandomHorizontalFlip`
//! and `Normalize` for training, `Resize` + `CenterCrop` + `Normalize` for
//! evaluation. Resampling is fast_image_resize's bilinear convolution
//! (Pillow's filter, antialiased, SIMD); the flip and the normalisation are
//! one pass writing the batch's slot.

mod geometry;
mod pixels;
#[cfg(test)]
mod tests;

use crate::decode;
use crate::image::ImageError;
use crate::image::Rgb;
use cnnbench_kernels::clock::Stopwatch;
use fast_image_resize::Resizer;

pub use crate::decode::decoder_name;
pub use geometry::{
    center_crop, eval_resize, random_resized_crop, resized_size, round_half_even, Crop, Rng,
};

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
    /// Crop, resize (the flip is folded into `copy`'s pass).
    pub augment: f64,
    /// Normalizing (and flipping) into the batch's f32 slot.
    pub copy: f64,
}

/// Buffers one thread reuses from image to image (decoded pixels, the
/// resampled `size`² pixels, the resizer's own), so a steady stream of
/// images allocates nothing new here.
#[derive(Default)]
pub struct Scratch {
    rgb: Rgb,
    resized: Vec<u8>,
    resizer: Resizer,
}

/// Decodes `bytes` (JPEG or PNG, told by their first bytes), converts to
/// RGB as PIL's `convert("RGB")` does, applies `t` with the randomness of
/// `seed` (train: crop and flip; eval uses none), and writes `t.size`²
/// pixels as NHWC f32, normalized, into `out` (length `t.size`²·3).
pub fn load_image(
    bytes: &[u8],
    t: &Transform,
    seed: u64,
    scratch: &mut Scratch,
    out: &mut [f32],
) -> Result<StageTimes, ImageError> {
    let size = t.size;
    let want = size.checked_mul(size).and_then(|n| n.checked_mul(3));
    if size == 0 || Some(out.len()) != want {
        return Err(ImageError(format!(
            "an output of {} values for a {size}x{size} RGB image",
            out.len()
        )));
    }
    let mut clock = Stopwatch::start();
    decode::decode(bytes, &mut scratch.rgb)?;
    let decoding = clock.lap();
    let rgb = &scratch.rgb;
    let flip = match t.kind {
        TransformKind::Train => {
            let mut rng = Rng::new(seed);
            let crop = random_resized_crop(rgb.width, rgb.height, &mut rng);
            pixels::crop_then_resize(
                rgb,
                crop,
                (size, size),
                &mut scratch.resizer,
                &mut scratch.resized,
            )?;
            // RandomHorizontalFlip(p=0.5), drawn after the crop as
            // torchvision's Compose does.
            rng.next_u64() >> 63 == 1
        }
        TransformKind::Eval => {
            let resized = resized_size(rgb.width, rgb.height, eval_resize(size));
            let crop = center_crop(resized.0, resized.1, size).ok_or_else(|| {
                ImageError(format!(
                    "{}x{} resized to {}x{} is smaller than {size}x{size}",
                    rgb.width, rgb.height, resized.0, resized.1
                ))
            })?;
            pixels::resize_then_crop(
                rgb,
                resized,
                crop,
                &mut scratch.resizer,
                &mut scratch.resized,
            )?;
            false
        }
    };
    let augmenting = clock.lap();
    pixels::normalize(&scratch.resized, size, flip, out);
    Ok(StageTimes {
        decode: decoding.as_secs_f64(),
        augment: augmenting.as_secs_f64(),
        copy: clock.elapsed_s(),
    })
}
