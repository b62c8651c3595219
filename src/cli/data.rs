//! `cnnbench data`: write a synthetic ImageFolder tree of realistic JPEGs
//! (`synth`), time the input loader alone (`bench`), and write one
//! transformed image as `.npy` for cross-checks against torchvision
//! (`dump`).

use crate::driver::model::input::{loader_threads, TransformArg, DEFAULT_PREFETCH};
use super::output::StoreArgs;
use crate::bench::Stats;
use crate::output::table::{aligned, Align};
use crate::output::{self, Format, RECORD_FORMATS};
use crate::results::store::{RunFile, FORMAT_VERSION};
use crate::results::Environment;
use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use cnnbench_data::folder::ImageFolder;
use cnnbench_data::loader::{Loader, LoaderConfig};
use cnnbench_data::synth::{self, SynthOptions};
use cnnbench_data::transform::{self, Scratch, Transform};
use npyz::WriterBuilder;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

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

fn run_synth(a: SynthArgs) -> Result<ExitCode> {
    if a.images == 0 || a.images > 10_000_000 {
        bail!("--images {}: expected 1 to 10000000", a.images);
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
    let opts = SynthOptions {
        images: a.images,
        classes: a.classes,
        size,
        quality: a.quality,
        seed: a.seed,
    };
    crate::signals::install()?;
    let bar = super::progress::bar(a.images as u64, a.quiet);
    bar.set_message("writing JPEGs");
    let t0 = Instant::now();
    let summary = synth::synth(&a.dir, &opts, &|done| bar.set_position(done as u64))
        .map_err(|e| anyhow!("{e}"))?;
    bar.finish_and_clear();
    crate::output::print(&format!(
        "wrote {} JPEGs in {} classes to {} in {:.1} s: mean {:.1} KB, mean {:.0}x{:.0}, quality {}\n",
        summary.files,
        a.classes,
        a.dir.display(),
        t0.elapsed().as_secs_f64(),
        summary.mean_bytes / 1e3,
        summary.mean_width,
        summary.mean_height,
        a.quality,
    ))?;
    Ok(ExitCode::SUCCESS)
}

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

const BENCH_CSV_HEADER: [&str; 18] = [
    "path",
    "images_in_tree",
    "transform",
    "size",
    "decoder",
    "loader_threads",
    "batch",
    "prefetch",
    "images",
    "seconds",
    "images_per_sec",
    "mb_per_sec",
    "batch_ms_median",
    "read_ms",
    "decode_ms",
    "augment_ms",
    "copy_ms",
    "skipped",
];

fn parse_thread_list(s: Option<&str>) -> Result<Vec<usize>> {
    let Some(s) = s else {
        return Ok(vec![loader_threads(None)?]);
    };
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

fn run_bench(a: BenchArgs) -> Result<ExitCode> {
    let threads = parse_thread_list(a.loader_threads.as_deref())?;
    check_size(a.size)?;
    if a.batch == 0 || a.batch > 4096 {
        bail!("--batch {}: expected 1 to 4096", a.batch);
    }
    if a.prefetch == 0 || a.prefetch > 64 {
        bail!("--prefetch {}: expected 1 to 64 batches", a.prefetch);
    }
    let folder = Arc::new(ImageFolder::scan(&a.dir).map_err(|e| anyhow!("{e}"))?);
    let want = a.images.unwrap_or_else(|| folder.len().min(1000));
    if want == 0 {
        bail!("--images must be at least 1");
    }
    let batches = want.div_ceil(a.batch);
    let env = Environment::here(
        rayon::current_num_threads(),
        cnnbench_kernels::Isa::detect().name().into(),
        None,
        "wall clock",
    );
    crate::signals::install()?;
    let bar = super::progress::bar((batches * threads.len()) as u64, a.quiet);
    let mut file = RunFile {
        format_version: FORMAT_VERSION,
        subcommand: "data".into(),
        environment: env,
        records: Vec::new(),
        skipped: Vec::new(),
        complete: false,
    };
    let store = a.store.create("data", &file.environment)?;
    for &t in &threads {
        bar.set_message(format!("{t} loader thread(s)"));
        let Some(rec) = bench_one(&a, &folder, t, batches, &bar)? else {
            break;
        };
        file.records.push(rec);
        crate::output::sink::save_run(
            a.store.out.as_deref(),
            || render_bench(&file, a.format),
            store.as_ref(),
            &file,
            false,
        )?;
    }
    bar.finish_and_clear();
    let interrupted = crate::signals::stopped();
    file.complete = !interrupted;
    let rendered = render_bench(&file, a.format)?;
    crate::output::sink::save_run(
        a.store.out.as_deref(),
        || Ok(rendered.clone()),
        store.as_ref(),
        &file,
        true,
    )?;
    Ok(crate::output::sink::end_run(
        a.store.out.as_deref(),
        rendered,
        file.records.len(),
        store.as_ref(),
        interrupted,
    )?
    .unwrap_or(ExitCode::SUCCESS))
}

/// Times `batches` batches of a loader with `threads` threads, after the
/// warm-up batches; `None` when interrupted.
fn bench_one(
    a: &BenchArgs,
    folder: &Arc<ImageFolder>,
    threads: usize,
    batches: usize,
    bar: &indicatif::ProgressBar,
) -> Result<Option<LoaderRecord>> {
    let cfg = LoaderConfig {
        batch: a.batch,
        threads,
        prefetch: a.prefetch,
        transform: Transform {
            kind: a.transform.kind(),
            size: a.size,
        },
        seed: a.seed,
        shuffle: a.transform == TransformArg::Train,
    };
    let loader = Loader::start(folder.clone(), cfg).map_err(|e| anyhow!("{e}"))?;
    for _ in 0..a.warmup {
        drop(loader.next().map_err(|e| anyhow!("{e}"))?);
    }
    let before = loader.stats();
    let t0 = Instant::now();
    let mut waits = Vec::with_capacity(batches);
    for _ in 0..batches {
        if crate::signals::stopped() {
            return Ok(None);
        }
        let t = Instant::now();
        let b = loader.next().map_err(|e| anyhow!("{e}"))?;
        waits.push(t.elapsed().as_secs_f64() * 1e3);
        drop(b);
        bar.inc(1);
    }
    let seconds = t0.elapsed().as_secs_f64();
    let after = loader.stats();
    drop(loader);
    let d = after.since(&before);
    let images = batches * a.batch;
    let per_image = |s: f64| {
        if d.images > 0 {
            s * 1e3 / d.images as f64
        } else {
            0.0
        }
    };
    Ok(Some(LoaderRecord {
        path: a.dir.to_string_lossy().into_owned(),
        images_in_tree: folder.len(),
        transform: a.transform.name().into(),
        size: a.size,
        decoder: transform::decoder_name().into(),
        loader_threads: threads,
        batch: a.batch,
        prefetch: a.prefetch,
        images,
        seconds,
        images_per_sec: images as f64 / seconds,
        mb_per_sec: d.bytes as f64 / seconds / 1e6,
        batch_ms: Stats::of(&waits).context("no timed batch")?,
        read_ms: per_image(d.read),
        decode_ms: per_image(d.decode),
        augment_ms: per_image(d.augment),
        copy_ms: per_image(d.copy),
        skipped: after.skipped,
    }))
}

fn render_bench(file: &RunFile<LoaderRecord>, format: Format) -> Result<String> {
    Ok(match format {
        Format::Json => serde_json::to_string_pretty(file)? + "\n",
        Format::Csv => {
            let mut w = csv::Writer::from_writer(Vec::new());
            w.write_record(BENCH_CSV_HEADER)?;
            for r in &file.records {
                w.write_record([
                    r.path.clone(),
                    r.images_in_tree.to_string(),
                    r.transform.clone(),
                    r.size.to_string(),
                    r.decoder.clone(),
                    r.loader_threads.to_string(),
                    r.batch.to_string(),
                    r.prefetch.to_string(),
                    r.images.to_string(),
                    format!("{:.3}", r.seconds),
                    format!("{:.1}", r.images_per_sec),
                    format!("{:.1}", r.mb_per_sec),
                    format!("{:.2}", r.batch_ms.median),
                    format!("{:.3}", r.read_ms),
                    format!("{:.3}", r.decode_ms),
                    format!("{:.3}", r.augment_ms),
                    format!("{:.3}", r.copy_ms),
                    r.skipped.to_string(),
                ])?;
            }
            String::from_utf8(w.into_inner().context("flushing CSV")?)?
        }
        _ => {
            let md = format == Format::Md;
            let mut s = match file.records.first() {
                Some(r) => format!(
                    "# cnnbench {} | {} | loader alone: {} ({} images), {} {}px, batch {}, prefetch {}, {}\n",
                    file.environment.cnnbench.version,
                    file.environment.cpu,
                    r.path,
                    r.images_in_tree,
                    r.transform,
                    r.size,
                    r.batch,
                    r.prefetch,
                    r.decoder
                ),
                None => String::from("# no thread count finished\n"),
            };
            let head = [
                "threads", "images/s", "MB/s", "batch ms", "read", "decode", "augment", "copy",
                "skipped",
            ];
            let rows: Vec<Vec<String>> = file
                .records
                .iter()
                .map(|r| {
                    vec![
                        r.loader_threads.to_string(),
                        format!("{:.1}", r.images_per_sec),
                        format!("{:.1}", r.mb_per_sec),
                        format!(
                            "{:.1} ({:.1}-{:.1})",
                            r.batch_ms.median, r.batch_ms.min, r.batch_ms.max
                        ),
                        format!("{:.2}", r.read_ms),
                        format!("{:.2}", r.decode_ms),
                        format!("{:.2}", r.augment_ms),
                        format!("{:.2}", r.copy_ms),
                        r.skipped.to_string(),
                    ]
                })
                .collect();
            s.push_str(&aligned(&head, &[Align::Right; 9], &rows, md));
            s.push_str(
                "read/decode/augment/copy: ms of one loader thread per image; batch ms: median (min-max) wait per batch\n",
            );
            s
        }
    })
}

fn run_dump(a: DumpArgs) -> Result<ExitCode> {
    check_size(a.size)?;
    let folder = ImageFolder::scan(&a.dir).map_err(|e| anyhow!("{e}"))?;
    let Some(sample) = folder.samples().get(a.index) else {
        bail!(
            "--index {}: the tree has {} images (0 to {})",
            a.index,
            folder.len(),
            folder.len().saturating_sub(1)
        );
    };
    let bytes = std::fs::read(&sample.path)
        .with_context(|| format!("cannot read '{}'", sample.path.display()))?;
    let t = Transform {
        kind: a.transform.kind(),
        size: a.size,
    };
    let mut out = vec![0.0f32; a.size * a.size * 3];
    transform::load_image(&bytes, &t, a.seed, &mut Scratch::default(), &mut out)
        .map_err(|e| anyhow!("'{}': {e}", sample.path.display()))?;
    write_npy(&a.out, &[a.size as u64, a.size as u64, 3], &out)?;
    // The source file on stdout, so that a script can hand both to a peer.
    crate::output::print(&format!("{}\n", sample.path.display()))?;
    Ok(ExitCode::SUCCESS)
}

fn write_npy(path: &Path, shape: &[u64], data: &[f32]) -> Result<()> {
    let mut buf = Vec::new();
    {
        let mut w = npyz::WriteOptions::<f32>::new()
            .default_dtype()
            .shape(shape)
            .writer(&mut buf)
            .begin_nd()
            .context("writing .npy")?;
        w.extend(data.iter().copied()).context("writing .npy")?;
        w.finish().context("writing .npy")?;
    }
    crate::results::atomic::write_atomic_bytes(path, &buf)
        .with_context(|| format!("cannot write '{}'", path.display()))
}
