//! The passes over pixels: resampling (fast_image_resize's bilinear
//! convolution, Pillow's antialiased filter) and the one pass that
//! normalizes, flips and widens to f32 into the batch's slot.

use super::geometry::Crop;
use crate::image::{ImageError, Rgb};
use fast_image_resize::images::{CroppedImage, Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};
use std::sync::OnceLock;

fn bad(e: impl std::fmt::Display) -> ImageError {
    ImageError(format!("resizing: {e}"))
}

fn source(rgb: &Rgb) -> Result<ImageRef<'_>, ImageError> {
    ImageRef::new(
        rgb.width as u32,
        rgb.height as u32,
        rgb.data(),
        PixelType::U8x3,
    )
    .map_err(bad)
}

/// A `to.0`x`to.1` RGB8 destination in `buf`, grown if needed.
fn destination(buf: &mut Vec<u8>, to: (usize, usize)) -> Result<Image<'_>, ImageError> {
    let need = to.0 * to.1 * 3;
    if buf.len() < need {
        buf.resize(need, 0);
    }
    Image::from_slice_u8(to.0 as u32, to.1 as u32, &mut buf[..need], PixelType::U8x3).map_err(bad)
}

fn bilinear() -> ResizeOptions {
    ResizeOptions::new().resize_alg(ResizeAlg::Convolution(FilterType::Bilinear))
}

/// torchvision's `resized_crop` on a PIL image: `img.crop(box)` then
/// `resize(to, BILINEAR)`. The crop is a view of the decoded rows, not a
/// copy; being a view of its own (not a crop box of the whole image) the
/// filter sees nothing beyond its edges, as after PIL's crop.
pub fn crop_then_resize(
    rgb: &Rgb,
    crop: Crop,
    to: (usize, usize),
    resizer: &mut Resizer,
    buf: &mut Vec<u8>,
) -> Result<(), ImageError> {
    let src = source(rgb)?;
    let view = CroppedImage::new(
        &src,
        crop.left as u32,
        crop.top as u32,
        crop.width as u32,
        crop.height as u32,
    )
    .map_err(bad)?;
    let mut dst = destination(buf, to)?;
    resizer.resize(&view, &mut dst, &bilinear()).map_err(bad)
}

/// `Resize((rw, rh))` then `crop` of the resized image, computed as one
/// resample of the source box that maps onto `crop`: each output pixel
/// gets the same filter taps as in the whole resized image (the box's
/// filter reaches past its edges into the image, as the whole resize
/// does), and only `crop`'s pixels are made, so a long thin image cannot
/// blow up the resized buffer.
pub fn resize_then_crop(
    rgb: &Rgb,
    resized: (usize, usize),
    crop: Crop,
    resizer: &mut Resizer,
    buf: &mut Vec<u8>,
) -> Result<(), ImageError> {
    let src = source(rgb)?;
    let sx = rgb.width as f64 / resized.0 as f64;
    let sy = rgb.height as f64 / resized.1 as f64;
    let opts = bilinear().crop(
        crop.left as f64 * sx,
        crop.top as f64 * sy,
        crop.width as f64 * sx,
        crop.height as f64 * sy,
    );
    let mut dst = destination(buf, (crop.width, crop.height))?;
    resizer.resize(&src, &mut dst, &opts).map_err(bad)
}

/// `(v/255 − mean[c])/std[c]` for every byte value and channel, made once.
fn normalize_table() -> &'static [[f32; 256]; 3] {
    static TABLE: OnceLock<[[f32; 256]; 3]> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut lut = [[0f32; 256]; 3];
        for (c, table) in lut.iter_mut().enumerate() {
            for (v, x) in table.iter_mut().enumerate() {
                *x = (v as f32 / 255.0 - crate::MEAN[c]) / crate::STD[c];
            }
        }
        lut
    })
}

/// Writes `size`² packed RGB8 pixels as ToTensor + Normalize would, NHWC
/// f32, mirrored left to right with `flip` (RandomHorizontalFlip folded
/// into the same pass). `src` holds at least `size`²·3 bytes.
pub fn normalize(src: &[u8], size: usize, flip: bool, out: &mut [f32]) {
    let lut = normalize_table();
    let row_len = size * 3;
    for (row_out, row) in out.chunks_exact_mut(row_len).zip(src.chunks_exact(row_len)) {
        let put = |o: &mut [f32], p: &[u8]| {
            o[0] = lut[0][p[0] as usize];
            o[1] = lut[1][p[1] as usize];
            o[2] = lut[2][p[2] as usize];
        };
        if flip {
            for (o, p) in row_out.chunks_exact_mut(3).zip(row.chunks_exact(3).rev()) {
                put(o, p);
            }
        } else {
            for (o, p) in row_out.chunks_exact_mut(3).zip(row.chunks_exact(3)) {
                put(o, p);
            }
        }
    }
}
