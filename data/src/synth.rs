//! Synthetic ImageFolder trees of JPEGs that cost what photos cost to
//! decode: natural-looking scenes (a sky-to-ground gradient, fractal
//! texture at several scales, shaded shapes with hard edges, fine grain),
//! at ImageNet-like sizes, quality 90 and 4:2:0 chroma as cameras write
//! them. Noise would decode slower than photos, flat colour faster; this
//! sits between, and the summary reports the mean file size to compare
//! with ImageNet's (about 110 KB).

use crate::transform::Rng;
use jpeg_encoder::{ColorType, Encoder, SamplingFactor};
use rayon::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

#[derive(Clone, Debug)]
pub struct SynthOptions {
    pub images: usize,
    /// Class folders, the images dealt round them.
    pub classes: usize,
    /// Every image this width and height; `None`: about 500x375, varying
    /// in size and orientation as ImageNet's photos do.
    pub size: Option<(usize, usize)>,
    /// JPEG quality, 1-100.
    pub quality: u8,
    pub seed: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SynthSummary {
    pub files: usize,
    pub bytes: u64,
    pub mean_bytes: f64,
    pub mean_width: f64,
    pub mean_height: f64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SynthError(pub String);

impl std::fmt::Display for SynthError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SynthError {}

/// The folder of class `k`.
pub fn class_name(k: usize) -> String {
    format!("class_{k:03}")
}

/// Writes the tree into `dir`, which must not exist or be empty; each file
/// through a hidden temporary name and a rename, so an interrupted run
/// leaves whole JPEGs only. `progress` hears the count of files written.
pub fn synth(
    dir: &Path,
    opts: &SynthOptions,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<SynthSummary, SynthError> {
    let bad = |what: &str, p: &Path, e: std::io::Error| {
        SynthError(format!("cannot {what} '{}': {e}", p.display()))
    };
    if opts.images == 0 || opts.classes == 0 || !(1..=100).contains(&opts.quality) {
        return Err(SynthError(format!(
            "a tree needs images, classes and a quality of 1-100 (got {}, {}, {})",
            opts.images, opts.classes, opts.quality
        )));
    }
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(SynthError(format!(
                    "'{}' is already used: data synth writes into a new or empty folder",
                    dir.display()
                )));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(bad("write into", dir, e)),
    }
    for k in 0..opts.classes {
        let d = dir.join(class_name(k));
        std::fs::create_dir_all(&d).map_err(|e| bad("create", &d, e))?;
    }
    let done = AtomicUsize::new(0);
    let sizes: Vec<(u64, usize, usize)> = (0..opts.images)
        .into_par_iter()
        .map(|i| {
            let class = i % opts.classes;
            let mut rng = Rng::new(opts.seed ^ (i as u64).wrapping_mul(0xD134_2543_DE82_EF95));
            let (w, h) = opts.size.unwrap_or_else(|| photo_size(&mut rng));
            let px = scene(w, h, class, &mut rng);
            let mut jpeg = Vec::new();
            let mut enc = Encoder::new(&mut jpeg, opts.quality);
            enc.set_sampling_factor(SamplingFactor::R_4_2_0);
            enc.encode(&px, w as u16, h as u16, ColorType::Rgb)
                .map_err(|e| SynthError(format!("encoding image {i}: {e}")))?;
            let folder = dir.join(class_name(class));
            let name = format!("img_{i:07}.jpg");
            let tmp: PathBuf = folder.join(format!(".{name}.part"));
            std::fs::write(&tmp, &jpeg).map_err(|e| bad("write", &tmp, e))?;
            let path = folder.join(&name);
            std::fs::rename(&tmp, &path).map_err(|e| bad("write", &path, e))?;
            progress(done.fetch_add(1, Ordering::Relaxed) + 1);
            Ok((jpeg.len() as u64, w, h))
        })
        .collect::<Result<_, SynthError>>()?;
    let n = sizes.len() as f64;
    let bytes: u64 = sizes.iter().map(|s| s.0).sum();
    Ok(SynthSummary {
        files: sizes.len(),
        bytes,
        mean_bytes: bytes as f64 / n,
        mean_width: sizes.iter().map(|s| s.1 as f64).sum::<f64>() / n,
        mean_height: sizes.iter().map(|s| s.2 as f64).sum::<f64>() / n,
    })
}

/// About 500x375, landscape three times in four, as ImageNet's photos.
fn photo_size(rng: &mut Rng) -> (usize, usize) {
    let long = rng.int(400, 600);
    let short = (long as f64 * rng.uniform(0.66, 0.8)) as usize;
    if rng.int(0, 3) == 0 {
        (short, long)
    } else {
        (long, short)
    }
}

/// A hash of a lattice point, in [0, 1).
fn lattice(x: i64, y: i64, seed: u64) -> f32 {
    let mut h = seed ^ (x as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (y as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    h = (h ^ (h >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h ^= h >> 29;
    (h >> 40) as f32 / (1u64 << 24) as f32
}

/// Smooth value noise in [0, 1).
fn value_noise(x: f32, y: f32, seed: u64) -> f32 {
    let (xi, yi) = (x.floor(), y.floor());
    let (fx, fy) = (x - xi, y - yi);
    let (sx, sy) = (fx * fx * (3.0 - 2.0 * fx), fy * fy * (3.0 - 2.0 * fy));
    let (xi, yi) = (xi as i64, yi as i64);
    let a = lattice(xi, yi, seed);
    let b = lattice(xi + 1, yi, seed);
    let c = lattice(xi, yi + 1, seed);
    let d = lattice(xi + 1, yi + 1, seed);
    let top = a + (b - a) * sx;
    let bottom = c + (d - c) * sx;
    top + (bottom - top) * sy
}

/// Fractal noise: octaves from `period` pixels down to 2, each half the
/// weight of the last; about [0, 1).
fn fractal(x: f32, y: f32, period: f32, seed: u64) -> f32 {
    let (mut f, mut amp, mut sum, mut norm) = (1.0 / period, 1.0, 0.0, 0.0);
    let mut o = 0u64;
    while f <= 0.5 {
        sum += amp * value_noise(x * f, y * f, seed.wrapping_add(o));
        norm += amp;
        amp *= 0.55;
        f *= 2.0;
        o += 1;
    }
    sum / norm
}

/// A shape of the scene: an ellipse or a rotated rectangle.
struct Shape {
    cx: f32,
    cy: f32,
    rx: f32,
    ry: f32,
    cos: f32,
    sin: f32,
    ellipse: bool,
    color: [f32; 3],
    seed: u64,
}

impl Shape {
    /// Where (x, y) falls in the shape's own frame, or `None` outside.
    fn local(&self, x: f32, y: f32) -> Option<(f32, f32)> {
        let (dx, dy) = (x - self.cx, y - self.cy);
        let u = (dx * self.cos + dy * self.sin) / self.rx;
        let v = (-dx * self.sin + dy * self.cos) / self.ry;
        let inside = if self.ellipse {
            u * u + v * v <= 1.0
        } else {
            u.abs() <= 1.0 && v.abs() <= 1.0
        };
        inside.then_some((u, v))
    }
}

/// A colour from a class's palette: hue by class, varied by `rng`.
fn palette(class: usize, rng: &mut Rng) -> [f32; 3] {
    let hue = (class as f32 * 0.618_034).fract() * 6.0 + rng.uniform(-0.6, 0.6) as f32;
    let sat = rng.uniform(0.35, 0.85) as f32;
    let val = rng.uniform(90.0, 230.0) as f32;
    let h = hue.rem_euclid(6.0);
    let f = h - h.floor();
    let (p, q, t) = (val * (1.0 - sat), val * (1.0 - sat * f), val * (1.0 - sat * (1.0 - f)));
    match h as u32 {
        0 => [val, t, p],
        1 => [q, val, p],
        2 => [p, val, t],
        3 => [p, q, val],
        4 => [t, p, val],
        _ => [val, p, q],
    }
}

/// One scene's RGB pixels.
fn scene(w: usize, h: usize, class: usize, rng: &mut Rng) -> Vec<u8> {
    let seed = rng.next_u64();
    let sky = palette(class + 3, rng);
    let ground = palette(class, rng);
    let horizon = rng.uniform(0.3, 0.7) as f32 * h as f32;
    let scale = w.max(h) as f32;
    let shapes: Vec<Shape> = (0..rng.int(3, 7))
        .map(|_| {
            let angle = rng.uniform(0.0, std::f64::consts::PI) as f32;
            Shape {
                cx: rng.uniform(0.0, w as f64) as f32,
                cy: rng.uniform(0.2 * h as f64, h as f64) as f32,
                rx: rng.uniform(0.05, 0.3) as f32 * scale,
                ry: rng.uniform(0.05, 0.25) as f32 * scale,
                cos: angle.cos(),
                sin: angle.sin(),
                ellipse: rng.int(0, 1) == 0,
                color: palette(class, rng),
                seed: rng.next_u64(),
            }
        })
        .collect();
    let mut px = vec![0u8; w * h * 3];
    for (y, row) in px.chunks_exact_mut(w * 3).enumerate() {
        let yf = y as f32;
        for (x, p) in row.chunks_exact_mut(3).enumerate() {
            let xf = x as f32;
            let (mut color, light) = match shapes.iter().rev().find_map(|s| s.local(xf, yf).map(|l| (s, l))) {
                // The topmost shape: lit from the upper left, textured.
                Some((s, (u, v))) => {
                    let t = fractal(xf, yf, 24.0, s.seed);
                    (s.color, 0.75 + 0.25 * (-u - v) * 0.5 + 0.5 * (t - 0.5))
                }
                None if yf < horizon => {
                    let t = fractal(xf, yf, 96.0, seed);
                    let k = yf / horizon;
                    let c = [0, 1, 2].map(|i| sky[i] * (1.0 - 0.3 * k) + 40.0 * k);
                    (c, 0.85 + 0.3 * t)
                }
                None => {
                    let t = fractal(xf, yf, 48.0, seed ^ 1);
                    (ground, 0.6 + 0.7 * t)
                }
            };
            // Grain: what makes a photo's high frequencies.
            let grain = (lattice(x as i64, y as i64, seed ^ 7) - 0.5) * 14.0;
            for (c, out) in color.iter_mut().zip(p.iter_mut()) {
                *out = (*c * light + grain).clamp(0.0, 255.0) as u8;
            }
        }
    }
    px
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(images: usize) -> SynthOptions {
        SynthOptions {
            images,
            classes: 3,
            size: Some((40, 30)),
            quality: 90,
            seed: 1,
        }
    }

    fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        for class in std::fs::read_dir(dir).expect("the tree") {
            let class = class.expect("entry").path();
            for f in std::fs::read_dir(&class).expect("a class") {
                let p = f.expect("entry").path();
                let rel = p.strip_prefix(dir).expect("below").to_string_lossy().into_owned();
                out.push((rel, std::fs::read(&p).expect("read")));
            }
        }
        out.sort();
        out
    }

    #[test]
    fn a_tree_is_whole_jpegs_dealt_round_the_classes_and_reproducible() {
        let t = tempfile::tempdir().expect("tmp");
        let (a, b) = (t.path().join("a"), t.path().join("b"));
        let s = synth(&a, &opts(7), &|_| {}).expect("a tree");
        assert_eq!(s.files, 7);
        assert_eq!((s.mean_width, s.mean_height), (40.0, 30.0));
        synth(&b, &opts(7), &|_| {}).expect("again");
        let (fa, fb) = (files(&a), files(&b));
        assert_eq!(fa, fb, "the same seed, the same files");
        assert_eq!(fa.len(), 7);
        assert_eq!(fa.iter().filter(|(n, _)| n.starts_with("class_000/")).count(), 3);
        for (name, bytes) in &fa {
            assert!(!name.contains(".part"), "{name}");
            let mut rgb = crate::decode::Rgb::default();
            crate::decode::decode(bytes, &mut rgb).expect("decodes");
            assert_eq!((rgb.width, rgb.height), (40, 30));
        }
    }

    #[test]
    fn photo_sized_images_weigh_like_photos() {
        let t = tempfile::tempdir().expect("tmp");
        let o = SynthOptions {
            images: 4,
            classes: 2,
            size: None,
            quality: 90,
            seed: 5,
        };
        let s = synth(&t.path().join("t"), &o, &|_| {}).expect("a tree");
        assert!(s.mean_width >= 260.0 && s.mean_width <= 600.0, "{s:?}");
        // ImageNet's JPEGs average about 110 KB; a scene of flat colour
        // would be a few KB.
        assert!(s.mean_bytes > 40e3 && s.mean_bytes < 300e3, "{s:?}");
    }

    #[test]
    fn a_used_folder_is_refused_untouched() {
        let t = tempfile::tempdir().expect("tmp");
        std::fs::write(t.path().join("mine.txt"), b"keep").expect("write");
        let e = synth(t.path(), &opts(2), &|_| {}).expect_err("used");
        assert!(e.0.contains("already used"), "{e}");
        assert_eq!(std::fs::read_dir(t.path()).expect("dir").count(), 1);
    }
}
