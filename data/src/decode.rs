//! JPEG and PNG files to 8-bit RGB, as PIL's `Image.open(f).convert("RGB")`
//! gives torchvision: grey replicated, alpha dropped (not composited),
//! palettes expanded, 16-bit samples cut to 8, CMYK converted. Decoding is
//! the libraries' (zune-jpeg, png); this module picks one by the file's
//! first bytes, refuses truncated files and decompression bombs, and
//! decodes into a buffer reused from image to image.

use crate::transform::ImageError;
use zune_core::bytestream::ZCursor;
use zune_core::colorspace::ColorSpace;
use zune_core::options::DecoderOptions;
use zune_jpeg::JpegDecoder;

/// The most pixels an image may have (2^28, 16384²): more is refused from
/// the header, before anything is allocated. ImageNet's largest photos are
/// far below it.
pub const MAX_PIXELS: usize = 1 << 28;
/// The longest side accepted.
pub const MAX_SIDE: usize = 32768;

/// The decoder's name and version, for records.
pub fn decoder_name() -> &'static str {
    "zune-jpeg 0.5 (JPEG), png 0.18 (PNG)"
}

/// An image decoded to RGB8, rows packed, in a buffer kept for the next.
#[derive(Default)]
pub struct Rgb {
    pub width: usize,
    pub height: usize,
    /// `width·height·3` bytes (the buffer may be longer).
    pub pixels: Vec<u8>,
    /// The PNG decoder's own output before conversion to RGB.
    png_raw: Vec<u8>,
}

