//! The input loader: files read, decoded and transformed on a thread pool
//! of its own, into a fixed set of batch buffers that circulate between
//! the loader and its consumer.
//!
//! `prefetch` buffers are allocated once. A producer thread (a plain
//! thread, so the loader never runs inside the caller's compute pool)
//! takes a free one, has its pool fill every image slot in parallel, and
//! queues it; [`Loader::next`] hands the oldest queued batch to the
//! caller, and the [`Batch`] goes back to the free list when dropped. So
//! the loader never holds more than `prefetch` batches, the caller's
//! included, and fills the next batch while the caller uses the last.
//!
//! A file that cannot be read or decoded is skipped and counted (the first
//! few kept with their reasons), and its slot takes the next sample, so
//! every batch is full. Where every file of a whole epoch fails, the
//! caller gets an error instead of waiting forever.

mod order;
mod slot;
mod stats;
#[cfg(test)]
mod tests;

pub use slot::MAX_FILE_BYTES;
pub use stats::{LoaderStats, FIRST_SKIPPED};

use crate::folder::ImageFolder;
use crate::transform::Transform;
use cnnbench_kernels::clock::Stopwatch;
use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use order::{image_seed, Draw, EpochOrder};
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

/// Why the loader cannot go on, in one line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoaderError(pub String);

impl std::fmt::Display for LoaderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LoaderError {}

/// One batch's images (NHWC f32), labels, and which samples they are.
struct BatchBuf {
    images: Vec<f32>,
    labels: Vec<u32>,
    samples: Vec<usize>,
}

/// State the producer and its pool share with the caller.
struct Shared {
    folder: Arc<ImageFolder>,
    cfg: LoaderConfig,
    stats: Mutex<LoaderStats>,
    stop: AtomicBool,
    started: Stopwatch,
}

type Ready = Result<Box<BatchBuf>, LoaderError>;

pub struct Loader {
    shared: Arc<Shared>,
    ready: Option<Receiver<Ready>>,
    free: Option<Sender<Box<BatchBuf>>>,
    producer: Option<JoinHandle<()>>,
    /// Batches the caller holds now.
    held: AtomicUsize,
    /// The producer's error, once seen: every later call returns it.
    failed: Mutex<Option<LoaderError>>,
}

/// A batch lent to the caller; back to the loader when dropped.
pub struct Batch<'a> {
    buf: Option<Box<BatchBuf>>,
    loader: &'a Loader,
}

