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
    /// The class's index: its folder's place among the sorted names.
    pub class: u32,
    /// The file's size when scanned (0 where it could not be read).
    pub bytes: u64,
}

#[derive(Debug)]
pub struct ImageFolder {
    root: PathBuf,
    classes: Vec<String>,
    samples: Vec<Sample>,
    /// The folders below the root that could not be listed (`'PATH':
    /// why`): their images are not in `samples`.
    unreadable: Vec<String>,
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
        let meta = std::fs::metadata(dir).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                FolderError(format!("'{}' does not exist", dir.display()))
            }
            _ => io_err("read", dir, e),
        })?;
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
        let mut unreadable = Vec::new();
        for (k, class) in classes.iter().enumerate() {
            class_samples(&dir.join(class), k as u32, &mut samples, &mut unreadable);
        }
        if samples.is_empty() {
            let why = match unreadable.first() {
                Some(first) => format!(
                    " ({} folder(s) could not be read: {first})",
                    unreadable.len()
                ),
                None => String::new(),
            };
            return Err(FolderError(format!(
                "no image files ({}) in the {} class folder(s) of '{}'{why}",
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
            unreadable,
        })
    }

    /// The folders that could not be listed, each `'PATH': why`: their
    /// images are skipped (and cannot be counted).
    pub fn unreadable(&self) -> &[String] {
        &self.unreadable
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

    /// The samples' bytes, as scanned.
    pub fn total_bytes(&self) -> u64 {
        self.samples.iter().map(|s| s.bytes).sum()
    }
}

fn has_image_extension(p: &Path) -> bool {
    p.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| IMG_EXTENSIONS.iter().any(|x| e.eq_ignore_ascii_case(x)))
}

/// Byte order, which for UTF-8 names is Python's order of `str`.
fn by_bytes(a: &Path, b: &Path) -> std::cmp::Ordering {
    a.as_os_str()
        .as_encoded_bytes()
        .cmp(b.as_os_str().as_encoded_bytes())
}

/// The image files below `class_dir` in torchvision's order: `for root,
/// _, fnames in sorted(os.walk(dir, followlinks=True))`, then
/// `sorted(fnames)` — folders by their path, files by name within each.
/// Unlike `os.walk`, a real folder is walked once, so a link back up the
/// tree is no endless loop.
/// A folder that cannot be listed adds no files, as os.walk's default, and
/// is named in `unreadable`.
fn class_samples(
    class_dir: &Path,
    class: u32,
    out: &mut Vec<Sample>,
    unreadable: &mut Vec<String>,
) {
    let mut seen = HashSet::new();
    let mut folders: Vec<(PathBuf, Vec<Sample>)> = Vec::new();
    let mut stack = vec![class_dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let real = match std::fs::canonicalize(&dir) {
            Ok(real) => real,
            Err(e) => {
                unreadable.push(format!("'{}': {e}", dir.display()));
                continue;
            }
        };
        if !seen.insert(real) {
            continue;
        }
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) => {
                unreadable.push(format!("'{}': {e}", dir.display()));
                continue;
            }
        };
        let mut files = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            // `metadata` follows links, as os.walk(followlinks=True) does;
            // a dangling link is a file (which the loader will skip).
            match std::fs::metadata(&path) {
                Ok(m) if m.is_dir() => stack.push(path),
                found if has_image_extension(&path) => files.push(Sample {
                    path,
                    class,
                    bytes: found.map_or(0, |m| m.len()),
                }),
                _ => {}
            }
        }
        files.sort_by(|a, b| by_bytes(&a.path, &b.path));
        folders.push((dir, files));
    }
    folders.sort_by(|a, b| by_bytes(&a.0, &b.0));
    out.extend(folders.into_iter().flat_map(|(_, files)| files));
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
        // sorted(os.walk()) puts "b/sub-x" before "b/sub/deep": '-' < '/'.
        touch(&r.join("b/sub/deep/9.png"));
        touch(&r.join("b/sub-x/5.png"));
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
                ("b/sub/0.jpeg".to_string(), 1),
                ("b/sub-x/5.png".to_string(), 1),
                ("b/sub/deep/9.png".to_string(), 1),
            ]
        );
        assert!(f.samples().iter().all(|s| s.bytes == 1));
        assert_eq!(f.total_bytes(), 6);
    }

    #[test]
    fn link_loops_are_walked_once() {
        let t = tempfile::tempdir().expect("tmp");
        let r = t.path();
        touch(&r.join("a/x.jpg"));
        touch(&r.join("stray.jpg"));
        std::os::unix::fs::symlink("..", r.join("a/up")).expect("link");
        std::os::unix::fs::symlink(".", r.join("a/self")).expect("link");
        let f = ImageFolder::scan(r).expect("a tree");
        // `self` is `a` again: skipped. `up` is the root, another real
        // folder, walked once (as os.walk's first pass would), and `a`
        // below it is not walked again.
        let got: Vec<&Path> = f
            .samples()
            .iter()
            .map(|s| s.path.strip_prefix(r).expect("under the root"))
            .collect();
        assert_eq!(got, [Path::new("a/x.jpg"), Path::new("a/up/stray.jpg")]);
    }

    #[test]
    fn non_utf8_names_work() {
        use std::os::unix::ffi::OsStrExt;
        let t = tempfile::tempdir().expect("tmp");
        let class = std::ffi::OsStr::from_bytes(b"cl\xffass");
        touch(
            &t.path()
                .join(class)
                .join(std::ffi::OsStr::from_bytes(b"im\xfe.jpg")),
        );
        let f = ImageFolder::scan(t.path()).expect("a tree");
        assert_eq!(f.len(), 1);
        assert_eq!(f.classes()[0], "cl\u{fffd}ass");
        assert!(f.samples()[0]
            .path
            .display()
            .to_string()
            .ends_with("im\u{fffd}.jpg"));
    }

    #[test]
    fn bad_trees_are_one_line_errors() {
        let t = tempfile::tempdir().expect("tmp");
        let r = t.path();
        let e = ImageFolder::scan(&r.join("missing")).expect_err("missing");
        assert!(
            e.0.contains("missing") && e.0.contains("does not exist"),
            "{e}"
        );
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
        assert!(!e.0.contains('\n'));
    }
}