impl Rgb {
    pub fn data(&self) -> &[u8] {
        &self.pixels[..self.width * self.height * 3]
    }
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
            decode_jpeg(bytes, out)
        } else if bytes.starts_with(PNG) {
            decode_png(bytes, out)
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

fn decode_jpeg(bytes: &[u8], out: &mut Rgb) -> Result<(), ImageError> {
    // Strict: a truncated or corrupt file is an error, as PIL's "image
    // file is truncated", not an image padded with grey.
    let opts = DecoderOptions::default()
        .set_strict_mode(true)
        .set_max_width(MAX_SIDE)
        .set_max_height(MAX_SIDE)
        .jpeg_set_out_colorspace(ColorSpace::RGB);
    let mut d = JpegDecoder::new_with_options(ZCursor::new(bytes), opts);
    d.decode_headers()
        .map_err(|e| err(format!("JPEG: {e:?}")))?;
    let info = d.info().ok_or_else(|| err("JPEG: no frame header"))?;
    let (w, h) = (info.width as usize, info.height as usize);
    check_size(w, h)?;
    let need = d
        .output_buffer_size()
        .ok_or_else(|| err("JPEG: no output size"))?;
    if need != w * h * 3 {
        return Err(err(format!("JPEG: {need} output bytes for {w}x{h} RGB")));
    }
    if out.pixels.len() < need {
        out.pixels.resize(need, 0);
    }
    d.decode_into(&mut out.pixels[..need])
        .map_err(|e| err(format!("JPEG: {e:?}")))?;
    out.width = w;
    out.height = h;
    Ok(())
}

fn decode_png(bytes: &[u8], out: &mut Rgb) -> Result<(), ImageError> {
    let mut d = png::Decoder::new(std::io::Cursor::new(bytes));
    // Palettes and low bit depths expanded to 8 bits, 16 bits cut to 8.
    d.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    d.set_limits(png::Limits {
        bytes: MAX_PIXELS * 4,
    });
    let mut r = d.read_info().map_err(|e| err(format!("PNG: {e}")))?;
    let (w, h) = (r.info().width as usize, r.info().height as usize);
    check_size(w, h)?;
    let need = r
        .output_buffer_size()
        .ok_or_else(|| err("PNG: its size overflows"))?;
    if out.png_raw.len() < need {
        out.png_raw.resize(need, 0);
    }
    let frame = r
        .next_frame(&mut out.png_raw[..need])
        .map_err(|e| err(format!("PNG: {e}")))?;
    let channels = match frame.color_type {
        png::ColorType::Grayscale => 1,
        png::ColorType::GrayscaleAlpha => 2,
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        png::ColorType::Indexed => return Err(err("PNG: a palette left unexpanded")),
    };
    if frame.bit_depth != png::BitDepth::Eight {
        return Err(err("PNG: samples left at other than 8 bits"));
    }
    if out.pixels.len() < w * h * 3 {
        out.pixels.resize(w * h * 3, 0);
    }
    for y in 0..h {
        let src = &out.png_raw[y * frame.line_size..][..w * channels];
        let dst = &mut out.pixels[y * w * 3..][..w * 3];
        for (d, s) in dst.chunks_exact_mut(3).zip(src.chunks_exact(channels)) {
            match channels {
                1 | 2 => d.fill(s[0]),
                _ => d.copy_from_slice(&s[..3]),
            }
        }
    }
    out.width = w;
    out.height = h;
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A JPEG of `w`x`h` with a smooth gradient, at quality 90.
    pub fn jpeg(w: u16, h: u16, color: jpeg_encoder::ColorType) -> Vec<u8> {
        let ch = match color {
            jpeg_encoder::ColorType::Luma => 1,
            jpeg_encoder::ColorType::Cmyk | jpeg_encoder::ColorType::Rgba => 4,
            _ => 3,
        };
        let mut px = Vec::with_capacity(w as usize * h as usize * ch);
        for y in 0..h as usize {
            for x in 0..w as usize {
                for c in 0..ch {
                    px.push(((x * 255 / w as usize + y * 7 + c * 40) % 256) as u8);
                }
            }
        }
        let mut out = Vec::new();
        jpeg_encoder::Encoder::new(&mut out, 90)
            .encode(&px, w, h, color)
            .expect("encoding a test JPEG");
        out
    }

    fn png_bytes(
        w: u32,
        h: u32,
        color: png::ColorType,
        depth: png::BitDepth,
        data: &[u8],
    ) -> Vec<u8> {
        let mut out = Vec::new();
        {
            let mut e = png::Encoder::new(&mut out, w, h);
            e.set_color(color);
            e.set_depth(depth);
            if color == png::ColorType::Indexed {
                e.set_palette(vec![255, 0, 0, 0, 255, 0]);
            }
            let mut wr = e.write_header().expect("PNG header");
            wr.write_image_data(data).expect("PNG data");
        }
        out
    }

    #[test]
    fn rgb_and_grey_jpegs_decode_to_rgb() {
        let mut rgb = Rgb::default();
        decode(&jpeg(40, 30, jpeg_encoder::ColorType::Rgb), &mut rgb).expect("RGB JPEG");
        assert_eq!((rgb.width, rgb.height), (40, 30));
        assert_eq!(rgb.data().len(), 40 * 30 * 3);
        decode(&jpeg(17, 9, jpeg_encoder::ColorType::Luma), &mut rgb).expect("grey JPEG");
        assert_eq!((rgb.width, rgb.height), (17, 9));
        for p in rgb.data().chunks_exact(3) {
            assert!(p[0] == p[1] && p[1] == p[2], "grey replicated: {p:?}");
        }
    }

    #[test]
    fn cmyk_jpegs_decode_to_rgb() {
        let mut rgb = Rgb::default();
        decode(&jpeg(16, 16, jpeg_encoder::ColorType::Cmyk), &mut rgb).expect("CMYK JPEG");
        assert_eq!(rgb.data().len(), 16 * 16 * 3);
    }

    #[test]
    fn pngs_of_every_colour_type_decode_to_rgb_without_alpha() {
        let mut rgb = Rgb::default();
        let rgba = [10, 20, 30, 0, 40, 50, 60, 255];
        decode(
            &png_bytes(2, 1, png::ColorType::Rgba, png::BitDepth::Eight, &rgba),
            &mut rgb,
        )
        .expect("RGBA");
        // PIL's convert("RGB") drops alpha, even where it is 0.
        assert_eq!(rgb.data(), &[10, 20, 30, 40, 50, 60]);
        decode(
            &png_bytes(
                2,
                1,
                png::ColorType::GrayscaleAlpha,
                png::BitDepth::Eight,
                &[7, 0, 9, 1],
            ),
            &mut rgb,
        )
        .expect("grey+alpha");
        assert_eq!(rgb.data(), &[7, 7, 7, 9, 9, 9]);
        decode(
            &png_bytes(2, 1, png::ColorType::Indexed, png::BitDepth::Eight, &[1, 0]),
            &mut rgb,
        )
        .expect("palette");
        assert_eq!(rgb.data(), &[0, 255, 0, 255, 0, 0]);
        let sixteen = [0x12, 0x34, 0, 0, 0xff, 0xff, 0xab, 0xcd, 0, 0, 0, 0];
        decode(
            &png_bytes(2, 1, png::ColorType::Rgb, png::BitDepth::Sixteen, &sixteen),
            &mut rgb,
        )
        .expect("16-bit");
        assert_eq!(rgb.data(), &[0x12, 0, 0xff, 0xab, 0, 0]);
        decode(
            &png_bytes(
                3,
                1,
                png::ColorType::Grayscale,
                png::BitDepth::Eight,
                &[1, 2, 3],
            ),
            &mut rgb,
        )
        .expect("grey");
        assert_eq!(rgb.data(), &[1, 1, 1, 2, 2, 2, 3, 3, 3]);
    }

    #[test]
    fn broken_files_are_one_line_errors() {
        let mut rgb = Rgb::default();
        let good = jpeg(64, 48, jpeg_encoder::ColorType::Rgb);
        for (name, bytes) in [
            ("truncated JPEG", good[..good.len() / 2].to_vec()),
            ("JPEG header alone", good[..20].to_vec()),
            ("empty", Vec::new()),
            ("text", b"hello, world".to_vec()),
            ("PNG signature alone", b"\x89PNG\r\n\x1a\n".to_vec()),
        ] {
            let e = decode(&bytes, &mut rgb).expect_err(name);
            assert!(!e.0.contains('\n'), "{name}: {e}");
        }
        let png = png_bytes(4, 4, png::ColorType::Rgb, png::BitDepth::Eight, &[0; 48]);
        assert!(
            decode(&png[..png.len() - 20], &mut rgb).is_err(),
            "truncated PNG"
        );
    }

    #[test]
    fn bombs_are_refused_from_the_header() {
        let mut rgb = Rgb::default();
        // A PNG header claiming 2^31-1 pixels a side (CRC left wrong too).
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        png.extend_from_slice(&[
            0x7f, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff, 8, 2, 0, 0, 0,
        ]);
        png.extend_from_slice(&[0; 4]);
        assert!(decode(&png, &mut rgb).is_err());
        // A JPEG whose frame header claims 60000x60000.
        let mut j = jpeg(8, 8, jpeg_encoder::ColorType::Rgb);
        let sof = j
            .windows(2)
            .position(|w| w == [0xFF, 0xC0])
            .expect("a baseline frame header");
        j[sof + 5..sof + 9].copy_from_slice(&[0xEA, 0x60, 0xEA, 0x60]);
        assert!(decode(&j, &mut rgb).is_err());
        assert!(rgb.pixels.len() < 1 << 20, "nothing big allocated");
    }
}
