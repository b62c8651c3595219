//! PNG by the png crate, then to RGB8 as Pillow converts each mode.

use super::{check_size, err, MAX_PIXELS};
use crate::image::{ImageError, Rgb};
use png::{BitDepth, ColorType, Transformations};

pub(super) fn decode(bytes: &[u8], out: &mut Rgb) -> Result<(), ImageError> {
    let mut d = png::Decoder::new(std::io::Cursor::new(bytes));
    // Palettes to RGB(A), grey below 8 bits scaled to 8 (as PIL's "L;2"
    // and "1" are). 16-bit samples stay 16 here: which byte survives
    // depends on the colour type (below).
    d.set_transformations(Transformations::EXPAND);
    // The decoder's own buffers: 16-bit RGBA at most, for our pixel limit.
    d.set_limits(png::Limits {
        bytes: MAX_PIXELS * 8,
    });
    let mut r = d.read_info().map_err(|e| err(format!("PNG: {e}")))?;
    let (w, h) = (r.info().width as usize, r.info().height as usize);
    check_size(w, h)?;
    // Pillow opens 16-bit grey as "I;16", whose conversion to RGB clips
    // at 255; every other 16-bit mode keeps the high byte.
    let clip_grey =
        r.info().color_type == ColorType::Grayscale && r.info().bit_depth == BitDepth::Sixteen;
    let need = r
        .output_buffer_size()
        .ok_or_else(|| err("PNG: its size overflows"))?;
    if out.png_raw.len() < need {
        out.png_raw.resize(need, 0);
    }
    let frame = r
        .next_frame(&mut out.png_raw[..need])
        .map_err(|e| err(format!("PNG: {e}")))?;
    if (frame.width as usize, frame.height as usize) != (w, h) {
        return Err(err("PNG: its first frame is not the image's size"));
    }
    let channels = match frame.color_type {
        ColorType::Grayscale => 1,
        ColorType::GrayscaleAlpha => 2,
        ColorType::Rgb => 3,
        ColorType::Rgba => 4,
        ColorType::Indexed => return Err(err("PNG: a palette left unexpanded")),
    };
    let bytes_per_sample = match frame.bit_depth {
        BitDepth::Eight => 1,
        BitDepth::Sixteen => 2,
        _ => return Err(err("PNG: samples left below 8 bits")),
    };
    let px = channels * bytes_per_sample;
    if frame.line_size < w * px || frame.line_size.checked_mul(h).is_none_or(|n| n > need) {
        return Err(err("PNG: rows that do not fit the image"));
    }
    let clip_grey = clip_grey && bytes_per_sample == 2;
    let Rgb {
        pixels, png_raw, ..
    } = out;
    if pixels.len() < w * h * 3 {
        pixels.resize(w * h * 3, 0);
    }
    for (dst, src) in pixels[..w * h * 3]
        .chunks_exact_mut(w * 3)
        .zip(png_raw.chunks(frame.line_size))
    {
        let src = &src[..w * px];
        for (d, s) in dst.chunks_exact_mut(3).zip(src.chunks_exact(px)) {
            // 16-bit samples are big-endian: s[0] is the high byte.
            let sample = |c: usize| s[c * bytes_per_sample];
            match channels {
                1 | 2 if clip_grey => {
                    let v = u16::from_be_bytes([s[0], s[1]]);
                    d.fill(v.min(255) as u8);
                }
                1 | 2 => d.fill(sample(0)),
                _ => {
                    d[0] = sample(0);
                    d[1] = sample(1);
                    d[2] = sample(2);
                }
            }
        }
    }
    out.width = w;
    out.height = h;
    Ok(())
}
