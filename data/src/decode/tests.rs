use super::*;
use ::png::{BitDepth, ColorType as Png};
use jpeg_encoder::{ColorType as Jpeg, Encoder, SamplingFactor};

/// A JPEG of `w`x`h` with a smooth gradient, at quality 90.
pub fn jpeg(w: u16, h: u16, color: Jpeg) -> Vec<u8> {
    let ch = match color {
        Jpeg::Luma => 1,
        Jpeg::Cmyk | Jpeg::CmykAsYcck | Jpeg::Ycck | Jpeg::Rgba => 4,
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
    Encoder::new(&mut out, 90)
        .encode(&px, w, h, color)
        .expect("encoding a test JPEG");
    out
}

/// A PNG of `w`x`h` holding `data` as given.
pub fn png_bytes(w: u32, h: u32, color: Png, depth: BitDepth, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut e = ::png::Encoder::new(&mut out, w, h);
        e.set_color(color);
        e.set_depth(depth);
        if color == Png::Indexed {
            e.set_palette(vec![255, 0, 0, 0, 255, 0]);
        }
        let mut wr = e.write_header().expect("PNG header");
        wr.write_image_data(data).expect("PNG data");
    }
    out
}

/// Pillow's `cmyk2rgb` (Convert.c) on one ink value and black.
fn pillow_cmyk2rgb(ink: u8, k: u8) -> u8 {
    let nk = 255 - k as i32;
    let t = ink as i32 * nk + 128;
    (nk - (((t >> 8) + t) >> 8)).clamp(0, 255) as u8
}

#[test]
fn rgb_and_grey_jpegs_decode_to_rgb() {
    let mut rgb = Rgb::default();
    decode(&jpeg(40, 30, Jpeg::Rgb), &mut rgb).expect("RGB JPEG");
    assert_eq!((rgb.width, rgb.height), (40, 30));
    assert_eq!(rgb.data().len(), 40 * 30 * 3);
    decode(&jpeg(17, 9, Jpeg::Luma), &mut rgb).expect("grey JPEG");
    assert_eq!((rgb.width, rgb.height), (17, 9));
    for p in rgb.data().chunks_exact(3) {
        assert!(p[0] == p[1] && p[1] == p[2], "grey replicated: {p:?}");
    }
}

#[test]
fn zunes_cmyk_rounding_is_pillows_on_adobe_inverted_values() {
    // zune: round(C'·K'/255) on the stored (inverted) values; Pillow:
    // cmyk2rgb on 255 − stored. Equal for every pair, so no conversion of
    // our own is needed.
    for c in 0..=255u8 {
        for k in 0..=255u8 {
            let t = c as i32 * k as i32 + 128;
            let zune = ((t + (t >> 8)) >> 8) as u8;
            assert_eq!(zune, pillow_cmyk2rgb(255 - c, 255 - k), "{c} {k}");
        }
    }
}

#[test]
fn cmyk_and_ycck_jpegs_decode_as_pillow_converts_them() {
    // Flat 16x16 blocks at quality 100 survive the DCT within a level.
    let inks = [
        [0u8, 0, 0, 0],
        [200, 30, 90, 10],
        [255, 255, 255, 255],
        [17, 128, 240, 77],
    ];
    let (w, h) = (64u16, 16u16);
    let mut px = Vec::new();
    for _ in 0..h {
        for x in 0..w as usize {
            px.extend_from_slice(&inks[x / 16]);
        }
    }
    let mut rgb = Rgb::default();
    for (color, tolerance) in [(Jpeg::Cmyk, 1), (Jpeg::CmykAsYcck, 2)] {
        let mut file = Vec::new();
        let mut e = Encoder::new(&mut file, 100);
        e.set_sampling_factor(SamplingFactor::R_4_4_4);
        e.encode(&px, w, h, color).expect("encode");
        // jpeg-encoder stores 255 − ink (Adobe's polarity), as Photoshop
        // does. Pillow reads CMYK with Adobe's polarity with or without the
        // APP14 marker; so must we. (YCCK needs the marker to be YCCK.)
        let mut files = vec![file.clone()];
        if color == Jpeg::Cmyk {
            files.push(without_app14(&file));
        }
        for f in files {
            decode(&f, &mut rgb).expect("CMYK JPEG");
            assert_eq!((rgb.width, rgb.height), (64, 16));
            for (x, p) in rgb.data()[..64 * 3].chunks_exact(3).enumerate() {
                let ink = inks[x / 16];
                for c in 0..3 {
                    let want = pillow_cmyk2rgb(ink[c], ink[3]);
                    assert!(
                        p[c].abs_diff(want) <= tolerance,
                        "{color:?} x={x} c={c}: {} vs {want}",
                        p[c]
                    );
                }
            }
        }
    }
}

