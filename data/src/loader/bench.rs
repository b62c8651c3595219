//! The loader alone, as fast as it goes: what `cnnbench data bench`
//! times.

use super::{Loader, LoaderConfig, LoaderError, LoaderStats};
use crate::folder::ImageFolder;
use cnnbench_kernels::clock::Stopwatch;
use std::sync::Arc;

/// Pulls batches, dropping each at once, until `images` images (whole
/// batches, at least one) are delivered after a warm-up batch that is not
/// counted. `progress` hears the images delivered so far.
///
/// The stats are the timed window's: `images` and `batches` delivered in
/// it, `wall` its length, bytes and stage seconds the work done in it
/// (which, the consumer waiting on the loader throughout, is the work of
/// the images delivered).
pub fn bench(
    folder: Arc<ImageFolder>,
    cfg: LoaderConfig,
    images: usize,
    progress: &dyn Fn(usize),
) -> Result<LoaderStats, LoaderError> {
    let loader = Loader::start(folder, cfg)?;
    // The warm-up: threads started, files and code in cache.
    drop(loader.next()?);
    let before = loader.stats();
    let t0 = Stopwatch::start();
    let (mut delivered, mut batches) = (0, 0);
    while delivered < images.max(1) {
        let b = loader.next()?;
        delivered += b.labels().len();
        batches += 1;
        drop(b);
        progress(delivered);
    }
    let wall = t0.elapsed_s();
    let mut s = loader.stats().since(&before);
    s.images = delivered;
    s.batches = batches;
    s.wall = wall;
    Ok(s)
}
