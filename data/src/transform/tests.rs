use super::pixels::{crop_then_resize, normalize, resize_then_crop};
use super::*;
use crate::decode::tests::{jpeg, png_bytes};
use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions};

fn train(size: usize) -> Transform {
    Transform {
        kind: TransformKind::Train,
        size,
    }
}

fn eval(size: usize) -> Transform {
    Transform {
        kind: TransformKind::Eval,
        size,
    }
}

/// The normalized value of byte `v` in channel `c`, by the formula.
fn normalized(v: u8, c: usize) -> f32 {
    (v as f32 / 255.0 - crate::MEAN[c]) / crate::STD[c]
}

/// A decoded `w`x`h` image of deterministic texture.
fn textured(w: usize, h: usize) -> Rgb {
    let mut rgb = Rgb::default();
    (rgb.width, rgb.height) = (w, h);
    rgb.pixels = (0..w * h * 3)
        .map(|i| ((i * 37 + (i / (w * 3)) * 11) % 256) as u8)
        .collect();
    rgb
}

/// Resizes the whole of `src` to `to` (bilinear), the plain way.
fn plain_resize(src: &Rgb, to: (usize, usize)) -> Vec<u8> {
    let view = ImageRef::new(
        src.width as u32,
        src.height as u32,
        src.data(),
        PixelType::U8x3,
    )
    .expect("view");
    let mut dst = Image::new(to.0 as u32, to.1 as u32, PixelType::U8x3);
    let opts = ResizeOptions::new().resize_alg(ResizeAlg::Convolution(FilterType::Bilinear));
    Resizer::new()
        .resize(&view, &mut dst, &opts)
        .expect("resize");
    dst.into_vec()
}

#[test]
fn python_rounding() {
    assert_eq!(round_half_even(2.5), 2.0);
    assert_eq!(round_half_even(3.5), 4.0);
    assert_eq!(round_half_even(0.5), 0.0);
    assert_eq!(round_half_even(2.6), 3.0);
    assert_eq!(round_half_even(-2.5), -2.0);
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
        for _ in 0..2000 {
            let c = random_resized_crop(w, h, &mut rng);
            assert!(c.width >= 1 && c.height >= 1, "{w}x{h}: {c:?}");
            assert!(
                c.left + c.width <= w && c.top + c.height <= h,
                "{w}x{h}: {c:?}"
            );
        }
    }
}

#[test]
fn crops_that_fit_have_torchvisions_area_and_ratio() {
    // On a photo-sized image nearly every draw fits: its area is 8% to
    // 100% of the image and its ratio 3/4 to 4/3, each up to the rounding
    // of w and h to whole pixels; positions cover the whole range.
    let (w, h) = (500usize, 375usize);
    let mut rng = Rng::new(1);
    let (mut smallest, mut largest) = (1.0f64, 0.0f64);
    let (mut left_max, mut top_max) = (0, 0);
    for _ in 0..5000 {
        let c = random_resized_crop(w, h, &mut rng);
        let area = (c.width * c.height) as f64 / (w * h) as f64;
        let ratio = c.width as f64 / c.height as f64;
        let slack = 1.0 / c.height.min(c.width) as f64;
        assert!((0.08 - 0.01..=1.0).contains(&area), "{c:?}");
        assert!(
            ratio >= 0.75 * (1.0 - slack) - 1e-9 && ratio <= 4.0 / 3.0 * (1.0 + slack) + 1e-9,
            "{c:?}"
        );
        smallest = smallest.min(area);
        largest = largest.max(area);
        left_max = left_max.max(c.left);
        top_max = top_max.max(c.top);
    }
    assert!(smallest < 0.1 && largest > 0.9, "{smallest} {largest}");
    assert!(left_max > 300 && top_max > 200, "{left_max} {top_max}");
}

