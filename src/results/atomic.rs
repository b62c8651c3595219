//! Output files written the way a careful shell redirect would be: whole
//! or not at all where the target is a file, and in place where it is not
//! one (a FIFO, a device), never replacing what the user pointed at.

use anyhow::{bail, Result};
use std::ffi::CString;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Symlinks followed at most, as the kernel's ELOOP limit.
const MAX_LINKS: usize = 40;

/// Writes `contents` to `path`:
/// - a regular file, or a path that does not exist yet: through a temporary
///   file beside it and a rename, so a reader (or a run killed half-way)
///   never sees a half-written file and an older file is only ever replaced
///   by a complete one; an existing file keeps its permissions;
/// - a symlink: followed, and its final target written as above (the link
///   stays a link);
/// - a FIFO, a character device or a socket: opened and written in place,
///   so a FIFO's reader gets the data and a device node is never replaced.
///
/// A directory, a missing folder, or a file the user could not write with
/// a shell redirect (read-only, when not root) is refused in one line
/// naming `path`, and nothing is written.
pub fn write_atomic(path: &Path, contents: &str) -> Result<()> {
    check_target(path)?;
    let shown = path.display();
    let target = resolve_links(path)?;
    let written = match fs::metadata(&target) {
        Ok(m) if m.is_file() => replace_file(&target, contents, Some(m.permissions())),
        // A FIFO, a device or a socket.
        Ok(_) => write_in_place(&target, contents),
        Err(_) => replace_file(&target, contents, None),
    };
    written.map_err(|e| anyhow::anyhow!("cannot write '{shown}': {e}"))
}

/// What [`write_atomic`] refuses at `path`, found before anything runs (a
/// directory, a missing folder, a read-only file when not root), in one
/// line; `Ok` for anything it can write.
pub fn check_target(path: &Path) -> Result<()> {
    let shown = path.display();
    let target = resolve_links(path)?;
    match fs::metadata(&target) {
        Ok(m) if m.is_dir() => bail!("cannot write '{shown}': it is a directory"),
        Ok(m) if m.is_file() && !writable(&target) => {
            bail!("cannot write '{shown}': permission denied (the file is read-only)")
        }
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let dir = parent(&target);
            if !dir.is_dir() {
                bail!(
                    "cannot write '{shown}': folder '{}' does not exist",
                    dir.display()
                );
            }
            Ok(())
        }
        Err(e) => bail!("cannot write '{shown}': {e}"),
    }
}

/// `path` with every symlink of its last component followed (a dangling
/// link gives the path it points to, which the write then creates).
fn resolve_links(path: &Path) -> Result<PathBuf> {
    let mut p = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = fs::read_link(&p)
                    .map_err(|e| anyhow::anyhow!("cannot write '{}': {e}", path.display()))?;
                p = if to.is_absolute() {
                    to
                } else {
                    parent(&p).join(to)
                };
            }
            _ => return Ok(p),
        }
    }
    bail!(
        "cannot write '{}': too many levels of symbolic links",
        path.display()
    )
}

fn parent(p: &Path) -> PathBuf {
    p.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf()
}

/// Whether this process may write `path`, as the kernel decides for an
/// `open` (root may write a read-only file; others may not).
fn writable(path: &Path) -> bool {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a valid NUL-terminated path; access(2) only reads it.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

fn write_in_place(path: &Path, contents: &str) -> std::io::Result<()> {
    let mut f = OpenOptions::new().write(true).open(path)?;
    f.write_all(contents.as_bytes())?;
    f.flush()
}

/// The temporary file and the rename. Where the folder takes no new file
/// but the file itself is writable (a shell redirect would work), the file
/// is rewritten in place instead.
fn replace_file(path: &Path, contents: &str, keep: Option<fs::Permissions>) -> std::io::Result<()> {
    let dir = parent(path);
    let mut tmp = match tempfile::Builder::new()
        .prefix(".cnnbench-")
        .suffix(".tmp")
        .tempfile_in(&dir)
    {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied && keep.is_some() => {
            let mut f = OpenOptions::new().write(true).truncate(true).open(path)?;
            f.write_all(contents.as_bytes())?;
            return f.flush();
        }
        Err(e) => return Err(e),
    };
    tmp.write_all(contents.as_bytes())?;
    tmp.flush()?;
    let mode = keep.map_or(0o666 & !umask(), |p| p.mode());
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(mode))?;
    tmp.persist(path).map(|_| ()).map_err(|e| e.error)
}

