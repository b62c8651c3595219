//! Reading a file a user names, with a cap on its size checked while
//! reading. A descriptor list is kilobytes and a results file megabytes:
//! `--from /dev/zero`, a FIFO fed forever or a disk image given by mistake
//! ends in one line after reading at most the cap (and a regular file over
//! it is refused before a byte is read), instead of filling memory until
//! the kernel ends the process and takes others with it.

use anyhow::{bail, Result};
use std::io::Read;
use std::path::Path;

/// The most a descriptor list (`conv --from`, `rnn --from`) holds: 16 MiB,
/// about 300,000 descriptors.
pub const DESCRIPTOR_LIST_BYTES: u64 = 16 << 20;

/// The most a results file, a peer's CSV or a price list holds: 256 MiB,
/// about 200,000 records (a results file of 100,000 records is about
/// 60 MB).
pub const RESULTS_FILE_BYTES: u64 = 256 << 20;

/// The most an image file of a tree holds (as the loader's own cap).
pub const IMAGE_FILE_BYTES: u64 = cnnbench_data::loader::MAX_FILE_BYTES;

/// `n` bytes as `16 MiB`.
pub fn mib(n: u64) -> String {
    format!("{} MiB", n >> 20)
}

/// The text of the file at `path`, at most `cap` bytes of it: more is an
/// error saying the cap and `what` it holds (`a descriptor list`). The
/// error does not name the path; callers add it (`cannot read 'X': ...`).
pub fn read_text(path: &Path, cap: u64, what: &str) -> Result<String> {
    let bytes = read_bytes(path, cap, what)?;
    match String::from_utf8(bytes) {
        Ok(s) => Ok(s),
        Err(_) => bail!("stream did not contain valid UTF-8"),
    }
}

/// The bytes of the file at `path`, at most `cap` of them (see
/// [`read_text`]).
pub fn read_bytes(path: &Path, cap: u64, what: &str) -> Result<Vec<u8>> {
    let too_big = || format!("more than {}, the most {what} holds", mib(cap));
    let mut f = std::fs::File::open(path)?;
    let meta = f.metadata()?;
    if meta.is_dir() {
        bail!("it is a directory");
    }
    if meta.is_file() && meta.len() > cap {
        bail!("{} bytes: {}", meta.len(), too_big());
    }
    let mut buf = Vec::new();
    if meta.is_file() {
        // The size is known and under the cap: one allocation, fallible.
        buf.try_reserve_exact(meta.len() as usize)
            .map_err(|_| anyhow::anyhow!("{} bytes: cannot allocate them", meta.len()))?;
    }
    // `take`: a file that grows while read, a FIFO or a device stops one
    // byte past the cap all the same.
    f.by_ref().take(cap + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > cap {
        bail!("{}", too_big());
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_under_the_cap_are_read_and_others_refused() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("list.txt");
        std::fs::write(&f, "mb1ic4ih8oc4kh3\n").unwrap();
        assert_eq!(read_text(&f, 100, "a list").unwrap(), "mb1ic4ih8oc4kh3\n");
        let e = format!("{:#}", read_text(&f, 4, "a list").unwrap_err());
        assert_eq!(e, "16 bytes: more than 0 MiB, the most a list holds");
        std::fs::write(&f, b"\xff\xfe").unwrap();
        let e = format!("{:#}", read_text(&f, 100, "a list").unwrap_err());
        assert!(e.contains("valid UTF-8"), "{e}");
        let e = format!("{:#}", read_text(t.path(), 100, "a list").unwrap_err());
        assert!(e.contains("directory"), "{e}");
    }

    #[test]
    fn an_endless_device_stops_at_the_cap() {
        let e = format!(
            "{:#}",
            read_bytes(Path::new("/dev/zero"), 1 << 20, "a list").unwrap_err()
        );
        assert_eq!(e, "more than 1 MiB, the most a list holds");
    }
}
