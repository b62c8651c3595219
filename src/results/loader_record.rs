//! The input loader timed alone: the record of `cnnbench data bench`, its
//! JSON contract (its CSV and table are `output::data`'s).

use crate::bench::Stats;
use serde::{Deserialize, Serialize};

/// One thread count of `data bench`: the loader alone over a tree.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoaderRecord {
    pub path: String,
    pub images_in_tree: usize,
    pub transform: String,
    pub size: usize,
    pub decoder: String,
    pub loader_threads: usize,
    pub batch: usize,
    pub prefetch: usize,
    /// Images timed (whole batches), after the warm-up batches.
    pub images: usize,
    pub seconds: f64,
    pub images_per_sec: f64,
    /// File bytes read per second.
    pub mb_per_sec: f64,
    /// Each batch's wait, from asking for it to having it.
    pub batch_ms: Stats,
    /// Milliseconds of one thread per image, by stage.
    pub read_ms: f64,
    pub decode_ms: f64,
    pub augment_ms: f64,
    pub copy_ms: f64,
    pub skipped: usize,
}