impl Batch<'_> {
    /// `batch·size²·3` values: NHWC, normalized.
    pub fn images(&self) -> &[f32] {
        self.buf.as_ref().map_or(&[], |b| &b.images)
    }

    /// Each image's class index.
    pub fn labels(&self) -> &[u32] {
        self.buf.as_ref().map_or(&[], |b| &b.labels)
    }

    /// Each image's index among the tree's samples.
    pub fn samples(&self) -> &[usize] {
        self.buf.as_ref().map_or(&[], |b| &b.samples)
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        if let (Some(b), Some(free)) = (self.buf.take(), &self.loader.free) {
            // Only fails once the producer is gone; the buffer goes with it.
            let _ = free.send(b);
        }
        self.loader.held.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Loader {
    /// Allocates the batch buffers, starts the loader's threads, and has
    /// them start filling batches.
    pub fn start(folder: Arc<ImageFolder>, cfg: LoaderConfig) -> Result<Loader, LoaderError> {
        let size = cfg.transform.size;
        if cfg.batch == 0 || cfg.threads == 0 || cfg.prefetch == 0 || size == 0 {
            return Err(LoaderError(format!(
                "a loader needs a batch, threads, prefetch and an image size of at least 1 \
                 (got {}, {}, {}, {size})",
                cfg.batch, cfg.threads, cfg.prefetch
            )));
        }
        let order = EpochOrder::new(folder.len(), cfg.shuffle, cfg.seed).ok_or_else(|| {
            LoaderError(format!(
                "'{}' holds {} images: expected 1 to {}",
                folder.root().display(),
                folder.len(),
                u32::MAX
            ))
        })?;
        let values = size
            .checked_mul(size)
            .and_then(|v| v.checked_mul(3 * cfg.batch))
            .ok_or_else(|| {
                LoaderError(format!(
                    "a batch of {} {size}x{size} images is too large",
                    cfg.batch
                ))
            })?;
        let (free_tx, free_rx) = unbounded();
        for _ in 0..cfg.prefetch {
            free_tx
                .send(Box::new(BatchBuf::new(values, cfg.batch)?))
                .map_err(|_| LoaderError("the loader's free list is closed".into()))?;
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(cfg.threads)
            .thread_name(|i| format!("cnnbench-loader-{i}"))
            .build()
            .map_err(|e| {
                LoaderError(format!("cannot start {} loader threads: {e}", cfg.threads))
            })?;
        // Room for every buffer and an error: the producer never waits to
        // queue.
        let (ready_tx, ready_rx) = bounded(cfg.prefetch + 1);
        let shared = Arc::new(Shared {
            folder,
            cfg,
            stats: Mutex::new(LoaderStats {
                threads: cfg.threads,
                ..LoaderStats::default()
            }),
            stop: AtomicBool::new(false),
            started: Stopwatch::start(),
        });
        let sh = shared.clone();
        let producer = std::thread::Builder::new()
            .name("cnnbench-loader".into())
            .spawn(move || {
                let run = std::panic::AssertUnwindSafe(|| {
                    produce(&sh, &pool, order, &free_rx, &ready_tx)
                });
                if let Err(panic) = std::panic::catch_unwind(run) {
                    let why = slot::panic_message(&*panic);
                    let _ = ready_tx.send(Err(LoaderError(format!("the loader failed: {why}"))));
                }
            })
            .map_err(|e| LoaderError(format!("cannot start the loader: {e}")))?;
        Ok(Loader {
            shared,
            ready: Some(ready_rx),
            free: Some(free_tx),
            producer: Some(producer),
            held: AtomicUsize::new(0),
            failed: Mutex::new(None),
        })
    }

    /// The next batch, waiting for it if none is ready. An error (one line)
    /// once the loader has failed, or while the caller holds every buffer
    /// (waiting then would wait forever).
    pub fn next(&self) -> Result<Batch<'_>, LoaderError> {
        if let Some(e) = lock(&self.failed).as_ref() {
            return Err(e.clone());
        }
        let prefetch = self.shared.cfg.prefetch;
        if self.held.fetch_add(1, Ordering::Relaxed) >= prefetch {
            self.held.fetch_sub(1, Ordering::Relaxed);
            return Err(LoaderError(format!(
                "all {prefetch} batch buffers are held by the caller: drop a batch before asking for the next"
            )));
        }
        // From here on a `Batch` (or this guard's drop) gives `held` back.
        let mut batch = Batch {
            buf: None,
            loader: self,
        };
        let Some(ready) = &self.ready else {
            return Err(LoaderError("the loader has stopped".into()));
        };
        match ready.recv() {
            Ok(Ok(buf)) => {
                lock(&self.shared.stats).batches += 1;
                batch.buf = Some(buf);
                Ok(batch)
            }
            Ok(Err(e)) => {
                *lock(&self.failed) = Some(e.clone());
                Err(e)
            }
            // The producer has ended: with an error another caller took
            // first, or (a bug) without one.
            Err(_) => Err(lock(&self.failed)
                .clone()
                .unwrap_or_else(|| LoaderError("the loader's thread ended unexpectedly".into()))),
        }
    }

    pub fn stats(&self) -> LoaderStats {
        let mut s = lock(&self.shared.stats).clone();
        s.wall = self.shared.started.elapsed_s();
        s
    }

    pub fn config(&self) -> &LoaderConfig {
        &self.shared.cfg
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        // Without the free list's sender or the queue's receiver, the
        // producer's next wait ends at once; a batch being filled stops at
        // its next image.
        self.free.take();
        self.ready.take();
        if let Some(p) = self.producer.take() {
            let _ = p.join();
        }
    }
}

impl BatchBuf {
    fn new(values: usize, batch: usize) -> Result<BatchBuf, LoaderError> {
        let mut images = Vec::new();
        images.try_reserve_exact(values).map_err(|_| {
            LoaderError(format!(
                "cannot allocate a batch buffer of {} MB",
                values / (1 << 18)
            ))
        })?;
        images.resize(values, 0.0);
        Ok(BatchBuf {
            images,
            labels: vec![0; batch],
            samples: vec![0; batch],
        })
    }
}

/// A lock whose data stays usable after a panic elsewhere: the loader's
/// counters are plain sums, never left half-updated.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The producer: fills free buffers until the loader is dropped or fails.
fn produce(
    sh: &Shared,
    pool: &rayon::ThreadPool,
    mut order: EpochOrder,
    free: &Receiver<Box<BatchBuf>>,
    ready: &Sender<Ready>,
) {
    let mut failures = FailureStreak::default();
    loop {
        let waiting = Stopwatch::start();
        let Ok(mut buf) = free.recv() else { return };
        lock(&sh.stats).blocked += waiting.elapsed_s();
        if sh.stop.load(Ordering::Relaxed) {
            return;
        }
        let filled = fill(sh, pool, &mut order, &mut failures, &mut buf);
        let last = filled.is_err();
        if ready.send(filled.map(|()| buf)).is_err() || last {
            return;
        }
    }
}

/// Failed loads in a row, in the order samples were drawn.
#[derive(Default)]
struct FailureStreak {
    run: usize,
    last: Option<(usize, String)>,
}

/// Fills every slot of `buf`: each slot's sample drawn in slot order, the
/// slots loaded in parallel, then each failed slot given the next sample
/// (again in slot order) until all hold an image. Draws never depend on
/// the threads' timing, so neither does a batch.
fn fill(
    sh: &Shared,
    pool: &rayon::ThreadPool,
    order: &mut EpochOrder,
    failures: &mut FailureStreak,
    buf: &mut BatchBuf,
) -> Result<(), LoaderError> {
    let cfg = &sh.cfg;
    let per_image = cfg.transform.size * cfg.transform.size * 3;
    let mut draws: Vec<Option<Draw>> = buf.labels.iter().map(|_| Some(order.next())).collect();
    loop {
        let results: Vec<Option<Result<(), String>>> = pool.install(|| {
            buf.images
                .par_chunks_mut(per_image)
                .zip(draws.par_iter())
                .map(|(slot, draw)| {
                    let d = (*draw)?;
                    if sh.stop.load(Ordering::Relaxed) {
                        return Some(Err("stopped".into()));
                    }
                    let path = &sh.folder.samples()[d.sample].path;
                    let seed = image_seed(cfg.seed, d.epoch, d.sample);
                    Some(slot::load(path, &cfg.transform, seed, slot, &sh.stats))
                })
                .collect()
        });
        if sh.stop.load(Ordering::Relaxed) {
            return Err(LoaderError("the loader was stopped".into()));
        }
        for (k, result) in results.into_iter().enumerate() {
            let (Some(result), Some(d)) = (result, draws[k]) else {
                continue;
            };
            match result {
                Ok(()) => {
                    failures.run = 0;
                    buf.labels[k] = sh.folder.samples()[d.sample].class;
                    buf.samples[k] = d.sample;
                    draws[k] = None;
                }
                Err(why) => {
                    failures.run += 1;
                    failures.last = Some((d.sample, why));
                    // The epoch's last draw ends a streak as long as the
                    // tree: every sample of this epoch failed.
                    if d.last_of_epoch && failures.run >= sh.folder.len() {
                        return Err(all_failed(sh, failures));
                    }
                }
            }
        }
        if draws.iter().all(Option::is_none) {
            return Ok(());
        }
        for d in draws.iter_mut().flatten() {
            *d = order.next();
        }
    }
}

fn all_failed(sh: &Shared, failures: &FailureStreak) -> LoaderError {
    let n = sh.folder.len();
    let root = sh.folder.root().display();
    LoaderError(match &failures.last {
        Some((k, why)) => format!(
            "none of the {n} files in '{root}' could be read as an image (the last, '{}': {why})",
            sh.folder.samples()[*k].path.display()
        ),
        None => format!("none of the {n} files in '{root}' could be read as an image"),
    })
}