/// The process's umask (a redirect creates files 0o666 & !umask), read
/// from /proc: umask(2) can only read it by setting it, which would race
/// with other threads creating files.
fn umask() -> u32 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

/// Whether `path` may be rewritten after every record: a regular file (or
/// a new one) may; a FIFO or a device gets the output once, at the end, or
/// its reader would see every partial copy.
pub fn rewritable(path: &Path) -> bool {
    let Ok(target) = resolve_links(path) else {
        return false;
    };
    match fs::metadata(target) {
        Ok(m) => m.is_file(),
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileTypeExt;

    #[test]
    fn a_file_is_replaced_whole_and_keeps_its_mode() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.json");
        write_atomic(&p, "one").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o640)).unwrap();
        write_atomic(&p, "two").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "two");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o640
        );
        // No temporary file is left beside it.
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_symlink_stays_a_link_and_its_target_gets_the_data() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("real.json");
        fs::write(&target, "old").unwrap();
        let link = d.path().join("link.json");
        std::os::unix::fs::symlink("real.json", &link).unwrap();
        write_atomic(&link, "new").unwrap();
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read_to_string(&target).unwrap(), "new");
        // A dangling link creates its target, as a redirect does.
        let dangling = d.path().join("dangling");
        std::os::unix::fs::symlink(d.path().join("made.json"), &dangling).unwrap();
        write_atomic(&dangling, "made").unwrap();
        assert_eq!(
            fs::read_to_string(d.path().join("made.json")).unwrap(),
            "made"
        );
        // A loop is one line.
        let a = d.path().join("a");
        std::os::unix::fs::symlink(d.path().join("b"), &a).unwrap();
        std::os::unix::fs::symlink(&a, d.path().join("b")).unwrap();
        let e = write_atomic(&a, "x").unwrap_err().to_string();
        assert!(e.contains("too many levels"), "{e}");
    }

    #[test]
    fn a_fifo_reader_gets_the_data_and_devices_are_not_replaced() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("pipe");
        let c = CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || fs::read_to_string(fifo).unwrap())
        };
        write_atomic(&fifo, "through the pipe").unwrap();
        assert_eq!(reader.join().unwrap(), "through the pipe");
        assert!(fs::metadata(&fifo).unwrap().file_type().is_fifo());
        assert!(!rewritable(&fifo) && !rewritable(Path::new("/dev/null")));
        assert!(rewritable(&d.path().join("new.json")));
        write_atomic(Path::new("/dev/null"), "nothing").unwrap();
        assert!(fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
        if Path::new("/dev/full").exists() {
            let e = write_atomic(Path::new("/dev/full"), "x")
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("cannot write '/dev/full': "), "{e}");
        }
    }

    #[test]
    fn refusals_name_the_path_given() {
        let d = tempfile::tempdir().unwrap();
        let e = write_atomic(d.path(), "x").unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
        let missing = d.path().join("no/such/out.json");
        let e = write_atomic(&missing, "x").unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("cannot write '{}'", missing.display())),
            "{e}"
        );
        assert!(e.contains("does not exist"), "{e}");
        // A read-only file: refused and untouched, unless we are root
        // (whom the kernel lets write it, as it would a redirect).
        let ro = d.path().join("ro.json");
        fs::write(&ro, "keep").unwrap();
        fs::set_permissions(&ro, fs::Permissions::from_mode(0o444)).unwrap();
        let r = write_atomic(&ro, "new");
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            let e = r.unwrap_err().to_string();
            assert!(e.contains("read-only"), "{e}");
            assert_eq!(fs::read_to_string(&ro).unwrap(), "keep");
        } else {
            r.unwrap();
            assert_eq!(fs::read_to_string(&ro).unwrap(), "new");
        }
    }
}
