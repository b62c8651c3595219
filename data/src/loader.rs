//! The input loader: files read, decoded and transformed on a thread pool
//! of its own, into a fixed set of batch buffers that circulate between
//! the loader and its consumer.
//!
//! `prefetch` buffers are allocated once. A producer thread takes a free
//! one, has its pool fill every image slot in parallel, and queues it;
//! [`Loader::next`] hands the oldest queued batch to the caller, and the
//! [`Batch`] goes back to the free list when dropped. So the loader never
//! holds more than `prefetch` batches, the caller's included, and the
//! producer works on the next batch while the caller uses the last.
//!
//! A file that cannot be read or decoded is skipped and counted (the
//! first few kept with their reasons), and its slot takes the next
//! sample, so every batch is full. Where no file of a whole epoch decodes,
//! the caller gets an error instead of waiting forever.

use crate::folder::ImageFolder;
use crate::transform::{load_image, Rng, Scratch, Transform};
use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use rayon::prelude::*;
use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

/// Files larger than this are skipped rather than read (no JPEG of a
/// dataset is near it; a link to a device or a huge stray file is).
pub const MAX_FILE_BYTES: u64 = 256 << 20;
/// Skipped files named in the stats.
const FIRST_SKIPPED: usize = 5;

#[derive(Clone, Copy, Debug)]
pub struct LoaderConfig {
    /// Images per batch.
    pub batch: usize,
    /// Threads of the loader's own pool.
    pub threads: usize,
    /// Batch buffers in all, the one the caller holds included (>= 1).
    pub prefetch: usize,
    pub transform: Transform,
    pub seed: u64,
    /// A new seeded order every epoch (training); else the tree's order.
    pub shuffle: bool,
}

/// What the loader has done since it started. Seconds are summed over
/// its threads.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoaderStats {
    /// Images delivered into batches.
    pub images: usize,
    /// File bytes read for them.
    pub bytes: u64,
    pub read: f64,
    pub decode: f64,
    pub augment: f64,
    pub copy: f64,
    /// The loader's threads' time on images (delivered or skipped).
    pub busy: f64,
    /// Since the loader started.
    pub wall: f64,
    /// The producer's time waiting for a free buffer (the caller was
    /// slower than the loader).
    pub blocked: f64,
    pub skipped: usize,
    pub first_skipped: Vec<(PathBuf, String)>,
    pub threads: usize,
}

impl LoaderStats {
    /// What the loader can deliver: images per second of its threads'
    /// busy time, times its threads.
    pub fn capacity_images_per_sec(&self) -> f64 {
        if self.busy > 0.0 {
            self.images as f64 / self.busy * self.threads as f64
        } else {
            0.0
        }
    }

    /// The work done between `before` and `self` (the same loader).
    pub fn since(&self, before: &LoaderStats) -> LoaderStats {
        LoaderStats {
            images: self.images - before.images,
            bytes: self.bytes - before.bytes,
            read: self.read - before.read,
            decode: self.decode - before.decode,
            augment: self.augment - before.augment,
            copy: self.copy - before.copy,
            busy: self.busy - before.busy,
            wall: self.wall - before.wall,
            blocked: self.blocked - before.blocked,
            skipped: self.skipped - before.skipped,
            first_skipped: self.first_skipped.clone(),
            threads: self.threads,
        }
    }
}

/// One batch's images (NHWC f32) and labels.
struct BatchBuf {
    images: Vec<f32>,
    labels: Vec<u32>,
}

/// Where the next sample comes from: an epoch's order, shared by the
/// threads filling slots.
struct Cursor {
    order: Vec<u32>,
    pos: usize,
    epoch: u64,
    shuffle: bool,
    seed: u64,
}

impl Cursor {
    fn new(n: usize, shuffle: bool, seed: u64) -> Cursor {
        let mut c = Cursor {
            order: (0..n as u32).collect(),
            pos: 0,
            epoch: 0,
            shuffle,
            seed,
        };
        c.reorder();
        c
    }

    fn reorder(&mut self) {
        self.order.sort_unstable();
        if self.shuffle {
            let mut rng = Rng::new(self.seed ^ self.epoch.wrapping_mul(0xA24B_AED4_963E_E407));
            for i in (1..self.order.len()).rev() {
                let j = rng.int(0, i);
                self.order.swap(i, j);
            }
        }
    }

    /// The next sample's index and its epoch.
    fn next(&mut self) -> (usize, u64) {
        if self.pos == self.order.len() {
            self.pos = 0;
            self.epoch += 1;
            self.reorder();
        }
        self.pos += 1;
        (self.order[self.pos - 1] as usize, self.epoch)
    }
}