/// `file` with its Adobe APP14 segment cut out.
fn without_app14(file: &[u8]) -> Vec<u8> {
    let at = file
        .windows(2)
        .position(|m| m == [0xFF, 0xEE])
        .expect("an APP14 segment");
    let len = u16::from_be_bytes([file[at + 2], file[at + 3]]) as usize;
    let mut out = file[..at].to_vec();
    out.extend_from_slice(&file[at + 2 + len..]);
    out
}

#[test]
fn pngs_of_every_colour_type_decode_to_rgb_as_pillow_does() {
    let mut rgb = Rgb::default();
    let mut check = |bytes: Vec<u8>, want: &[u8], what: &str| {
        decode(&bytes, &mut rgb).expect(what);
        assert_eq!(rgb.data(), want, "{what}");
    };
    // Pillow's convert("RGB") drops alpha, even where it is 0.
    let rgba = [10, 20, 30, 0, 40, 50, 60, 255];
    check(
        png_bytes(2, 1, Png::Rgba, BitDepth::Eight, &rgba),
        &[10, 20, 30, 40, 50, 60],
        "RGBA",
    );
    check(
        png_bytes(2, 1, Png::GrayscaleAlpha, BitDepth::Eight, &[7, 0, 9, 1]),
        &[7, 7, 7, 9, 9, 9],
        "grey+alpha",
    );
    check(
        png_bytes(2, 1, Png::Indexed, BitDepth::Eight, &[1, 0]),
        &[0, 255, 0, 255, 0, 0],
        "palette",
    );
    check(
        png_bytes(3, 1, Png::Grayscale, BitDepth::Eight, &[1, 2, 3]),
        &[1, 1, 1, 2, 2, 2, 3, 3, 3],
        "grey",
    );
    // 16-bit colour keeps the high byte (Pillow's "RGB;16B").
    let sixteen = [0x12, 0x34, 0, 0, 0xff, 0xff, 0xab, 0xcd, 0, 0, 0, 0];
    check(
        png_bytes(2, 1, Png::Rgb, BitDepth::Sixteen, &sixteen),
        &[0x12, 0, 0xff, 0xab, 0, 0],
        "16-bit RGB",
    );
    check(
        png_bytes(
            2,
            1,
            Png::GrayscaleAlpha,
            BitDepth::Sixteen,
            &[0x12, 0x34, 0, 0, 0, 0x80, 1, 1],
        ),
        &[0x12, 0x12, 0x12, 0, 0, 0],
        "16-bit grey+alpha",
    );
    // 16-bit grey is Pillow's "I;16": converting to RGB clips at 255
    // (what Pillow 13 gives for these three samples: 255, 128, 255).
    check(
        png_bytes(
            3,
            1,
            Png::Grayscale,
            BitDepth::Sixteen,
            &[0x12, 0x34, 0, 0x80, 0xff, 0xff],
        ),
        &[255, 255, 255, 128, 128, 128, 255, 255, 255],
        "16-bit grey",
    );
    // Grey below 8 bits scaled to 0..255 (Pillow's "1", "L;2", "L;4").
    let scaled = |v: [u8; 8]| -> Vec<u8> { v.iter().flat_map(|&g| [g, g, g]).collect() };
    check(
        png_bytes(8, 1, Png::Grayscale, BitDepth::One, &[0b1011_0100]),
        &scaled([255, 0, 255, 255, 0, 255, 0, 0]),
        "1-bit grey",
    );
    check(
        png_bytes(
            8,
            1,
            Png::Grayscale,
            BitDepth::Two,
            &[0b1011_0100, 0b1011_0100],
        ),
        &scaled([170, 255, 85, 0, 170, 255, 85, 0]),
        "2-bit grey",
    );
    check(
        png_bytes(8, 1, Png::Grayscale, BitDepth::Four, &[0b1011_0100; 4]),
        &scaled([187, 68, 187, 68, 187, 68, 187, 68]),
        "4-bit grey",
    );
}

#[test]
fn broken_files_are_one_line_errors() {
    let mut rgb = Rgb::default();
    let good = jpeg(64, 48, Jpeg::Rgb);
    let mut noise = crate::transform::Rng::new(3);
    let random: Vec<u8> = (0..4096).map(|_| noise.next_u64() as u8).collect();
    let mut jpeg_then_noise = vec![0xFF, 0xD8, 0xFF];
    jpeg_then_noise.extend_from_slice(&random);
    let mut png_then_noise = b"\x89PNG\r\n\x1a\n".to_vec();
    png_then_noise.extend_from_slice(&random);
    for (name, bytes) in [
        ("truncated JPEG", good[..good.len() / 2].to_vec()),
        ("JPEG header alone", good[..20].to_vec()),
        ("empty", Vec::new()),
        ("text", b"hello, world".to_vec()),
        ("random bytes", random.clone()),
        ("JPEG signature, random bytes", jpeg_then_noise),
        ("PNG signature, random bytes", png_then_noise),
        ("PNG signature alone", b"\x89PNG\r\n\x1a\n".to_vec()),
    ] {
        let e = decode(&bytes, &mut rgb).expect_err(name);
        assert!(!e.0.is_empty() && !e.0.contains('\n'), "{name}: {e}");
    }
    let png = png_bytes(4, 4, Png::Rgb, BitDepth::Eight, &[0; 48]);
    assert!(
        decode(&png[..png.len() - 20], &mut rgb).is_err(),
        "truncated PNG"
    );
}

