//! Synthetic ImageFolder trees of JPEGs that cost what photos cost to
//! decode: natural-looking scenes ([`scene`]: a sky or a backdrop over
//! textured ground, shaded objects with hard edges, sensor grain) at
//! ImageNet-like sizes (470x396 on average, as ImageNet's 469x387), in
//! quality 90 with 4:2:0 chroma as cameras write them. Noise would decode
//! slower than photos and flat colour faster; these weigh about 92 KB at
//! that size (ImageNet's files: about 110 KB, larger photos included), and
//! the summary says what a tree came to.

mod scene;

use crate::transform::Rng;
use jpeg_encoder::{ColorType, Encoder, SamplingFactor};
use rayon::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The widest and tallest image written: a scene is held whole in memory
/// on each thread.
pub const MAX_SIDE: usize = 8192;

#[derive(Clone, Debug)]
pub struct SynthOptions {
    pub images: usize,
    /// Class folders, the images dealt round them.
    pub classes: usize,
    /// Every image this width and height; `None`: ImageNet-like, the long
    /// side 400-600 pixels, a quarter of them portrait (470x396 on
    /// average).
    pub size: Option<(usize, usize)>,
    /// JPEG quality, 1-100.
    pub quality: u8,
    pub seed: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SynthSummary {
    /// Whole JPEGs written: all of them, or fewer when stopped.
    pub files: usize,
    /// False when `stop` ended the run before every image was written.
    pub complete: bool,
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
    synth_until(dir, opts, progress, &AtomicBool::new(false))
}

/// [`synth`], stopping between images once `stop` is set: the images
/// being written finish (or their temporary files are removed), no other
/// starts, and the summary counts the whole JPEGs kept
/// (`complete: false`).
pub fn synth_until(
    dir: &Path,
    opts: &SynthOptions,
    progress: &(dyn Fn(usize) + Sync),
    stop: &AtomicBool,
) -> Result<SynthSummary, SynthError> {
    let bad = |what: &str, p: &Path, e: std::io::Error| {
        SynthError(format!("cannot {what} '{}': {e}", p.display()))
    };
    check(opts)?;
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
    let sizes: Vec<Option<(u64, usize, usize)>> = (0..opts.images)
        .into_par_iter()
        .map(|i| {
            if stop.load(Ordering::Relaxed) {
                return Ok(None);
            }
            let class = i % opts.classes;
            let mut rng = Rng::new(opts.seed ^ (i as u64).wrapping_mul(0xD134_2543_DE82_EF95));
            let (w, h) = opts.size.unwrap_or_else(|| photo_size(&mut rng));
            let px = scene::scene(w, h, class, &mut rng);
            let mut jpeg = Vec::new();
            let mut enc = Encoder::new(&mut jpeg, opts.quality);
            enc.set_sampling_factor(SamplingFactor::R_4_2_0);
            enc.encode(&px, w as u16, h as u16, ColorType::Rgb)
                .map_err(|e| SynthError(format!("encoding image {i}: {e}")))?;
            let folder = dir.join(class_name(class));
            let name = format!("img_{i:07}.jpg");
            let tmp: PathBuf = folder.join(format!(".{name}.part"));
            let path = folder.join(&name);
            // A failed write (a full disk, a file size limit) leaves no
            // temporary file behind.
            std::fs::write(&tmp, &jpeg)
                .map_err(|e| bad("write", &tmp, e))
                .and_then(|()| std::fs::rename(&tmp, &path).map_err(|e| bad("write", &path, e)))
                .inspect_err(|_| {
                    let _ = std::fs::remove_file(&tmp);
                })?;
            progress(done.fetch_add(1, Ordering::Relaxed) + 1);
            Ok(Some((jpeg.len() as u64, w, h)))
        })
        .collect::<Result<_, SynthError>>()?;
    let complete = sizes.iter().all(Option::is_some);
    let sizes: Vec<(u64, usize, usize)> = sizes.into_iter().flatten().collect();
    let n = sizes.len().max(1) as f64;
    let bytes: u64 = sizes.iter().map(|s| s.0).sum();
    Ok(SynthSummary {
        files: sizes.len(),
        complete,
        bytes,
        mean_bytes: bytes as f64 / n,
        mean_width: sizes.iter().map(|s| s.1 as f64).sum::<f64>() / n,
        mean_height: sizes.iter().map(|s| s.2 as f64).sum::<f64>() / n,
    })
}

/// A one-line error for options that make no tree, or one torchvision
/// would refuse (a class folder without images).
fn check(opts: &SynthOptions) -> Result<(), SynthError> {
    if opts.images == 0 || opts.classes == 0 || opts.classes > opts.images {
        return Err(SynthError(format!(
            "{} images in {} classes: a tree needs at least one image in every class",
            opts.images, opts.classes
        )));
    }
    if !(1..=100).contains(&opts.quality) {
        return Err(SynthError(format!(
            "JPEG quality {}: expected 1 to 100",
            opts.quality
        )));
    }
    if let Some((w, h)) = opts.size {
        if !(1..=MAX_SIDE).contains(&w) || !(1..=MAX_SIDE).contains(&h) {
            return Err(SynthError(format!(
                "{w}x{h} pixels: expected 1 to {MAX_SIDE} each way"
            )));
        }
    }
    Ok(())
}

/// The long side 400-600 pixels, the short 0.66-0.8 of it (3:2 to 5:4),
/// landscape three times in four: 470x396 on average, as ImageNet's
/// photos (469x387).
fn photo_size(rng: &mut Rng) -> (usize, usize) {
    let long = rng.int(400, 600);
    let short = (long as f64 * rng.uniform(0.66, 0.8)) as usize;
    if rng.int(0, 3) == 0 {
        (short, long)
    } else {
        (long, short)
    }
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
                let rel = p
                    .strip_prefix(dir)
                    .expect("below")
                    .to_string_lossy()
                    .into_owned();
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
        assert_eq!(
            fa.iter()
                .filter(|(n, _)| n.starts_with("class_000/"))
                .count(),
            3
        );
        for (name, bytes) in &fa {
            assert!(!name.contains(".part"), "no temporary file left: {name}");
            let mut rgb = crate::image::Rgb::default();
            crate::decode::decode(bytes, &mut rgb).expect("decodes");
            assert_eq!((rgb.width, rgb.height), (40, 30));
            // The frame header's luma sampling: 2x2, i.e. chroma 4:2:0.
            let sof = bytes
                .windows(2)
                .position(|w| w == [0xFF, 0xC0])
                .expect("a baseline frame header");
            assert_eq!(bytes[sof + 11], 0x22, "{name}");
        }
        let c = t.path().join("c");
        synth(&c, &SynthOptions { seed: 2, ..opts(7) }, &|_| {}).expect("another seed");
        assert_ne!(files(&c), fa, "another seed, other images");
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
    fn a_stop_keeps_whole_jpegs_only() {
        let t = tempfile::tempdir().expect("tmp");
        let d = t.path().join("t");
        let stop = AtomicBool::new(false);
        // Stopped after the third image: the ones started finish, no other
        // starts.
        let s = synth_until(
            &d,
            &opts(200),
            &|done| {
                if done == 3 {
                    stop.store(true, Ordering::Relaxed)
                }
            },
            &stop,
        )
        .expect("a partial tree");
        assert!(!s.complete);
        assert!(s.files >= 3 && s.files < 200, "{s:?}");
        let fs = files(&d);
        assert_eq!(fs.len(), s.files);
        assert!(fs.iter().all(|(n, _)| !n.contains(".part")), "{fs:?}");
        // Stopped before the first: nothing written, an empty summary.
        let e = t.path().join("e");
        let s = synth_until(&e, &opts(5), &|_| {}, &AtomicBool::new(true)).expect("empty");
        assert_eq!((s.files, s.complete, s.bytes), (0, false, 0));
        assert!(files(&e).is_empty());
    }

    #[test]
    fn a_used_folder_is_refused_untouched() {
        let t = tempfile::tempdir().expect("tmp");
        std::fs::write(t.path().join("mine.txt"), b"keep").expect("write");
        let e = synth(t.path(), &opts(3), &|_| {}).expect_err("used");
        assert!(e.0.contains("already used"), "{e}");
        assert_eq!(std::fs::read_dir(t.path()).expect("dir").count(), 1);
    }

    #[test]
    fn options_that_make_no_tree_are_one_line_errors() {
        let t = tempfile::tempdir().expect("tmp");
        let d = t.path().join("t");
        for (o, want) in [
            (
                SynthOptions {
                    classes: 4,
                    ..opts(3)
                },
                "every class",
            ),
            (
                SynthOptions {
                    quality: 0,
                    ..opts(3)
                },
                "quality",
            ),
            (
                SynthOptions {
                    size: Some((0, 30)),
                    ..opts(3)
                },
                "0x30",
            ),
            (
                SynthOptions {
                    size: Some((9000, 30)),
                    ..opts(3)
                },
                "9000x30",
            ),
        ] {
            let e = synth(&d, &o, &|_| {}).expect_err(want);
            assert!(e.0.contains(want) && !e.0.contains('\n'), "{e}");
        }
        assert!(!d.exists(), "nothing written");
        let f = t.path().join("a-file");
        std::fs::write(&f, b"x").expect("write");
        let e = synth(&f, &opts(3), &|_| {}).expect_err("a file");
        assert!(e.0.contains("a-file"), "{e}");
    }
}
