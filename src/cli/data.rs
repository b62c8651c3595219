//! `cnnbench data`: write a synthetic ImageFolder tree of realistic JPEGs
//! (`synth`), time the input loader alone (`bench`), and write one
//! transformed image as `.npy` for cross-checks against torchvision
//! (`dump`). The options are checked here; the work is
//! [`crate::driver::data`]'s, the output [`crate::output::data`]'s.

use super::output::StoreArgs;
use crate::driver::data::{self as work, ImageDump, LoaderBench, LoaderSink};
use crate::driver::model::input::{loader_threads, TransformArg, DEFAULT_PREFETCH};
use crate::output::{self, Format, RECORD_FORMATS};
use crate::results::store::{RunFile, FORMAT_VERSION};
use crate::results::Environment;
use anyhow::{anyhow, bail, Result};
use clap::{Args, Subcommand};
use cnnbench_data::folder::ImageFolder;
use cnnbench_data::synth::SynthOptions;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Args, Debug)]
pub struct DataArgs {
    #[command(subcommand)]
    command: DataCommand,
}

#[derive(Subcommand, Debug)]
enum DataCommand {
    /// Write an ImageFolder tree of synthetic JPEGs (natural-looking content, ImageNet-like
    /// sizes and quality), for tests and machines without ImageNet
    Synth(SynthArgs),
    /// Time the input loader alone over a tree: images/s, MB/s and each stage's share
    Bench(Box<BenchArgs>),
    /// Write one image of a tree, transformed, as .npy (HWC f32, normalized) for cross-checks
    Dump(DumpArgs),
}

#[derive(Args, Debug)]
#[command(after_help = "Examples:
    cnnbench data synth /tmp/synth --images 2000 --classes 10
    cnnbench data synth /tmp/tiny --images 40 --classes 4 --width 96 --height 72")]
struct SynthArgs {
    /// The folder to create (it must not exist, or be empty)
    dir: PathBuf,
    /// Images in all
    #[arg(long, default_value_t = 1000)]
    images: usize,
    /// Class folders, the images spread evenly over them
    #[arg(long, default_value_t = 10)]
    classes: usize,
    /// Every image this wide [default: about 500, varying like ImageNet's photos]
    #[arg(long, value_name = "PX", requires = "height")]
    width: Option<usize>,
    /// Every image this high [default: about 375, varying]
    #[arg(long, value_name = "PX", requires = "width")]
    height: Option<usize>,
    /// JPEG quality, 1-100
    #[arg(long, default_value_t = 90)]
    quality: u8,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long, short)]
    quiet: bool,
}

#[derive(Args, Debug)]
#[command(after_help = "Examples:
    cnnbench data bench /data/imagenet/train --loader-threads 1,2,4,8
    cnnbench data bench /tmp/synth --transform eval --format json --out loader.json")]
struct BenchArgs {
    /// An ImageFolder tree: one folder per class of JPEG/PNG files
    dir: PathBuf,
    /// Loader threads to time, comma-separated [default: all logical CPUs]
    #[arg(long, value_name = "LIST")]
    loader_threads: Option<String>,
    /// Images per batch
    #[arg(long, default_value_t = 64)]
    batch: usize,
    /// torchvision's recipe
    #[arg(long, value_enum, default_value_t = TransformArg::Train)]
    transform: TransformArg,
    /// The output images' side (224; 227 AlexNet; 299 Inception-V3)
    #[arg(long, default_value_t = 224)]
    size: usize,
    /// Images timed per thread count, after the warm-up batches [default: 1000, at most the tree]
    #[arg(long, value_name = "N")]
    images: Option<usize>,
    /// Batches loaded and dropped before timing (each thread count)
    #[arg(long, default_value_t = 2)]
    warmup: usize,
    /// Batches the loader may hold, the consumer's included
    #[arg(long, default_value_t = DEFAULT_PREFETCH)]
    prefetch: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long, default_value = "table", value_parser = output::parser(RECORD_FORMATS))]
    format: Format,
    #[command(flatten)]
    store: StoreArgs,
    #[arg(long, short)]
    quiet: bool,
}

#[derive(Args, Debug)]
#[command(after_help = "Examples:
    cnnbench data dump /tmp/synth --index 0 --transform eval --out x.npy
    python scripts/peers/check_transform.py \"$(cnnbench data dump /tmp/synth --index 0 --out x.npy)\" x.npy")]
struct DumpArgs {
    /// An ImageFolder tree
    dir: PathBuf,
    /// The image's index in the tree, as torchvision's ImageFolder numbers them (classes
    /// sorted, files sorted within each)
    #[arg(long, default_value_t = 0)]
    index: usize,
    #[arg(long, value_enum, default_value_t = TransformArg::Eval)]
    transform: TransformArg,
    /// The output image's side
    #[arg(long, default_value_t = 224)]
    size: usize,
    /// With --transform train: the seed of the crop and flip
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The .npy to write: [size, size, 3] f32, normalized with ImageNet's mean and std
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
}

pub fn run(args: DataArgs) -> Result<ExitCode> {
    match args.command {
        DataCommand::Synth(a) => run_synth(a),
        DataCommand::Bench(a) => run_bench(*a),
        DataCommand::Dump(a) => run_dump(a),
    }
}

