//! Output files written the way a careful shell redirect would be: whole
//! or not at all where the target is a file, and in place where it is not
//! one (a FIFO, a device), never replacing what the user pointed at.

use anyhow::{bail, Result};
use std::ffi::CString;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Symlinks followed at most, as the kernel's ELOOP limit.
const MAX_LINKS: usize = 40;

/// Writes `contents` to `path`:
/// - a regular file, or a path that does not exist yet: through a temporary
///   file beside it and a rename, so a reader (or a run killed half-way)
///   never sees a half-written file and an older file is only ever replaced
///   by a complete one; an existing file keeps its permissions, owner,
///   group and extended attributes as far as the process may set them
///   (where the rename is not allowed but the file is writable, as for
///   another user's file in a sticky folder or a bind-mounted file, it is
///   rewritten in place, as a redirect would);
/// - a symlink: followed, and its final target written as above (the link
///   stays a link);
/// - a link to one of this process's descriptors (`/dev/stdout`,
///   `/dev/fd/N`, `/proc/self/fd/N`): written through the descriptor, where
///   the shell left it;
/// - a FIFO, a character device, or another process's descriptor link:
///   opened (appending) and written in place, so a FIFO's reader gets the
///   data and a device node is never replaced.
///
/// A directory, a missing or read-only folder, or a file the user could not
/// write with a shell redirect (read-only, when not root) is refused in one
/// line naming `path`, and nothing is written.
pub fn write_atomic(path: &Path, contents: &str) -> Result<()> {
    write_atomic_bytes(path, contents.as_bytes())
}

/// [`write_atomic`] for bytes (a `.npy`, say).
pub fn write_atomic_bytes(path: &Path, contents: &[u8]) -> Result<()> {
    let shown = path.display();
    let written = match classify(path)? {
        Target::File(p, keep) => replace_file(&p, contents, keep),
        // A FIFO's reader that quit is a lost output, said in one line,
        // not the quiet end of a closed stdout.
        Target::InPlace(p) => write_in_place(&p, contents).map_err(|e| match e.kind() {
            std::io::ErrorKind::BrokenPipe => std::io::Error::other("its reader went away"),
            _ => e,
        }),
        Target::Descriptor(fd) => write_to_descriptor(fd, contents),
    };
    // The io::Error stays the root cause: a broken pipe (the reader of
    // `--out /dev/stdout` went away) ends the run as a closed stdout does.
    written.map_err(|e| anyhow::Error::from(e).context(format!("cannot write '{shown}'")))
}

/// What [`write_atomic`] refuses at `path`, found before anything runs, in
/// one line; `Ok` for anything it can write.
pub fn check_target(path: &Path) -> Result<()> {
    if let Target::InPlace(p) = classify(path)? {
        if fs::metadata(&p).is_ok_and(|m| m.file_type().is_fifo()) {
            unwritten_fifos().push(p);
        }
    }
    Ok(())
}

/// What stops cnnbench from writing files into the folder `path` (made
/// when missing), found before anything runs, in one line naming `path`.
pub fn check_folder(path: &Path) -> Result<()> {
    let shown = path.display();
    match fs::metadata(path) {
        Ok(m) if !m.is_dir() => bail!("cannot write into '{shown}': it is not a folder"),
        Ok(_) if !access(path, libc::W_OK | libc::X_OK) => {
            bail!("cannot write into '{shown}': permission denied")
        }
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // It will be made: the nearest folder above that exists must
            // take a new entry.
            let mut up = parent(path);
            while !up.exists() {
                up = match up.parent().filter(|u| !u.as_os_str().is_empty()) {
                    Some(u) => u.to_path_buf(),
                    None => PathBuf::from("."),
                };
            }
            if !up.is_dir() {
                bail!(
                    "cannot create '{shown}': '{}' is not a folder",
                    up.display()
                );
            }
            if !access(&up, libc::W_OK | libc::X_OK) {
                bail!(
                    "cannot create '{shown}': folder '{}' is not writable",
                    up.display()
                );
            }
            Ok(())
        }
        Err(e) => bail!("cannot write into '{shown}': {e}"),
    }
}