#[test]
fn crops_that_never_fit_fall_back_to_the_clamped_centre() {
    // 1000x3: a 3/4..4/3 crop of 8%+ of the area never fits. Centre crop
    // with the ratio clamped to 4/3: h = 3, w = round(4.0) = 4.
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
    // 3x1000: the ratio clamped to 3/4: w = 3, h = round(3/0.75) = 4.
    let c = random_resized_crop(3, 1000, &mut Rng::new(1));
    assert_eq!(
        c,
        Crop {
            top: 498,
            left: 0,
            height: 4,
            width: 3
        }
    );
}

#[test]
fn resize_and_center_crop_sizes_are_torchvisions() {
    assert_eq!(resized_size(500, 375, 256), (341, 256));
    assert_eq!(resized_size(375, 500, 256), (256, 341));
    assert_eq!(resized_size(256, 256, 256), (256, 256));
    // int(round(16.5)) == 16 and int(round(2.5)) == 2: halves to even.
    let c = center_crop(261, 257, 224).expect("fits");
    assert_eq!((c.top, c.left), (16, 18));
    let c = center_crop(37, 40, 32).expect("fits");
    assert_eq!((c.top, c.left), (4, 2));
    assert_eq!(center_crop(31, 40, 32), None);
}

#[test]
fn a_constant_image_normalizes_to_the_formula() {
    let px = vec![128u8; 4 * 4 * 3];
    let mut out = vec![0.0; 4 * 4 * 3];
    normalize(&px, 4, false, &mut out);
    for (k, v) in out.iter().enumerate() {
        assert!((v - normalized(128, k % 3)).abs() < 1e-6);
    }
}

#[test]
fn flip_mirrors_each_row() {
    let px: Vec<u8> = (0..3 * 3 * 3).map(|v| v as u8 * 9).collect();
    let (mut a, mut b) = (vec![0.0; 27], vec![0.0; 27]);
    normalize(&px, 3, false, &mut a);
    normalize(&px, 3, true, &mut b);
    for y in 0..3 {
        for x in 0..3 {
            assert_eq!(a[(y * 3 + x) * 3..][..3], b[(y * 3 + 2 - x) * 3..][..3]);
        }
    }
}

#[test]
fn the_train_crop_is_resized_as_if_cut_out_first() {
    // torchvision crops (PIL's crop copies) and then resizes: the filter
    // must not reach past the crop's edges into the rest of the image.
    let src = textured(120, 90);
    let crop = Crop {
        top: 13,
        left: 29,
        height: 61,
        width: 70,
    };
    let mut cut = Rgb::default();
    (cut.width, cut.height) = (crop.width, crop.height);
    for y in 0..crop.height {
        let row = &src.data()[((crop.top + y) * src.width + crop.left) * 3..][..crop.width * 3];
        cut.pixels.extend_from_slice(row);
    }
    let mut got = Vec::new();
    crop_then_resize(&src, crop, (32, 32), &mut Resizer::new(), &mut got).expect("resize");
    assert_eq!(got[..32 * 32 * 3], plain_resize(&cut, (32, 32))[..]);
}

#[test]
fn the_eval_crop_is_the_centre_of_the_whole_resized_image() {
    // Resampling only the box that maps onto the centre crop gives the
    // pixels of resizing everything and cropping (within a level where
    // the float box edges round differently).
    for (w, h, size) in [(120, 90, 32), (90, 131, 24), (300, 200, 224)] {
        let src = textured(w, h);
        let resized = resized_size(w, h, eval_resize(size));
        let c = center_crop(resized.0, resized.1, size).expect("fits");
        let whole = plain_resize(&src, resized);
        let mut got = Vec::new();
        resize_then_crop(&src, resized, c, &mut Resizer::new(), &mut got).expect("resize");
        for y in 0..size {
            let want = &whole[((c.top + y) * resized.0 + c.left) * 3..][..size * 3];
            let row = &got[y * size * 3..][..size * 3];
            for (a, b) in row.iter().zip(want) {
                assert!(a.abs_diff(*b) <= 1, "{w}x{h} row {y}: {a} vs {b}");
            }
        }
    }
}