#[test]
fn truncated_jpegs_are_errors_not_grey_padding() {
    // Baseline and progressive, every prefix: zune's strict mode misses
    // cuts inside the last row of blocks, the EOI check catches those.
    let mut rgb = Rgb::default();
    let baseline = jpeg(96, 64, Jpeg::Rgb);
    let mut progressive = Vec::new();
    let mut e = Encoder::new(&mut progressive, 90);
    e.set_progressive(true);
    e.encode(&baseline_pixels(96, 64), 96, 64, Jpeg::Rgb)
        .expect("encode");
    for (name, file) in [("baseline", baseline), ("progressive", progressive)] {
        decode(&file, &mut rgb).expect(name);
        for keep in 0..file.len() {
            assert!(
                decode(&file[..keep], &mut rgb).is_err(),
                "{name} cut to {keep} of {} bytes decoded",
                file.len()
            );
        }
    }
}

#[test]
fn the_end_of_image_is_looked_for_after_the_scans_only() {
    let mut rgb = Rgb::default();
    let file = jpeg(48, 32, Jpeg::Rgb);
    // Bytes after the EOI (some cameras append data): still an image.
    let mut trailing = file.clone();
    trailing.extend_from_slice(b"trailing bytes\xFF\xD8");
    decode(&trailing, &mut rgb).expect("trailing bytes after the EOI");
    // An APP1 segment (as an EXIF thumbnail) holding its own SOS and EOI
    // does not make a truncated main image whole.
    let mut app1 = vec![0xFF, 0xE1, 0, 10, 0xFF, 0xDA, 1, 2, 0xFF, 0xD9, 3, 4];
    app1.splice(0..0, file[..2].iter().copied());
    app1.extend_from_slice(&file[2..]);
    decode(&app1, &mut rgb).expect("with the APP1 segment");
    for cut in [1, 2, 5, 30] {
        decode(&app1[..app1.len() - cut], &mut rgb).expect_err("truncated after an APP1");
    }
}

fn baseline_pixels(w: usize, h: usize) -> Vec<u8> {
    (0..w * h * 3).map(|i| (i * 7 % 251) as u8).collect()
}

#[test]
fn mangled_files_never_panic_the_decoders() {
    // Bytes flipped through whole files: each decode is an image or an
    // error, never a panic caught by the last-resort catch_unwind.
    let mut rgb = Rgb::default();
    let mut rng = crate::transform::Rng::new(11);
    let files = [
        jpeg(48, 40, Jpeg::Rgb),
        jpeg(40, 24, Jpeg::Luma),
        png_bytes(8, 8, Png::Rgb, BitDepth::Eight, &[90; 192]),
    ];
    for file in files {
        for _ in 0..300 {
            let mut f = file.clone();
            for _ in 0..1 + rng.int(0, 3) {
                let at = rng.int(3, f.len() - 1);
                f[at] = rng.next_u64() as u8;
            }
            if let Err(e) = decode(&f, &mut rgb) {
                assert_ne!(e.0, "the decoder failed on this file");
            }
        }
    }
}

#[test]
fn bombs_are_refused_from_the_header() {
    let mut rgb = Rgb::default();
    // PNG headers (CRCs right) claiming 100000² and 20000² (sides within
    // the limit, pixels not): the image data is never reached.
    for side in [100_000, 20_000] {
        let mut png = Vec::new();
        let e = ::png::Encoder::new(&mut png, side, side);
        drop(e.write_header());
        let e = decode(&png, &mut rgb).expect_err("PNG bomb");
        assert!(e.0.contains("pixels") || e.0.contains("PNG"), "{e}");
    }
    // JPEG frame headers claiming 60000² and 20000² (a JPEG side is 16
    // bits, 100000 cannot be said).
    for side in [60_000u16, 20_000] {
        let mut j = jpeg(8, 8, Jpeg::Rgb);
        let sof = j
            .windows(2)
            .position(|w| w == [0xFF, 0xC0])
            .expect("a baseline frame header");
        let s = side.to_be_bytes();
        j[sof + 5..sof + 9].copy_from_slice(&[s[0], s[1], s[0], s[1]]);
        decode(&j, &mut rgb).expect_err("JPEG bomb");
    }
    assert!(rgb.pixels.len() < 1 << 20, "nothing big allocated");
}