/// FIFOs named as outputs and not written yet. A FIFO's reader waits until
/// a writer opens it and closes it; a run that fails before its one write
/// must still let the reader go.
fn unwritten_fifos() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    static FIFOS: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    FIFOS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Opens and closes every output FIFO that was never written, so that a
/// reader waiting on it sees end-of-file instead of hanging: called when
/// the process ends, however it ends. A FIFO without a reader is left
/// alone (the non-blocking open fails).
pub fn release_fifo_readers() {
    for p in unwritten_fifos().drain(..) {
        let _ = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&p);
    }
}

/// Whether `path` may be rewritten after every record: a regular file (or
/// a new one) may; a FIFO, a device or `/dev/stdout` gets the output once,
/// at the end, or its reader would see every partial copy.
pub fn rewritable(path: &Path) -> bool {
    matches!(classify(path), Ok(Target::File(..)))
}

/// How a path is written.
enum Target {
    /// A regular file (what it is now, when it exists) or a new one: by a
    /// temporary file and a rename.
    File(PathBuf, Option<fs::Metadata>),
    /// Opened and written as it is.
    InPlace(PathBuf),
    /// One of this process's open files, named by a descriptor link
    /// (`/dev/stdout`, `/dev/fd/3`, `/proc/self/fd/1`): written through
    /// the descriptor itself, at the position the shell left it and
    /// sharing it, as a redirect's output would be.
    Descriptor(std::os::fd::RawFd),
}

/// The target behind `path`, or why it cannot be written.
fn classify(path: &Path) -> Result<Target> {
    let shown = path.display();
    // Another process's descriptor links (/proc/PID/fd/N) name open
    // files, not paths: they are opened, never renamed over.
    let magic = |p: &Path| {
        p.starts_with("/dev/fd")
            || (p.starts_with("/proc")
                && p.parent().and_then(|d| d.file_name()) == Some("fd".as_ref()))
    };
    let mut p = path.to_path_buf();
    let mut hops = 0;
    loop {
        if let Some(fd) = descriptor_of(&p) {
            // SAFETY: fcntl(2) F_GETFL only reads the descriptor's flags.
            let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
            if flags < 0 {
                bail!("cannot write '{shown}': descriptor {fd} is not open");
            }
            if flags & libc::O_ACCMODE == libc::O_RDONLY {
                bail!("cannot write '{shown}': descriptor {fd} is open for reading only");
            }
            return Ok(Target::Descriptor(fd));
        }
        if magic(&p) {
            return match fs::metadata(path) {
                Ok(m) if m.is_dir() => bail!("cannot write '{shown}': it is a directory"),
                Ok(_) if !writable(path) => bail!("cannot write '{shown}': permission denied"),
                Ok(_) => Ok(Target::InPlace(path.to_path_buf())),
                Err(e) => bail!("cannot write '{shown}': {e}"),
            };
        }
        match fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                if !may_follow(&p, &m) {
                    bail!(
                        "cannot write '{shown}': '{}' is another user's symlink in a sticky, \
                         world-writable folder (the kernel's protected_symlinks would refuse it)",
                        p.display()
                    );
                }
                hops += 1;
                if hops > MAX_LINKS {
                    bail!("cannot write '{shown}': too many levels of symbolic links");
                }
                let to = fs::read_link(&p)
                    .map_err(|e| anyhow::anyhow!("cannot write '{shown}': {e}"))?;
                p = if to.is_absolute() {
                    to
                } else {
                    parent(&p).join(to)
                };
            }
            _ => break,
        }
    }
    match fs::metadata(&p) {
        Ok(m) if m.is_dir() => bail!("cannot write '{shown}': it is a directory"),
        Ok(_) if !writable(&p) => {
            bail!("cannot write '{shown}': permission denied (it is read-only)")
        }
        Ok(m) if m.is_file() => Ok(Target::File(p, Some(m))),
        Ok(_) => Ok(Target::InPlace(p)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let dir = parent(&p);
            if !dir.is_dir() {
                bail!(
                    "cannot write '{shown}': folder '{}' does not exist",
                    dir.display()
                );
            }
            if !access(&dir, libc::W_OK | libc::X_OK) {
                bail!(
                    "cannot write '{shown}': folder '{}' is not writable",
                    dir.display()
                );
            }
            Ok(Target::File(p, None))
        }
        Err(e) => bail!("cannot write '{shown}': {e}"),
    }
}