/// State the producer's threads share with the caller.
struct Shared {
    folder: Arc<ImageFolder>,
    cfg: LoaderConfig,
    cursor: Mutex<Cursor>,
    stats: Mutex<LoaderStats>,
    /// Failures in a row, across threads: a whole epoch of them means no
    /// file decodes.
    failing: AtomicUsize,
    stop: AtomicBool,
    started: Instant,
}

thread_local! {
    /// Each loader thread's decode buffers and file buffer, kept across
    /// images and batches.
    static SCRATCH: RefCell<(Scratch, Vec<u8>)> = RefCell::new((Scratch::default(), Vec::new()));
}

type Ready = Result<Box<BatchBuf>, String>;

pub struct Loader {
    shared: Arc<Shared>,
    ready: Option<Receiver<Ready>>,
    free: Option<Sender<Box<BatchBuf>>>,
    producer: Option<JoinHandle<()>>,
    /// The producer's error, once seen: every later call returns it.
    failed: Mutex<Option<String>>,
}

/// A batch lent to the caller; back to the loader when dropped.
pub struct Batch<'a> {
    buf: Option<Box<BatchBuf>>,
    free: &'a Sender<Box<BatchBuf>>,
}

impl Batch<'_> {
    /// `batch·size²·3` values: NHWC, normalized.
    pub fn images(&self) -> &[f32] {
        self.buf.as_ref().map_or(&[], |b| &b.images)
    }

    pub fn labels(&self) -> &[u32] {
        self.buf.as_ref().map_or(&[], |b| &b.labels)
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        if let Some(b) = self.buf.take() {
            // The loader may be gone already; then so is the buffer.
            let _ = self.free.send(b);
        }
    }
}

impl Loader {
    pub fn start(folder: Arc<ImageFolder>, cfg: LoaderConfig) -> Result<Loader, String> {
        if cfg.batch == 0 || cfg.threads == 0 || cfg.prefetch == 0 || cfg.transform.size == 0 {
            return Err(format!(
                "a loader needs a batch, threads, prefetch and size of at least 1 (got {}, {}, {}, {})",
                cfg.batch, cfg.threads, cfg.prefetch, cfg.transform.size
            ));
        }
        if folder.is_empty() {
            return Err("an ImageFolder tree without images".into());
        }
        let values = cfg
            .batch
            .checked_mul(cfg.transform.size * cfg.transform.size * 3)
            .ok_or("a batch too large to hold")?;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(cfg.threads)
            .thread_name(|i| format!("cnnbench-loader-{i}"))
            .build()
            .map_err(|e| format!("cannot start {} loader threads: {e}", cfg.threads))?;
        let (free_tx, free_rx) = unbounded();
        for _ in 0..cfg.prefetch {
            let mut images = Vec::new();
            images
                .try_reserve_exact(values)
                .map_err(|_| format!("cannot allocate a batch of {} MB", values * 4 >> 20))?;
            images.resize(values, 0.0);
            let _ = free_tx.send(Box::new(BatchBuf {
                images,
                labels: vec![0; cfg.batch],
            }));
        }
        let (ready_tx, ready_rx) = bounded(cfg.prefetch);
        let shared = Arc::new(Shared {
            cursor: Mutex::new(Cursor::new(folder.len(), cfg.shuffle, cfg.seed)),
            folder,
            cfg,
            stats: Mutex::new(LoaderStats {
                threads: cfg.threads,
                ..LoaderStats::default()
            }),
            failing: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            started: Instant::now(),
        });
        let sh = shared.clone();
        let producer = std::thread::Builder::new()
            .name("cnnbench-loader".into())
            .spawn(move || produce(&sh, &pool, &free_rx, &ready_tx))
            .map_err(|e| format!("cannot start the loader: {e}"))?;
        Ok(Loader {
            shared,
            ready: Some(ready_rx),
            free: Some(free_tx),
            producer: Some(producer),
            failed: Mutex::new(None),
        })
    }

