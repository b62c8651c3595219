//! JPEG and PNG files to 8-bit RGB, as PIL's `Image.open(f).convert("RGB")`
//! gives torchvision: grey replicated, alpha dropped (not composited),
//! palettes expanded, CMYK converted with Adobe's polarity, 16-bit samples
//! cut to 8 (16-bit grey clipped, as Pillow's `I;16` is). Decoding is the
//! libraries' (zune-jpeg, png); this module picks one by the file's first
//! bytes, refuses truncated files and decompression bombs, and decodes
//! into a buffer reused from image to image.

mod jpeg;
mod png;
#[cfg(test)]
pub(crate) mod tests;

use crate::image::ImageError;
use crate::image::Rgb;

/// The most pixels an image may have (2^28, 16384²): more is refused from
/// the header, before anything is allocated. ImageNet's largest photos are
/// far below it.
pub const MAX_PIXELS: usize = 1 << 28;
/// The longest side accepted.
pub const MAX_SIDE: usize = 32768;

/// The decoders' names and versions, for records (the exact versions
/// Cargo.toml pins).
pub fn decoder_name() -> &'static str {
    "zune-jpeg 0.5.16-rc3 (JPEG), png 0.18 (PNG)"
}

/// One line, whatever the library's message holds.
fn err(why: impl std::fmt::Display) -> ImageError {
    ImageError(
        why.to_string()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// Refuses empty images and bombs, from the sizes a header claims.
fn check_size(w: usize, h: usize) -> Result<(), ImageError> {
    if w == 0 || h == 0 {
        return Err(err(format!("an empty image ({w}x{h})")));
    }
    if w > MAX_SIDE || h > MAX_SIDE || w.saturating_mul(h) > MAX_PIXELS {
        return Err(err(format!(
            "{w}x{h} pixels: more than cnnbench decodes (at most {MAX_SIDE} a side and 2^28 pixels)"
        )));
    }
    Ok(())
}

/// Decodes `bytes` into `out`: JPEG (FF D8 FF) or PNG (its 8-byte
/// signature), told by content, not by name.
pub fn decode(bytes: &[u8], out: &mut Rgb) -> Result<(), ImageError> {
    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n";
    let run = || {
        if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
            jpeg::decode(bytes, out)
        } else if bytes.starts_with(PNG) {
            png::decode(bytes, out)
        } else if bytes.is_empty() {
            Err(err("an empty file"))
        } else {
            Err(err("not a JPEG or PNG"))
        }
    };
    // The decoders return errors for the files we know of; a panic inside
    // one on a file nobody foresaw costs that file, not the run.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(run))
        .unwrap_or_else(|_| Err(err("the decoder failed on this file")))
}