/// The descriptor a link to one of this process's open files names:
/// `/dev/stdout`, `/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N`,
/// `/proc/thread-self/fd/N` or `/proc/<this pid>/fd/N`.
fn descriptor_of(p: &Path) -> Option<std::os::fd::RawFd> {
    let s = p.to_str()?;
    match s {
        "/dev/stdout" => return Some(1),
        "/dev/stderr" => return Some(2),
        _ => {}
    }
    let own = format!("/proc/{}/fd/", std::process::id());
    let n = [
        "/dev/fd/",
        "/proc/self/fd/",
        "/proc/thread-self/fd/",
        own.as_str(),
    ]
    .iter()
    .find_map(|prefix| s.strip_prefix(prefix))?;
    n.parse().ok()
}

/// The kernel's `fs.protected_symlinks` rule, which following a link by
/// hand would bypass: a symlink in a sticky, world-writable folder (`/tmp`)
/// is followed only by its owner or when the folder's owner owns it too.
fn may_follow(link: &Path, m: &fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(dir) = fs::metadata(parent(link)) else {
        return true;
    };
    let sticky_world_writable = dir.mode() & 0o1002 == 0o1002;
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    !sticky_world_writable || m.uid() == me || m.uid() == dir.uid()
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
    access(path, libc::W_OK)
}

/// access(2): whether this process may use `path` in `mode`.
fn access(path: &Path, mode: libc::c_int) -> bool {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a valid NUL-terminated path; access(2) only reads it.
    unsafe { libc::access(c.as_ptr(), mode) == 0 }
}

fn write_in_place(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    unwritten_fifos().retain(|p| p != path);
    // Appending: another process's descriptor link opens its file anew
    // at offset 0, and writing there would overwrite what was written.
    let mut f = open_for_writing(path)?;
    f.write_all(contents)?;
    f.flush()
}

