//! `report` reads each input once, whole, and then tells what it is and
//! parses it from those bytes: a pipe (`report <(cat run.json)`) or a FIFO
//! cannot be opened twice, and a file that changes between two reads
//! would be judged by one text and parsed from another.

// The most `report` reads of one input: the cap of every results file.
use crate::bounded_read::RESULTS_FILE_BYTES;
use anyhow::{anyhow, bail, Context, Result};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// One input as read: its path and its text.
#[derive(Debug)]
pub struct InputFile {
    pub path: PathBuf,
    pub text: String,
}

/// The error for an input past [`RESULTS_FILE_BYTES`].
fn too_big() -> anyhow::Error {
    anyhow!(
        "more than {} MiB, the most a results file holds",
        RESULTS_FILE_BYTES >> 20
    )
}

/// How often a wait for a FIFO's writer looks at the stop flag.
const POLL_MS: i32 = 100;

/// The text of `path`, read once and at most [`RESULTS_FILE_BYTES`]. A
/// FIFO is waited on until a writer comes (as `cat` would), but a stop
/// signal ends the wait in one line.
pub fn read_input(path: &Path) -> Result<String> {
    let fifo = std::fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo());
    let text = if fifo {
        read_fifo(path)
    } else {
        // A regular file, a pipe of the shell's or a device: the capped
        // read every results file goes through (as the store's).
        crate::bounded_read::read_text(path, RESULTS_FILE_BYTES, "a results file")
    };
    text.with_context(|| format!("cannot read '{}'", path.display()))
}

fn read_fifo(path: &Path) -> Result<String> {
    crate::signals::install()?;
    // Non-blocking: the open returns at once, and each read says whether a
    // writer is there (EAGAIN), has written (bytes) or has gone (0).
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    // Whether a writer has come: before one does, a read also returns 0.
    let mut writer = false;
    loop {
        if crate::signals::stopped() {
            bail!(
                "{} while waiting for a writer on the FIFO",
                crate::signals::stopped_by()
            );
        }
        match file.read(&mut chunk) {
            Ok(0) if writer => break,
            // A writer that came and went without a byte: its hangup.
            Ok(0) => writer = wait(&file) & libc::POLLHUP != 0,
            Ok(n) => {
                writer = true;
                bytes.extend_from_slice(&chunk[..n]);
                if bytes.len() as u64 > RESULTS_FILE_BYTES {
                    return Err(too_big());
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                writer = true;
                wait(&file);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    String::from_utf8(bytes).map_err(|_| anyhow!("stream did not contain valid UTF-8"))
}

/// Waits up to [`POLL_MS`] for `file` to be readable; the events seen.
fn wait(file: &std::fs::File) -> libc::c_short {
    let mut p = libc::pollfd {
        fd: file.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd of a descriptor `file` keeps open.
    let n = unsafe { libc::poll(&mut p, 1, POLL_MS) };
    if n > 0 {
        p.revents
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_is_read_once_from_its_writer() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("run.fifo");
        let c = std::ffi::CString::new(f.to_str().unwrap()).unwrap();
        // SAFETY: a C string that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let writer_path = f.clone();
        let writer = std::thread::spawn(move || {
            // The reader may come first or second: either way one document.
            std::thread::sleep(std::time::Duration::from_millis(150));
            std::fs::write(&writer_path, "{\"records\": []}").unwrap();
        });
        assert_eq!(read_input(&f).unwrap(), "{\"records\": []}");
        writer.join().unwrap();
        // A writer that opens and closes without a byte: an empty text.
        let writer_path = f.clone();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(150));
            drop(
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&writer_path)
                    .unwrap(),
            );
        });
        assert_eq!(read_input(&f).unwrap(), "");
        writer.join().unwrap();
        // A pipe handed over as /dev/fd/N is read the same way, once.
        let e = format!(
            "{:#}",
            read_input(Path::new("/nonexistent/x.json")).unwrap_err()
        );
        assert!(e.starts_with("cannot read '/nonexistent/x.json'"), "{e}");
    }
}