#[test]
fn eval_of_a_gradient_is_its_centre_pixel_for_pixel() {
    // 37x40 at size 32: Resize(37) leaves it 37x40 (no resampling), then
    // CenterCrop(32) starts at row round(4.0) = 4, column round(2.5) = 2.
    // Lossless PNG, so every value is known.
    let (w, h) = (37usize, 40usize);
    let mut px = Vec::new();
    for y in 0..h {
        for x in 0..w {
            px.extend_from_slice(&[(x * 6) as u8, (y * 6) as u8, 77]);
        }
    }
    let file = png_bytes(
        w as u32,
        h as u32,
        png::ColorType::Rgb,
        png::BitDepth::Eight,
        &px,
    );
    let mut out = vec![0.0; 32 * 32 * 3];
    load_image(&file, &eval(32), 0, &mut Scratch::default(), &mut out).expect("eval");
    for y in 0..32 {
        for x in 0..32 {
            let o = &out[(y * 32 + x) * 3..][..3];
            let want = [((x + 2) * 6) as u8, ((y + 4) * 6) as u8, 77];
            for c in 0..3 {
                assert_eq!(o[c], normalized(want[c], c), "({y},{x}) c={c}");
            }
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
    load_image(&j, &eval(32), 1, &mut s, &mut a).expect("eval");
    load_image(&j, &eval(32), 2, &mut s, &mut b).expect("eval");
    assert_eq!(a, b, "eval ignores the seed");
}

#[test]
fn train_flips_about_half_the_time() {
    // Left half black, right half white. Crops that span both halves come
    // out lighter on the left when flipped, darker when not (crops inside
    // one half are flat and not counted).
    let (w, h) = (64usize, 64usize);
    let mut px = Vec::new();
    for _ in 0..h {
        for x in 0..w {
            let v = if x < w / 2 { 0 } else { 255 };
            px.extend_from_slice(&[v, v, v]);
        }
    }
    let file = png_bytes(
        w as u32,
        h as u32,
        png::ColorType::Rgb,
        png::BitDepth::Eight,
        &px,
    );
    let mut out = vec![0.0; 8 * 8 * 3];
    let mut s = Scratch::default();
    let (mut flipped, mut kept) = (0, 0);
    for seed in 0..400 {
        load_image(&file, &train(8), seed, &mut s, &mut out).expect("train");
        let (left, right) = (out[0], out[(8 - 1) * 3]);
        if left > right {
            flipped += 1;
        } else if left < right {
            kept += 1;
        }
    }
    assert!(flipped > 60 && kept > 60, "{flipped} flipped, {kept} kept");
}

#[test]
fn eval_of_a_flat_image_is_flat_and_a_wrong_slot_is_an_error() {
    let mut px = Vec::new();
    jpeg_encoder::Encoder::new(&mut px, 100)
        .encode(&[200u8; 50 * 40 * 3], 50, 40, jpeg_encoder::ColorType::Rgb)
        .expect("encode");
    let mut s = Scratch::default();
    let mut out = vec![0.0; 16 * 16 * 3];
    load_image(&px, &eval(16), 0, &mut s, &mut out).expect("eval");
    for (k, v) in out.iter().enumerate() {
        let want = normalized(200, k % 3);
        assert!((v - want).abs() < 0.03, "{v} vs {want}");
    }
    for (t, len) in [
        (eval(16), 10),
        (eval(16), 16 * 16 * 3 + 1),
        (train(16), 0),
        (eval(0), 0),
    ] {
        let mut wrong = vec![0.0; len];
        let e = load_image(&px, &t, 0, &mut s, &mut wrong).expect_err("wrong slot");
        assert!(e.0.contains("values"), "{e}");
    }
    let e = load_image(b"GIF89a", &train(16), 0, &mut s, &mut out).expect_err("a GIF");
    assert_eq!(e.to_string(), "not a JPEG or PNG");
}
