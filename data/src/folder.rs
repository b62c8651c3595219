//! An ImageFolder tree as torchvision's `datasets.ImageFolder` reads it:
//! the classes are the sorted names of the root's folders, the samples the
//! files below each (walked recursively, links followed, sorted) whose
//! extension torchvision takes, in class order; a sample's index is the
//! same as in torchvision.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// torchvision's `IMG_EXTENSIONS` (matched without regard to case).
pub const IMG_EXTENSIONS: [&str; 9] = [
    "jpg", "jpeg", "png", "ppm", "bmp", "pgm", "tif", "tiff", "webp",
];

/// One image file and its class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sample {
    pub path: PathBuf,
    pub class: u32,
}

#[derive(Debug)]
pub struct ImageFolder {
    root: PathBuf,
    classes: Vec<String>,
    samples: Vec<Sample>,
}

/// Why a folder is no ImageFolder tree, in one line naming it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FolderError(pub String);

impl std::fmt::Display for FolderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FolderError {}

fn io_err(what: &str, p: &Path, e: std::io::Error) -> FolderError {
    FolderError(format!("cannot {what} '{}': {e}", p.display()))
}

/// Class folders at most; more means the wrong folder was given.
const MAX_CLASSES: usize = 1 << 20;

impl ImageFolder {
    pub fn scan(dir: &Path) -> Result<ImageFolder, FolderError> {
        let meta = std::fs::metadata(dir).map_err(|e| io_err("read", dir, e))?;
        if !meta.is_dir() {
            return Err(FolderError(format!(
                "'{}' is not a folder: an ImageFolder tree is a folder holding one folder per class",
                dir.display()
            )));
        }
        let mut classes = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| io_err("list", dir, e))? {
            let entry = entry.map_err(|e| io_err("list", dir, e))?;
            // A link to a folder counts, as Python's `is_dir()` follows it.
            if std::fs::metadata(entry.path()).is_ok_and(|m| m.is_dir()) {
                classes.push(entry.file_name());
            }
            if classes.len() > MAX_CLASSES {
                return Err(FolderError(format!(
                    "'{}' holds more than {MAX_CLASSES} folders: not an ImageFolder tree",
                    dir.display()
                )));
            }
        }
        if classes.is_empty() {
            return Err(FolderError(format!(
                "no class folders in '{}': an ImageFolder tree holds one folder per class",
                dir.display()
            )));
        }
        // Python sorts str by code point: UTF-8 bytes sort the same way.
        classes.sort_by(|a, b| a.as_encoded_bytes().cmp(b.as_encoded_bytes()));
        let mut samples = Vec::new();
        for (k, class) in classes.iter().enumerate() {
            let mut seen = HashSet::new();
            walk(&dir.join(class), k as u32, &mut seen, &mut samples)?;
        }
        if samples.is_empty() {
            return Err(FolderError(format!(
                "no image files ({}) in the {} class folder(s) of '{}'",
                IMG_EXTENSIONS.join(", "),
                classes.len(),
                dir.display()
            )));
        }
        Ok(ImageFolder {
            root: dir.to_path_buf(),
            classes: classes
                .iter()
                .map(|c| c.to_string_lossy().into_owned())
                .collect(),
            samples,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Class names, in label order (lossy where a name is not UTF-8).
    pub fn classes(&self) -> &[String] {
        &self.classes
    }

    pub fn samples(&self) -> &[Sample] {
        &self.samples
    }

    pub fn len(&self) -> usize {
        self.samples.len()
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }
}

fn has_image_extension(p: &Path) -> bool {
    p.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| IMG_EXTENSIONS.iter().any(|x| e.eq_ignore_ascii_case(x)))
}

/// `os.walk(dir, followlinks=True)` in sorted order, each real folder once
/// (a link back up the tree is not walked again).
fn walk(
    dir: &Path,
    class: u32,
    seen: &mut HashSet<PathBuf>,
    out: &mut Vec<Sample>,
) -> Result<(), FolderError> {
    let Ok(real) = std::fs::canonicalize(dir) else {
        return Ok(());
    };
    if !seen.insert(real) {
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        // An unreadable class folder adds no files, as os.walk's default.
        Err(_) => return Ok(()),
    };
    entries.sort_by(|a, b| {
        a.as_os_str()
            .as_encoded_bytes()
            .cmp(b.as_os_str().as_encoded_bytes())
    });
    let mut dirs = Vec::new();
    for p in entries {
        if std::fs::metadata(&p).is_ok_and(|m| m.is_dir()) {
            dirs.push(p);
        } else if has_image_extension(&p) {
            // Anything named like an image is a sample, as in torchvision;
            // the loader skips (and counts) what it cannot read.
            out.push(Sample { path: p, class });
        }
    }
    for d in dirs {
        walk(&d, class, seen, out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(p: &Path) {
        std::fs::create_dir_all(p.parent().expect("a parent")).expect("mkdir");
        std::fs::write(p, b"x").expect("write");
    }

    #[test]
    fn classes_and_samples_in_torchvisions_order() {
        let t = tempfile::tempdir().expect("tmp");
        let r = t.path();
        touch(&r.join("b/2.JPG"));
        touch(&r.join("b/1.png"));
        touch(&r.join("b/sub/0.jpeg"));
        touch(&r.join("b/notes.txt"));
        touch(&r.join("a/z.jpg"));
        touch(&r.join("stray.jpg"));
        std::fs::create_dir(r.join("c")).expect("an empty class");
        let f = ImageFolder::scan(r).expect("a tree");
        assert_eq!(f.classes(), ["a", "b", "c"]);
        let got: Vec<(String, u32)> = f
            .samples()
            .iter()
            .map(|s| {
                let rel = s.path.strip_prefix(r).expect("under the root");
                (rel.to_string_lossy().into_owned(), s.class)
            })
            .collect();
        assert_eq!(
            got,
            [
                ("a/z.jpg".to_string(), 0),
                ("b/1.png".to_string(), 1),
                ("b/2.JPG".to_string(), 1),
                ("b/sub/0.jpeg".to_string(), 1)
            ]
        );
    }

    #[test]
    fn link_loops_are_walked_once() {
        let t = tempfile::tempdir().expect("tmp");
        let r = t.path();
        touch(&r.join("a/x.jpg"));
        std::os::unix::fs::symlink("..", r.join("a/up")).expect("link");
        std::os::unix::fs::symlink(".", r.join("a/self")).expect("link");
        let f = ImageFolder::scan(r).expect("a tree");
        // The root is walked again once through `up` (it is another real
        // folder than `a`), but never endlessly.
        assert!(f.len() >= 1 && f.len() <= 3, "{:?}", f.samples());
    }

    #[test]
    fn non_utf8_names_work() {
        use std::os::unix::ffi::OsStrExt;
        let t = tempfile::tempdir().expect("tmp");
        let class = std::ffi::OsStr::from_bytes(b"cl\xffass");
        touch(&t.path().join(class).join(std::ffi::OsStr::from_bytes(b"im\xfe.jpg")));
        let f = ImageFolder::scan(t.path()).expect("a tree");
        assert_eq!(f.len(), 1);
        assert_eq!(f.classes()[0], "cl\u{fffd}ass");
    }

    #[test]
    fn bad_trees_are_one_line_errors() {
        let t = tempfile::tempdir().expect("tmp");
        let r = t.path();
        let e = ImageFolder::scan(&r.join("missing")).expect_err("missing");
        assert!(e.0.contains("missing"), "{e}");
        let e = ImageFolder::scan(r).expect_err("empty");
        assert!(e.0.contains("no class folders"), "{e}");
        touch(&r.join("flat.jpg"));
        let e = ImageFolder::scan(r).expect_err("no classes");
        assert!(e.0.contains("no class folders"), "{e}");
        let e = ImageFolder::scan(&r.join("flat.jpg")).expect_err("a file");
        assert!(e.0.contains("not a folder"), "{e}");
        touch(&r.join("a/readme.txt"));
        let e = ImageFolder::scan(r).expect_err("no images");
        assert!(e.0.contains("no image files"), "{e}");
        for e in [e] {
            assert!(!e.0.contains('\n'));
        }
    }
}
