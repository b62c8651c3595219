//! One image into one slot of a batch, on a loader thread: the file read
//! whole into a buffer the thread keeps, decoded and transformed with the
//! thread's own scratch buffers, each stage timed.

use super::stats::LoaderStats;
use crate::transform::{load_image, Scratch, StageTimes, Transform};
use cnnbench_kernels::clock::Stopwatch;
use std::cell::RefCell;
use std::io::Read;
use std::path::Path;
use std::sync::Mutex;

/// Files larger than this are skipped rather than read: no photo of a
/// dataset is near it; a stray archive, or a link to a device, may be.
pub const MAX_FILE_BYTES: u64 = 256 << 20;
/// A file buffer grown past this by one large file is let go after it,
/// so that one outlier does not pin its size on every thread.
const KEEP_FILE_BUFFER: usize = 32 << 20;

/// What one loader thread keeps from image to image.
#[derive(Default)]
struct Workspace {
    scratch: Scratch,
    file: Vec<u8>,
}

thread_local! {
    // The loader's pool threads are its own: each has one workspace, for
    // as long as the pool lives.
    static WORKSPACE: RefCell<Workspace> = RefCell::new(Workspace::default());
}

/// Loads `path` into `slot` with the randomness of `seed`, adding its
/// times and bytes to `stats`; why not, in one line.
pub fn load(
    path: &Path,
    t: &Transform,
    seed: u64,
    slot: &mut [f32],
    stats: &Mutex<LoaderStats>,
) -> Result<(), String> {
    WORKSPACE.with(|cell| {
        let Ok(mut ws) = cell.try_borrow_mut() else {
            // Only reachable if a rayon wait inside a load ran another
            // load on this thread; a fresh workspace serves that one.
            return load_with(&mut Workspace::default(), path, t, seed, slot, stats);
        };
        load_with(&mut ws, path, t, seed, slot, stats)
    })
}

fn load_with(
    ws: &mut Workspace,
    path: &Path,
    t: &Transform,
    seed: u64,
    slot: &mut [f32],
    stats: &Mutex<LoaderStats>,
) -> Result<(), String> {
    let t0 = Stopwatch::start();
    let read = read_file(path, &mut ws.file);
    let read_s = t0.elapsed_s();
    let result = read.and_then(|()| transform(ws, t, seed, slot));
    let busy = t0.elapsed_s();
    let bytes = ws.file.len() as u64;
    if ws.file.capacity() > KEEP_FILE_BUFFER {
        ws.file = Vec::new();
    }
    let mut st = super::lock(stats);
    st.busy += busy;
    st.read += read_s;
    match result {
        Ok(times) => {
            st.images += 1;
            st.bytes += bytes;
            st.decode += times.decode;
            st.augment += times.augment;
            st.copy += times.copy;
            Ok(())
        }
        Err(why) => {
            st.skip(path, why.clone());
            Err(why)
        }
    }
}

/// `load_image`, with a panic (a bug below us, met on some file nobody
/// foresaw) costing that file rather than the run.
fn transform(
    ws: &mut Workspace,
    t: &Transform,
    seed: u64,
    slot: &mut [f32],
) -> Result<StageTimes, String> {
    let run = std::panic::AssertUnwindSafe(|| load_image(&ws.file, t, seed, &mut ws.scratch, slot));
    match std::panic::catch_unwind(run) {
        Ok(r) => r.map_err(|e| e.0),
        Err(panic) => {
            // The scratch buffers may be half-written: start afresh.
            ws.scratch = Scratch::default();
            Err(format!("the decoder failed: {}", panic_message(&*panic)))
        }
    }
}

/// A panic's message, on one line.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let msg = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into());
    msg.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Reads a regular file whole into `buf`, reusing its memory; a FIFO, a
/// device or a huge file is refused without reading it.
fn read_file(path: &Path, buf: &mut Vec<u8>) -> Result<(), String> {
    buf.clear();
    let cannot = |e: std::io::Error| format!("cannot read it: {e}");
    // Before opening: opening a FIFO for reading waits for a writer.
    if !std::fs::metadata(path).map_err(cannot)?.is_file() {
        return Err("not a regular file".into());
    }
    let mut f = std::fs::File::open(path).map_err(cannot)?;
    let meta = f.metadata().map_err(cannot)?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!(
            "{} bytes: larger than any image read here ({MAX_FILE_BYTES})",
            meta.len()
        ));
    }
    buf.reserve(meta.len() as usize);
    // `take`: a file that grows while read stops at the limit all the same.
    f.by_ref()
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(buf)
        .map_err(cannot)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_read_whole_and_odd_ones_refused() {
        let t = tempfile::tempdir().expect("tmp");
        let f = t.path().join("f.jpg");
        std::fs::write(&f, b"12345").expect("write");
        let mut buf = Vec::with_capacity(100);
        read_file(&f, &mut buf).expect("read");
        assert_eq!(buf, b"12345");
        assert!(buf.capacity() >= 100, "the buffer is reused");
        let e = read_file(&t.path().join("gone.jpg"), &mut buf).expect_err("missing");
        assert!(e.contains("cannot read it"), "{e}");
        assert!(buf.is_empty());
        let e = read_file(t.path(), &mut buf).expect_err("a folder");
        assert!(
            e.contains("not a regular file") || e.contains("cannot read"),
            "{e}"
        );
    }

    #[test]
    fn panic_messages_are_one_line() {
        let p = std::panic::catch_unwind(|| panic!("two\nlines")).expect_err("a panic");
        assert_eq!(panic_message(&*p), "two lines");
    }
}