/// Opens an in-place target for appending. A FIFO is opened without
/// blocking and retried until a reader comes, so that a stop signal that
/// arrives while no reader is there ends the wait (a blocked open(2) would
/// outlive the first Ctrl-C).
fn open_for_writing(path: &Path) -> std::io::Result<fs::File> {
    let fifo = fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo());
    if !fifo {
        return OpenOptions::new().append(true).open(path);
    }
    let signals = crate::signals::count();
    loop {
        match OpenOptions::new()
            .append(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
        {
            Ok(f) => {
                use std::os::fd::AsRawFd;
                // Blocking writes from here: a slow reader is waited for.
                // SAFETY: fcntl(2) on a descriptor this function owns.
                unsafe {
                    let flags = libc::fcntl(f.as_raw_fd(), libc::F_GETFL);
                    if flags >= 0 {
                        libc::fcntl(f.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK);
                    }
                }
                return Ok(f);
            }
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                if crate::signals::count() != signals {
                    return Err(std::io::Error::other(
                        "no reader opened the FIFO before the run was stopped",
                    ));
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Writes through one of this process's open descriptors, without closing
/// it.
fn write_to_descriptor(fd: std::os::fd::RawFd, contents: &[u8]) -> std::io::Result<()> {
    use std::os::fd::FromRawFd;
    // SAFETY: `fd` was checked open for writing; ManuallyDrop leaves it
    // open for whoever else holds it (stdout).
    let f = std::mem::ManuallyDrop::new(unsafe { fs::File::from_raw_fd(fd) });
    (&*f).write_all(contents)?;
    (&*f).flush()
}

/// The temporary file and the rename. Where the folder takes no new file,
/// or the rename is refused, but the existing file itself is writable (a
/// shell redirect would work), the file is rewritten in place instead.
fn replace_file(path: &Path, contents: &[u8], keep: Option<fs::Metadata>) -> std::io::Result<()> {
    use std::io::ErrorKind::{CrossesDevices, PermissionDenied, ResourceBusy};
    let in_place = || {
        let mut f = OpenOptions::new().write(true).truncate(true).open(path)?;
        f.write_all(contents)?;
        f.flush()
    };
    // Errors carry the kind only: never the temporary file's name.
    let plain = |e: std::io::Error| std::io::Error::from(e.kind());
    // A new file gets what a redirect gives it: 0o666 less the umask (and
    // default ACLs), applied by the kernel at creation.
    // An existing file's mode from the start (the umask may narrow it
    // until the chmod below): its new contents are never readable by more
    // users than its old ones were.
    let mode = keep
        .as_ref()
        .map_or(0o666, |m| m.permissions().mode() & 0o7777);
    // The second-signal handler knows each name before the file exists
    // (tracked, then created), so no moment has the file unguarded.
    let mut tracked = Vec::new();
    let made = tempfile::Builder::new()
        .prefix(".cnnbench-")
        .suffix(".tmp")
        .make_in(parent(path), |p| {
            use std::os::unix::fs::OpenOptionsExt;
            tracked.push(crate::signals::TempFile::track(p));
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(mode)
                .open(p)
        });
    let mut tmp = match made {
        Ok(t) => t,
        Err(e) if e.kind() == PermissionDenied && keep.is_some() => return in_place(),
        Err(e) => return Err(plain(e)),
    };
    tmp.write_all(contents).map_err(plain)?;
    tmp.flush().map_err(plain)?;
    // An existing file keeps its owner, group, extended attributes (ACLs)
    // and, last (a change of owner clears set-id bits), its mode.
    if let Some(m) = &keep {
        keep_owner_and_attributes(tmp.as_file(), path, m);
        fs::set_permissions(tmp.path(), m.permissions()).map_err(plain)?;
    }
    match tmp.persist(path) {
        Ok(_) => Ok(()),
        Err(e)
            if keep.is_some()
                && matches!(
                    e.error.kind(),
                    PermissionDenied | ResourceBusy | CrossesDevices
                ) =>
        {
            in_place()
        }
        Err(e) => Err(plain(e.error)),
    }
}

/// Gives the new file the old one's owner and group, and copies its
/// extended attributes (POSIX ACLs live there), as far as this process
/// may: root keeps everything, as a redirect into the file would; another
/// user keeps the group where they belong to it and the attributes they
/// may set, and the new file is theirs (as after `sed -i`).
fn keep_owner_and_attributes(tmp: &fs::File, path: &Path, old: &fs::Metadata) {
    use std::os::unix::fs::MetadataExt;
    if std::os::unix::fs::fchown(tmp, Some(old.uid()), Some(old.gid())).is_err() {
        let _ = std::os::unix::fs::fchown(tmp, None, Some(old.gid()));
    }
    for (name, value) in xattrs(path) {
        use std::os::fd::AsRawFd;
        // SAFETY: valid fd, NUL-terminated name, and a buffer of the
        // length given; fsetxattr(2) only reads them.
        unsafe {
            libc::fsetxattr(
                tmp.as_raw_fd(),
                name.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                0,
            );
        }
    }
}

/// The extended attributes of `path` (followed through links), each name
/// with its value; none where the file system has none or refuses.
fn xattrs(path: &Path) -> Vec<(CString, Vec<u8>)> {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return Vec::new();
    };
    // Sizes are asked first; an attribute that grows in between is skipped.
    let read = |len: isize, fill: &mut dyn FnMut(&mut [u8]) -> isize| -> Option<Vec<u8>> {
        let mut buf = vec![0u8; usize::try_from(len).ok()?];
        let got = usize::try_from(fill(&mut buf)).ok()?;
        (got <= buf.len()).then(|| {
            buf.truncate(got);
            buf
        })
    };
    // SAFETY: a valid path; a null buffer of size 0 asks for the size.
    let len = unsafe { libc::listxattr(c.as_ptr(), std::ptr::null_mut(), 0) };
    let Some(names) = read(len, &mut |b| unsafe {
        // SAFETY: `b` is writable for its length.
        libc::listxattr(c.as_ptr(), b.as_mut_ptr().cast(), b.len())
    }) else {
        return Vec::new();
    };
    names
        .split(|&b| b == 0)
        .filter(|n| !n.is_empty())
        .filter_map(|n| {
            let name = CString::new(n).ok()?;
            // SAFETY: valid path and name; size query as above.
            let len = unsafe { libc::getxattr(c.as_ptr(), name.as_ptr(), std::ptr::null_mut(), 0) };
            let value = read(len, &mut |b| unsafe {
                // SAFETY: `b` is writable for its length.
                libc::getxattr(c.as_ptr(), name.as_ptr(), b.as_mut_ptr().cast(), b.len())
            })?;
            Some((name, value))
        })
        .collect()
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
    fn a_replaced_file_keeps_its_owner_and_extended_attributes() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("out.json");
        fs::write(&f, "old").unwrap();
        let c = CString::new(f.as_os_str().as_bytes()).unwrap();
        let (name, value) = (c"user.cnnbench_test", b"kept");
        // SAFETY: valid path, name and value.
        let has_xattrs = unsafe {
            libc::setxattr(
                c.as_ptr(),
                name.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                0,
            )
        } == 0;
        // Only root can give the file away; as anyone else, the owner is
        // us before and after.
        let root = unsafe { libc::geteuid() } == 0;
        if root {
            std::os::unix::fs::chown(&f, Some(65534), Some(65534)).unwrap();
        }
        let before = fs::metadata(&f).unwrap();
        write_atomic(&f, "new").unwrap();
        let after = fs::metadata(&f).unwrap();
        assert_eq!(fs::read_to_string(&f).unwrap(), "new");
        assert_ne!(before.ino(), after.ino(), "not replaced by a rename");
        assert_eq!((after.uid(), after.gid()), (before.uid(), before.gid()));
        if has_xattrs {
            let kept = xattrs(&f);
            assert!(
                kept.iter().any(|(n, v)| n.as_c_str() == name && v == value),
                "{kept:?}"
            );
        }
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
        // /dev/stdout is the kernel's link to an open file (a pipe, a
        // terminal, or a file the shell opened): written through the
        // descriptor, once, never renamed over.
        if Path::new("/dev/stdout").exists() {
            assert!(matches!(
                classify(Path::new("/dev/stdout")),
                Ok(Target::Descriptor(1))
            ));
            assert!(!rewritable(Path::new("/dev/stdout")));
        }
        write_atomic(Path::new("/dev/null"), "nothing").unwrap();
        assert!(fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
        if Path::new("/dev/full").exists() {
            let e = write_atomic(Path::new("/dev/full"), "x").unwrap_err();
            let e = format!("{e:#}");
            assert!(e.starts_with("cannot write '/dev/full': "), "{e}");
        }
    }

    #[test]
    fn a_fifo_never_written_still_lets_its_reader_go() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("out.fifo");
        let c = CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        check_target(&fifo).unwrap();
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || fs::read(&fifo).map(|b| b.len()))
        };
        // The reader blocks in open() until a writer comes and goes: what
        // a run that fails before its one write does on its way out.
        while !reader.is_finished() {
            release_fifo_readers();
            check_target(&fifo).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(reader.join().unwrap().unwrap(), 0);
        release_fifo_readers();
    }

    #[test]
    fn dump_folders_are_checked_before_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        fs::write(&file, "x").unwrap();
        let e = check_folder(&file).unwrap_err().to_string();
        assert!(e.contains("it is not a folder"), "{e}");
        assert!(check_folder(&file.join("sub")).is_err());
        check_folder(&dir.path().join("new/deeper")).unwrap();
        check_folder(dir.path()).unwrap();
    }

    #[test]
    fn refusals_name_the_path_given() {
        let d = tempfile::tempdir().unwrap();
        let e = write_atomic(d.path(), "x").unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
        let to_dir = d.path().join("to_dir");
        std::os::unix::fs::symlink(d.path(), &to_dir).unwrap();
        let e = write_atomic(&to_dir, "x").unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
        let into_missing = d.path().join("into_missing");
        std::os::unix::fs::symlink(d.path().join("gone/out.json"), &into_missing).unwrap();
        let e = write_atomic(&into_missing, "x").unwrap_err().to_string();
        assert!(e.contains("does not exist"), "{e}");
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

    #[test]
    fn another_users_link_in_a_sticky_folder_is_not_followed() {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return; // Only root can give a link to another user.
        }
        let d = tempfile::tempdir().unwrap();
        fs::set_permissions(d.path(), fs::Permissions::from_mode(0o1777)).unwrap();
        let victim = d.path().join("victim.txt");
        fs::write(&victim, "keep").unwrap();
        let link = d.path().join("out.json");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let c = CString::new(link.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid path; 65534 is `nobody`.
        assert_eq!(unsafe { libc::lchown(c.as_ptr(), 65534, 65534) }, 0);
        let e = write_atomic(&link, "x").unwrap_err().to_string();
        assert!(e.contains("protected_symlinks"), "{e}");
        assert_eq!(fs::read_to_string(&victim).unwrap(), "keep");
    }
}
