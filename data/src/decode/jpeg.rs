//! JPEG by zune-jpeg, straight to RGB8.
//!
//! Colour matches Pillow (checked against Pillow 13's convert("RGB") on
//! CMYK files written by Pillow and by jpeg-encoder, with and without the
//! APP14 marker, and on YCCK):
//! grey is replicated; CMYK is read with Adobe's inverted polarity whether
//! or not an Adobe APP14 marker says so (Pillow's "CMYK;I", "always use
//! Adobe polarity") and zune's `C·K/255`, rounded, is exactly Pillow's
//! `cmyk2rgb` on the inverted values (see the tests); YCCK goes through
//! YCbCr first, as libjpeg does. What remains are libjpeg-turbo's and
//! zune's own roundings (IDCT, chroma upsampling): ±1 mostly, a few levels
//! at most.

use super::{check_size, err, MAX_SIDE};
use crate::image::{ImageError, Rgb};
use zune_core::bytestream::ZCursor;
use zune_core::colorspace::ColorSpace;
use zune_core::options::DecoderOptions;
use zune_jpeg::JpegDecoder;

pub(super) fn decode(bytes: &[u8], out: &mut Rgb) -> Result<(), ImageError> {
    // Data that ends before the image does is an error, as PIL's "image
    // file is truncated", not an image padded with grey. zune's strict
    // mode catches most cuts but not those inside the last row of blocks
    // (tens of bytes), so the end-of-image marker is required too.
    if !has_end_of_image(bytes) {
        return Err(err(
            "JPEG: truncated (no end-of-image marker after the image data)",
        ));
    }
    let opts = DecoderOptions::default()
        .set_strict_mode(true)
        .set_max_width(MAX_SIDE)
        .set_max_height(MAX_SIDE)
        .jpeg_set_out_colorspace(ColorSpace::RGB);
    let mut d = JpegDecoder::new_with_options(ZCursor::new(bytes), opts);
    d.decode_headers().map_err(zune)?;
    let info = d.info().ok_or_else(|| err("JPEG: no frame header"))?;
    let (w, h) = (info.width as usize, info.height as usize);
    check_size(w, h)?;
    let need = d
        .output_buffer_size()
        .ok_or_else(|| err("JPEG: no output size"))?;
    if need != w * h * 3 {
        return Err(err(format!("JPEG: {need} output bytes for {w}x{h} RGB")));
    }
    d.decode_into(out.grow(need)).map_err(zune)?;
    out.width = w;
    out.height = h;
    Ok(())
}

/// zune's message, without the quotes its Display puts round some.
fn zune(e: zune_jpeg::errors::DecodeErrors) -> ImageError {
    err(format!("JPEG: {}", e.to_string().trim_matches('"')))
}

/// Whether an EOI marker (FF D9) follows the first scan. Entropy-coded
/// data never holds FF D9 (an FF there is followed by 00 or a restart
/// marker), so one found after the first SOS ends the image; markers
/// before the SOS are walked by their lengths, so an EXIF thumbnail's own
/// EOI does not count.
fn has_end_of_image(bytes: &[u8]) -> bool {
    const EOI: [u8; 2] = [0xFF, 0xD9];
    if bytes.ends_with(&EOI) {
        return true; // nearly every file: nothing to search
    }
    match first_scan(bytes) {
        Some(sos) => bytes[sos..].windows(2).any(|w| w == EOI),
        // No scan found by this walk: zune will say what is wrong.
        None => true,
    }
}

/// The offset of the first SOS marker, walking the segments from the SOI.
fn first_scan(bytes: &[u8]) -> Option<usize> {
    let mut at = 2;
    loop {
        if *bytes.get(at)? != 0xFF {
            return None;
        }
        match *bytes.get(at + 1)? {
            0xFF => at += 1,               // fill byte
            0xDA => return Some(at),       // SOS
            0x01 | 0xD0..=0xD7 => at += 2, // no length
            _ => {
                let len = u16::from_be_bytes([*bytes.get(at + 2)?, *bytes.get(at + 3)?]);
                at += 2 + len as usize;
            }
        }
    }
}
