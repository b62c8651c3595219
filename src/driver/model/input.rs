//! `model --data DIR`: the images of every step read from an ImageFolder
//! tree by the loader's own threads, and what the record says about them.

use super::timed::Timed;
use crate::bench::timer::{Timer, WallClock};
use crate::bench::Stats;
use crate::note::note;
use crate::results::{FolderInput, Input, InputSource};
use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use cnnbench_data::folder::ImageFolder;
use cnnbench_data::loader::{Loader, LoaderConfig};
use cnnbench_data::transform::{self, Transform, TransformKind};
use cnnbench_layers::core::backend::Backend;
use cnnbench_layers::net::{Executor, Graph};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Batches the loader holds by default: one filled while the other is
/// copied into the network's stage.
pub const DEFAULT_PREFETCH: usize = 2;

/// Above this share of the median step spent waiting for the loader, the
/// run is `input_bound`.
const INPUT_BOUND_SHARE: f64 = 0.05;

/// torchvision's two ImageNet recipes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TransformArg {
    /// RandomResizedCrop + horizontal flip + normalize
    Train,
    /// Resize the shorter side to 256 (scaled for other sizes) + center crop + normalize
    Eval,
}

impl TransformArg {
    pub fn kind(self) -> TransformKind {
        match self {
            TransformArg::Train => TransformKind::Train,
            TransformArg::Eval => TransformKind::Eval,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            TransformArg::Train => "train",
            TransformArg::Eval => "eval",
        }
    }
}

/// The input options as the command line gave them.
pub struct DataOptions<'a> {
    /// `--data`: a folder, `synthetic`, or `None` (synthetic).
    pub data: Option<&'a Path>,
    pub transform: Option<TransformArg>,
    pub loader_threads: Option<usize>,
    pub prefetch: Option<usize>,
    /// `--gpus` or `--launcher` was given.
    pub data_parallel: bool,
    pub seed: u64,
}

/// What `--data` and its options ask for, checked before anything runs.
#[derive(Clone)]
pub struct DataPlan {
    path: PathBuf,
    folder: Arc<ImageFolder>,
    transform: TransformArg,
    threads: usize,
    prefetch: usize,
    seed: u64,
}

impl DataPlan {
    /// `None` for synthetic input; a one-line error for options that need
    /// a folder without one, or a tree that is no ImageFolder.
    pub fn new(args: &DataOptions<'_>) -> Result<Option<DataPlan>> {
        let dir = match args.data {
            None => None,
            Some(d) if d.as_os_str() == "synthetic" => None,
            Some(d) => Some(d),
        };
        let dir = match dir {
            None => {
                for (given, flag) in [
                    (args.loader_threads.is_some(), "--loader-threads"),
                    (args.prefetch.is_some(), "--prefetch"),
                    (args.transform.is_some(), "--transform"),
                ] {
                    if given {
                        bail!("{flag} goes with --data DIR (the input is synthetic)");
                    }
                }
                return Ok(None);
            }
            Some(dir) => dir,
        };
        if args.data_parallel {
            bail!("--data DIR runs on one device: a data-parallel run's input is synthetic");
        }
        let threads = loader_threads(args.loader_threads)?;
        let prefetch = args.prefetch.unwrap_or(DEFAULT_PREFETCH);
        if prefetch == 0 || prefetch > 64 {
            bail!("--prefetch {prefetch}: expected 1 to 64 batches");
        }
        let path = dir.to_path_buf();
        let folder = ImageFolder::scan(&path).map_err(|e| anyhow::anyhow!("--data: {e}"))?;
        note_unreadable(&folder);
        Ok(Some(DataPlan {
            path,
            folder: Arc::new(folder),
            transform: args.transform.unwrap_or(TransformArg::Train),
            threads,
            prefetch,
            seed: args.seed,
        }))
    }

    /// Starts the loader for `g` at `batch` images per step: images of the
    /// model's input side.
    pub fn start(&self, g: &Graph, batch: usize) -> Result<Feed> {
        let size = input_side(g)?;
        let cfg = LoaderConfig {
            batch,
            threads: self.threads,
            prefetch: self.prefetch,
            transform: Transform {
                kind: self.transform.kind(),
                size,
            },
            seed: self.seed,
            shuffle: self.transform == TransformArg::Train,
        };
        let loader =
            Loader::start(self.folder.clone(), cfg).map_err(|e| anyhow::anyhow!("--data: {e}"))?;
        Ok(Feed {
            loader,
            plan: self.clone(),
            staged: false,
        })
    }
}

