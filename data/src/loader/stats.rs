//! What a loader has done: images, bytes, each stage's seconds, and the
//! files it skipped.

use std::path::{Path, PathBuf};

/// Skipped files named in the stats, with their reasons.
pub const FIRST_SKIPPED: usize = 5;

/// What the loader has done since it started. Seconds of work are summed
/// over its threads; `wall` and `blocked` are clock time.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoaderStats {
    /// Images decoded into batches (those of batches still queued
    /// included).
    pub images: usize,
    /// Batches handed to the caller.
    pub batches: usize,
    /// File bytes read for the images delivered.
    pub bytes: u64,
    /// Reading files.
    pub read: f64,
    pub decode: f64,
    /// Crop, resize, flip.
    pub augment: f64,
    /// Normalizing into the batch.
    pub copy: f64,
    /// The threads' time on images, skipped ones included.
    pub busy: f64,
    /// Since the loader started.
    pub wall: f64,
    /// The producer's time waiting for a free buffer: the caller was
    /// slower than the loader.
    pub blocked: f64,
    /// Files that could not be read as images, each time one was met.
    pub skipped: usize,
    /// The first few of them (each once) and why.
    pub first_skipped: Vec<(PathBuf, String)>,
    /// The loader's threads.
    pub threads: usize,
}

impl LoaderStats {
    /// What the loader can deliver, in images per second: its threads'
    /// rate while busy, times its threads. Above what the caller takes,
    /// the loader keeps up.
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
            images: self.images.saturating_sub(before.images),
            batches: self.batches.saturating_sub(before.batches),
            bytes: self.bytes.saturating_sub(before.bytes),
            read: self.read - before.read,
            decode: self.decode - before.decode,
            augment: self.augment - before.augment,
            copy: self.copy - before.copy,
            busy: self.busy - before.busy,
            wall: self.wall - before.wall,
            blocked: self.blocked - before.blocked,
            skipped: self.skipped.saturating_sub(before.skipped),
            first_skipped: self.first_skipped.clone(),
            threads: self.threads,
        }
    }

    /// Counts a file that failed, naming it if it is among the first.
    pub(super) fn skip(&mut self, path: &Path, why: String) {
        self.skipped += 1;
        if self.first_skipped.len() < FIRST_SKIPPED
            && !self.first_skipped.iter().any(|(p, _)| p == path)
        {
            self.first_skipped.push((path.to_path_buf(), why));
        }
    }
}