    /// The next batch, waiting for it if the loader has none ready.
    pub fn next(&self) -> Result<Batch<'_>, String> {
        if let Some(e) = lock(&self.failed).as_ref() {
            return Err(e.clone());
        }
        let (Some(ready), Some(free)) = (&self.ready, &self.free) else {
            return Err("the loader has stopped".into());
        };
        match ready.recv() {
            Ok(Ok(buf)) => Ok(Batch {
                buf: Some(buf),
                free,
            }),
            Ok(Err(e)) => {
                *lock(&self.failed) = Some(e.clone());
                Err(e)
            }
            Err(_) => Err("the loader stopped".into()),
        }
    }

    pub fn stats(&self) -> LoaderStats {
        let mut s = lock(&self.shared.stats).clone();
        s.wall = self.shared.started.elapsed().as_secs_f64();
        s
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        // Without the free list's sender or the queue's receiver the
        // producer's next wait ends at once.
        self.free.take();
        self.ready.take();
        if let Some(p) = self.producer.take() {
            let _ = p.join();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The producer: fills free buffers until the loader is dropped or fails.
fn produce(
    sh: &Shared,
    pool: &rayon::ThreadPool,
    free: &Receiver<Box<BatchBuf>>,
    ready: &Sender<Ready>,
) {
    let per_image = sh.cfg.transform.size * sh.cfg.transform.size * 3;
    loop {
        let t = Instant::now();
        let Ok(mut buf) = free.recv() else { return };
        lock(&sh.stats).blocked += t.elapsed().as_secs_f64();
        if sh.stop.load(Ordering::Relaxed) {
            return;
        }
        let BatchBuf { images, labels } = &mut *buf;
        // Each slot's sample is drawn here, in order, so a batch holds the
        // same images whatever the threads' timing; only a file that fails
        // sends its slot to the cursor for another.
        let first: Vec<(usize, u64)> = {
            let mut c = lock(&sh.cursor);
            (0..labels.len()).map(|_| c.next()).collect()
        };
        let filled: Result<(), String> = pool.install(|| {
            images
                .par_chunks_mut(per_image)
                .zip(labels.par_iter_mut())
                .zip(first.par_iter())
                .try_for_each(|((slot, label), &first)| fill_slot(sh, first, slot, label))
        });
        let sent = match filled {
            Ok(()) => ready.send(Ok(buf)),
            Err(e) => {
                let _ = ready.send(Err(e));
                return;
            }
        };
        if sent.is_err() {
            return;
        }
    }
}

/// One slot: its sample, else the cursor's next ones until one decodes.
fn fill_slot(
    sh: &Shared,
    first: (usize, u64),
    slot: &mut [f32],
    label: &mut u32,
) -> Result<(), String> {
    SCRATCH.with(|cell| {
        let mut guard = cell.borrow_mut();
        let (scratch, file) = &mut *guard;
        let mut next = Some(first);
        loop {
            if sh.stop.load(Ordering::Relaxed) {
                return Err("the loader was stopped".into());
            }
            let (idx, epoch) = next.take().unwrap_or_else(|| lock(&sh.cursor).next());
            let sample = &sh.folder.samples()[idx];
            let t0 = Instant::now();
            let read = read_file(&sample.path, file);
            let read_s = t0.elapsed().as_secs_f64();
            let seed = image_seed(sh.cfg.seed, epoch, idx);
            let result = read.and_then(|()| {
                load_image(file, &sh.cfg.transform, seed, scratch, slot).map_err(|e| e.0)
            });
            let busy = t0.elapsed().as_secs_f64();
            let mut st = lock(&sh.stats);
            st.busy += busy;
            st.read += read_s;
            match result {
                Ok(t) => {
                    st.images += 1;
                    st.bytes += file.len() as u64;
                    st.decode += t.decode;
                    st.augment += t.augment;
                    st.copy += t.copy;
                    sh.failing.store(0, Ordering::Relaxed);
                    *label = sample.class;
                    return Ok(());
                }
                Err(why) => {
                    st.skipped += 1;
                    if st.first_skipped.len() < FIRST_SKIPPED {
                        st.first_skipped.push((sample.path.clone(), why.clone()));
                    }
                    let n = sh.folder.len();
                    if sh.failing.fetch_add(1, Ordering::Relaxed) + 1 >= n {
                        return Err(format!(
                            "none of the {n} files in '{}' could be read as an image (for one, '{}': {why})",
                            sh.folder.root().display(),
                            sample.path.display()
                        ));
                    }
                }
            }
        }
    })
}

/// Reads a regular file whole into `buf`; a FIFO, a device or a huge file
/// is refused without reading it.
fn read_file(path: &std::path::Path, buf: &mut Vec<u8>) -> Result<(), String> {
    use std::io::Read;
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read it: {e}"))?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!("{} bytes: larger than any image read here", meta.len()));
    }
    let mut f = std::fs::File::open(path).map_err(|e| format!("cannot read it: {e}"))?;
    buf.clear();
    f.by_ref()
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(buf)
        .map_err(|e| format!("cannot read it: {e}"))?;
    Ok(())
}

/// Each image's own seed: the run's, its epoch and its index, mixed.
fn image_seed(seed: u64, epoch: u64, idx: usize) -> u64 {
    let mut r = Rng::new(seed ^ epoch.rotate_left(32) ^ (idx as u64).wrapping_mul(0x9E37_79B9));
    r.next_u64()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{synth, SynthOptions};
    use crate::transform::TransformKind;
    use std::time::Duration;

    fn tree(images: usize, classes: usize) -> (tempfile::TempDir, Arc<ImageFolder>) {
        let t = tempfile::tempdir().expect("tmp");
        let dir = t.path().join("tree");
        let opts = SynthOptions {
            images,
            classes,
            size: Some((48, 40)),
            quality: 90,
            seed: 3,
        };
        synth(&dir, &opts, &|_| {}).expect("a synthetic tree");
        let f = ImageFolder::scan(&dir).expect("a tree");
        (t, Arc::new(f))
    }

    fn cfg(batch: usize, shuffle: bool) -> LoaderConfig {
        LoaderConfig {
            batch,
            threads: 2,
            prefetch: 2,
            transform: Transform {
                kind: TransformKind::Eval,
                size: 16,
            },
            seed: 9,
            shuffle,
        }
    }

    #[test]
    fn an_epoch_in_order_delivers_every_image_once_with_its_label() {
        let (_t, f) = tree(12, 3);
        let l = Loader::start(f.clone(), cfg(4, false)).expect("a loader");
        let mut labels = Vec::new();
        for _ in 0..3 {
            let b = l.next().expect("a batch");
            assert_eq!(b.images().len(), 4 * 16 * 16 * 3);
            assert!(b.images().iter().all(|v| v.is_finite()));
            labels.extend_from_slice(b.labels());
        }
        let want: Vec<u32> = f.samples().iter().map(|s| s.class).collect();
        assert_eq!(labels, want);
        let s = l.stats();
        assert_eq!(s.images, 12);
        assert_eq!(s.skipped, 0);
        assert!(s.decode > 0.0 && s.busy >= s.decode && s.capacity_images_per_sec() > 0.0);
    }

    #[test]
    fn shuffled_epochs_reproduce_with_the_seed() {
        let (_t, f) = tree(8, 2);
        let run = |seed| {
            let mut c = cfg(4, true);
            c.seed = seed;
            c.transform.kind = TransformKind::Train;
            let l = Loader::start(f.clone(), c).expect("a loader");
            let mut out = Vec::new();
            for _ in 0..4 {
                let b = l.next().expect("a batch");
                out.push((b.images().to_vec(), b.labels().to_vec()));
            }
            out
        };
        assert!(run(1) == run(1), "the same seed, the same batches");
        assert!(run(1) != run(2), "another seed, other batches");
    }

    #[test]
    fn bad_files_are_skipped_counted_and_named() {
        let (t, _) = tree(6, 2);
        let class = t.path().join("tree").join("class_000");
        std::fs::write(class.join("broken.jpg"), b"not an image").expect("write");
        let f = Arc::new(ImageFolder::scan(&t.path().join("tree")).expect("a tree"));
        assert_eq!(f.len(), 7);
        let l = Loader::start(f, cfg(7, false)).expect("a loader");
        let b = l.next().expect("a full batch despite the broken file");
        assert_eq!(b.labels().len(), 7);
        drop(b);
        let s = l.stats();
        // The next batch, being filled already, may have met it again.
        assert!(s.skipped >= 1);
        assert!(s.first_skipped[0].0.ends_with("broken.jpg"));
        assert!(s.first_skipped[0].1.contains("not a JPEG"), "{:?}", s.first_skipped);
    }

    #[test]
    fn a_tree_of_broken_files_is_an_error_not_a_hang() {
        let t = tempfile::tempdir().expect("tmp");
        std::fs::create_dir(t.path().join("a")).expect("mkdir");
        for k in 0..3 {
            std::fs::write(t.path().join("a").join(format!("{k}.jpg")), b"\xff\xd8\xff").expect("w");
        }
        let f = Arc::new(ImageFolder::scan(t.path()).expect("a tree"));
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let l = Loader::start(f, cfg(2, false)).expect("a loader");
            let _ = tx.send(l.next().err());
        });
        let e = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("an answer, not a hang")
            .expect("an error");
        assert!(e.contains("none of the 3 files"), "{e}");
    }

    #[test]
    fn the_loader_holds_prefetch_batches_and_drops_fast_while_blocked() {
        let (_t, f) = tree(8, 2);
        let mut c = cfg(2, false);
        c.prefetch = 3;
        let l = Loader::start(f, c).expect("a loader");
        let first = l.next().expect("a batch");
        assert_eq!(first.labels().len(), 2);
        // The producer fills the other two buffers, then waits for one.
        std::thread::sleep(Duration::from_millis(200));
        let s = l.stats();
        assert!(s.images <= 3 * 2, "{} images loaded with 3 buffers of 2", s.images);
        drop(first);
        let t = Instant::now();
        drop(l);
        assert!(t.elapsed() < Duration::from_secs(5));
    }
}