/// Names on stderr, in one line, the folders of a tree that could not be
/// listed (a class folder the user may not read): their images are
/// skipped, and each such folder counts as one skipped entry in the
/// records.
pub fn note_unreadable(folder: &ImageFolder) {
    let u = folder.unreadable();
    if !u.is_empty() {
        note!(
            "cnnbench: warning: {} folder(s) of '{}' could not be read, their images skipped: {}",
            u.len(),
            folder.root().display(),
            u.join("; ")
        );
    }
}

/// The loader threads asked for, or all logical CPUs.
pub fn loader_threads(asked: Option<usize>) -> Result<usize> {
    let n = asked.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if n == 0 || n > 1024 {
        bail!("--loader-threads {n}: expected 1 to 1024");
    }
    Ok(n)
}

/// The side of a model's square input image (224; 227 AlexNet; 299
/// Inception-V3).
pub fn input_side(g: &Graph) -> Result<usize> {
    let d = &g.nodes[0].out;
    if g.input_vocab().is_some() {
        bail!(
            "{}: --data feeds square RGB images; this model reads {} token ids",
            g.name,
            d.w
        );
    }
    if d.h != d.w || d.c != 3 {
        bail!(
            "{}: --data feeds square RGB images; its input is {d}",
            g.name
        );
    }
    Ok(d.h)
}

/// A running loader feeding one network.
pub struct Feed {
    loader: Loader,
    plan: DataPlan,
    /// Whether the network holds a staged batch for the next step.
    staged: bool,
}

impl Feed {
    /// Makes the batch staged during the last step the network's input
    /// (the first step loads its own), then waits for the loader's next
    /// batch and stages it, so that on a GPU its copy overlaps this step;
    /// the milliseconds all this took on the host clock.
    pub fn next_into<B: Backend>(&mut self, net: &mut Executor<B>) -> Result<f64> {
        WallClock.time_ms(&mut || {
            if !self.staged {
                self.stage_next(net)?;
            }
            net.take_batch()
                .map_err(|e| anyhow::anyhow!("{e}"))
                .context("setting the batch")?;
            self.staged = false;
            self.stage_next(net)
        })
    }

    fn stage_next<B: Backend>(&mut self, net: &mut Executor<B>) -> Result<()> {
        let batch = self
            .loader
            .next()
            .map_err(|e| anyhow::anyhow!("--data: {e}"))?;
        net.stage_batch(batch.images(), batch.labels())
            .map_err(|e| anyhow::anyhow!("{e}"))
            .context("staging the batch")?;
        self.staged = true;
        Ok(())
    }

    /// The record's account of the input: the tree, the loader and each
    /// step's wait for it.
    pub fn record(&self, timed: &Timed) -> Input {
        let stats = self.loader.stats();
        let wait_ms = Stats::of(timed.input()).unwrap_or(Stats {
            min: 0.0,
            median: 0.0,
            max: 0.0,
            mean: 0.0,
            stddev: 0.0,
        });
        let step = timed.median_step();
        Input {
            source: InputSource::Folder,
            folder: Some(FolderInput {
                path: self.plan.path.to_string_lossy().into_owned(),
                images: self.plan.folder.len(),
                classes: self.plan.folder.classes().len(),
                skipped: stats.skipped + self.plan.folder.unreadable().len(),
                transform: self.plan.transform.name().into(),
                decoder: transform::decoder_name().into(),
                loader_threads: self.plan.threads,
                prefetch: self.plan.prefetch,
                loader_images_per_sec: stats.capacity_images_per_sec(),
                wait_ms,
                input_bound: step > 0.0 && wait_ms.median > INPUT_BOUND_SHARE * step,
            }),
        }
    }

    /// Says on stderr how many files would not decode, naming the first
    /// few, in one line.
    pub fn note_skipped(&self, model: &str) {
        let stats = self.loader.stats();
        if stats.skipped == 0 {
            return;
        }
        let first: Vec<String> = stats
            .first_skipped
            .iter()
            .map(|(path, why)| format!("{}: {why}", path.display()))
            .collect();
        note!(
            "cnnbench: {model}: {} file(s) skipped (first: {})",
            stats.skipped,
            first.join("; ")
        );
    }
}
