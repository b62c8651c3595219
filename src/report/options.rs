//! What a report is asked for: the baseline, where charts go, a price for
//! unpriced runs, the training run that costs are quoted for, and whether
//! to show published numbers.

use std::path::PathBuf;

/// Where charts go: the folder, and how the report refers to it.
pub struct ChartsDir {
    pub dir: PathBuf,
    pub link_prefix: String,
}

pub struct Options {
    /// Label, `key=value` on a run's facts, or part of a label.
    pub baseline: Option<String>,
    pub charts: Option<ChartsDir>,
    /// A price for runs that have none.
    pub price: Option<crate::results::price::Price>,
    pub epochs: u32,
    pub dataset_images: u64,
    /// Print the published tables beside measured rows (`--published`).
    pub published: bool,
}