/// Every count of `data`'s subcommands, as each subcommand checks them
/// before anything is read or written (the property tests drive this with
/// any number).
#[cfg(test)]
pub(super) fn check_counts(args: &DataArgs) -> Result<()> {
    match &args.command {
        DataCommand::Synth(a) => synth_options(a).map(drop),
        DataCommand::Bench(a) => check_bench_counts(a).map(drop),
        DataCommand::Dump(a) => check_size(a.size),
    }
}

fn run_synth(a: SynthArgs) -> Result<ExitCode> {
    let opts = synth_options(&a)?;
    crate::signals::install()?;
    let bar = super::progress::bar(a.images as u64, a.quiet);
    work::synth(&a.dir, &opts, &bar)
}

/// `data synth`'s options, each within its cap.
fn synth_options(a: &SynthArgs) -> Result<SynthOptions> {
    if a.images == 0 || a.images > MAX_IMAGES {
        bail!("--images {}: expected 1 to {MAX_IMAGES}", a.images);
    }
    if a.classes == 0 || a.classes > a.images {
        bail!(
            "--classes {}: expected 1 to the number of images ({})",
            a.classes,
            a.images
        );
    }
    if !(1..=100).contains(&a.quality) {
        bail!("--quality {}: expected 1 to 100", a.quality);
    }
    let size = match (a.width, a.height) {
        (Some(w), Some(h)) => {
            if !(8..=8192).contains(&w) || !(8..=8192).contains(&h) {
                bail!("--width {w} --height {h}: expected 8 to 8192 pixels each");
            }
            Some((w, h))
        }
        _ => None,
    };
    Ok(SynthOptions {
        images: a.images,
        classes: a.classes,
        size,
        quality: a.quality,
        seed: a.seed,
    })
}

/// The most images `data synth` writes and `data bench` times per thread
/// count: ten million, eight ImageNets.
pub(super) const MAX_IMAGES: usize = 10_000_000;
/// The most warm-up batches `data bench` loads per thread count, as
/// `--warmup` elsewhere.
pub(super) const MAX_WARMUP_BATCHES: usize = crate::bench::RunPolicy::MAX_RUNS;
/// The most thread counts one `data bench` times.
pub(super) const MAX_THREAD_COUNTS: usize = 64;

fn parse_thread_list(s: Option<&str>) -> Result<Vec<usize>> {
    let Some(s) = s else {
        return Ok(vec![loader_threads(None)?]);
    };
    let n = s.split(',').count();
    if n > MAX_THREAD_COUNTS {
        bail!("--loader-threads: {n} thread counts; at most {MAX_THREAD_COUNTS} in one run");
    }
    s.split(',')
        .map(|t| {
            let n = t
                .trim()
                .parse::<usize>()
                .map_err(|_| anyhow!("--loader-threads: '{t}' is not a number of threads"))?;
            loader_threads(Some(n))
        })
        .collect()
}

fn check_size(size: usize) -> Result<()> {
    if !(8..=4096).contains(&size) {
        bail!("--size {size}: expected 8 to 4096 pixels");
    }
    Ok(())
}

/// `data bench`'s counts, checked before the tree is read: each within
/// its documented cap.
fn check_bench_counts(a: &BenchArgs) -> Result<Vec<usize>> {
    let threads = parse_thread_list(a.loader_threads.as_deref())?;
    check_size(a.size)?;
    if a.batch == 0 || a.batch > 4096 {
        bail!("--batch {}: expected 1 to 4096", a.batch);
    }
    if a.prefetch == 0 || a.prefetch > 64 {
        bail!("--prefetch {}: expected 1 to 64 batches", a.prefetch);
    }
    if let Some(n) = a.images.filter(|&n| n == 0 || n > MAX_IMAGES) {
        bail!("--images {n}: expected 1 to {MAX_IMAGES}");
    }
    if a.warmup > MAX_WARMUP_BATCHES {
        bail!(
            "--warmup {}: expected 0 to {MAX_WARMUP_BATCHES} batches",
            a.warmup
        );
    }
    Ok(threads)
}

fn run_bench(a: BenchArgs) -> Result<ExitCode> {
    let threads = check_bench_counts(&a)?;
    let folder = Arc::new(ImageFolder::scan(&a.dir).map_err(|e| anyhow!("{e}"))?);
    crate::driver::model::input::note_unreadable(&folder);
    let want = a.images.unwrap_or_else(|| folder.len().min(1000));
    let batches = want.div_ceil(a.batch);
    let env = Environment::here(
        rayon::current_num_threads(),
        cnnbench_kernels::Isa::detect().name().into(),
        None,
        "wall clock",
    );
    crate::signals::install()?;
    let bar = super::progress::bar((batches * threads.len()) as u64, a.quiet);
    let file = RunFile {
        format_version: FORMAT_VERSION,
        subcommand: "data".into(),
        environment: env,
        records: Vec::new(),
        skipped: Vec::new(),
        complete: false,
    };
    let sink = LoaderSink {
        format: a.format,
        out: a.store.out.as_deref(),
        store: a.store.create("data", &file.environment)?,
    };
    let plan = LoaderBench {
        dir: a.dir,
        folder,
        threads,
        batch: a.batch,
        batches,
        transform: a.transform,
        size: a.size,
        warmup: a.warmup,
        prefetch: a.prefetch,
        seed: a.seed,
    };
    work::bench(&plan, file, &sink, &bar)
}

fn run_dump(a: DumpArgs) -> Result<ExitCode> {
    check_size(a.size)?;
    work::dump(&ImageDump {
        dir: a.dir,
        index: a.index,
        transform: a.transform,
        size: a.size,
        seed: a.seed,
        out: a.out,
    })
}
