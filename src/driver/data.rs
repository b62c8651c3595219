//! `cnnbench data`'s work, once the CLI has checked its options and built
//! the run's context: a synthetic ImageFolder tree written ([`synth`]),
//! the input loader timed alone at each thread count ([`bench`]), and one
//! image transformed for a cross-check ([`dump`]). The output is
//! [`crate::output::data`]'s; the clock is the one
//! [`Stopwatch`](crate::bench::timer::Stopwatch).

use super::model::input::TransformArg;
use crate::bench::timer::Stopwatch;
use crate::bench::Stats;
use crate::note::note;
use crate::output::{self, Format};
use crate::results::loader_record::LoaderRecord;
use crate::results::store::{RunFile, Store};
use anyhow::{anyhow, bail, Context, Result};
use cnnbench_data::folder::ImageFolder;
use cnnbench_data::loader::{Loader, LoaderConfig};
use cnnbench_data::synth::{self, SynthOptions};
use cnnbench_data::transform::{self, Scratch, Transform};
use indicatif::ProgressBar;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// Writes the synthetic tree `opts` asks for into `dir`, with progress on
/// `bar`, and says what it wrote. A stop signal ends it between images:
/// the whole JPEGs written are kept (no temporary file is left), one line
/// says how many, and the exit code is the signal's.
pub fn synth(dir: &Path, opts: &SynthOptions, bar: &ProgressBar) -> Result<ExitCode> {
    bar.set_message("writing JPEGs");
    let t0 = Stopwatch::start();
    let summary = synth::synth_until(
        dir,
        opts,
        &|done| bar.set_position(done as u64),
        crate::signals::stop_flag(),
    )
    .map_err(|e| anyhow!("{e}"))?;
    bar.finish_and_clear();
    if !summary.complete {
        note!(
            "cnnbench: {}; kept the {} whole JPEGs of {} written to {} (no partial file; the \
             tree is incomplete)",
            crate::signals::stopped_by(),
            summary.files,
            opts.images,
            dir.display()
        );
        return Ok(crate::signals::exit_code());
    }
    output::print(&output::data::synth_summary(
        &summary,
        opts.classes,
        dir,
        t0.elapsed_s(),
        opts.quality,
    ))?;
    Ok(ExitCode::SUCCESS)
}

/// `data bench`'s run, its options checked.
pub struct LoaderBench {
    /// The tree, as given.
    pub dir: PathBuf,
    pub folder: Arc<ImageFolder>,
    /// The thread counts to time, in order.
    pub threads: Vec<usize>,
    pub batch: usize,
    /// Batches timed per thread count (whole batches).
    pub batches: usize,
    pub transform: TransformArg,
    pub size: usize,
    /// Batches loaded and dropped before timing.
    pub warmup: usize,
    pub prefetch: usize,
    pub seed: u64,
}

/// Where `data bench`'s records go: stdout or `out`, in `format`, and the
/// results store.
pub struct LoaderSink<'a> {
    pub format: Format,
    pub out: Option<&'a Path>,
    pub store: Option<Store>,
}

/// Times the loader at each thread count of `plan`, adding a record to
/// `file` and saving it after each; stops early when interrupted.
pub fn bench(
    plan: &LoaderBench,
    mut file: RunFile<LoaderRecord>,
    sink: &LoaderSink,
    bar: &ProgressBar,
) -> Result<ExitCode> {
    let render = |file: &RunFile<LoaderRecord>| output::data::render_bench(file, sink.format);
    for &t in &plan.threads {
        bar.set_message(format!("{t} loader thread(s)"));
        let Some(rec) = bench_one(plan, t, bar)? else {
            break;
        };
        file.records.push(rec);
        output::sink::save_run(
            sink.out,
            || render(&file),
            sink.store.as_ref(),
            &file,
            false,
        )?;
    }
    bar.finish_and_clear();
    let interrupted = crate::signals::stopped();
    file.complete = !interrupted;
    let rendered = render(&file)?;
    output::sink::save_run(
        sink.out,
        || Ok(rendered.clone()),
        sink.store.as_ref(),
        &file,
        true,
    )?;
    Ok(output::sink::end_run(
        sink.out,
        rendered,
        file.records.len(),
        sink.store.as_ref(),
        interrupted,
    )?
    .unwrap_or(ExitCode::SUCCESS))
}

/// Times `plan.batches` batches of a loader with `threads` threads, after
/// the warm-up batches; `None` when interrupted.
fn bench_one(
    plan: &LoaderBench,
    threads: usize,
    bar: &ProgressBar,
) -> Result<Option<LoaderRecord>> {
    let cfg = LoaderConfig {
        batch: plan.batch,
        threads,
        prefetch: plan.prefetch,
        transform: Transform {
            kind: plan.transform.kind(),
            size: plan.size,
        },
        seed: plan.seed,
        shuffle: plan.transform == TransformArg::Train,
    };
    let loader = Loader::start(plan.folder.clone(), cfg).map_err(|e| anyhow!("{e}"))?;
    for _ in 0..plan.warmup {
        if crate::signals::stopped() {
            return Ok(None);
        }
        drop(loader.next().map_err(|e| anyhow!("{e}"))?);
    }
    let before = loader.stats();
    let t0 = Stopwatch::start();
    let mut waits = Vec::new();
    waits
        .try_reserve_exact(plan.batches)
        .map_err(|_| anyhow!("{} batches: cannot allocate their times", plan.batches))?;
    for _ in 0..plan.batches {
        if crate::signals::stopped() {
            return Ok(None);
        }
        let t = Stopwatch::start();
        let b = loader.next().map_err(|e| anyhow!("{e}"))?;
        waits.push(t.elapsed_ms());
        drop(b);
        bar.inc(1);
    }
    let seconds = t0.elapsed_s();
    let after = loader.stats();
    drop(loader);
    let d = after.since(&before);
    let images = plan.batches * plan.batch;
    let per_image = |s: f64| {
        if d.images > 0 {
            s * 1e3 / d.images as f64
        } else {
            0.0
        }
    };
    Ok(Some(LoaderRecord {
        path: plan.dir.to_string_lossy().into_owned(),
        images_in_tree: plan.folder.len(),
        transform: plan.transform.name().into(),
        size: plan.size,
        decoder: transform::decoder_name().into(),
        loader_threads: threads,
        batch: plan.batch,
        prefetch: plan.prefetch,
        images,
        seconds,
        images_per_sec: images as f64 / seconds,
        mb_per_sec: d.bytes as f64 / seconds / 1e6,
        batch_ms: Stats::of(&waits).context("no timed batch")?,
        read_ms: per_image(d.read),
        decode_ms: per_image(d.decode),
        augment_ms: per_image(d.augment),
        copy_ms: per_image(d.copy),
        skipped: after.skipped + plan.folder.unreadable().len(),
    }))
}

/// `data dump`'s run, its options checked.
pub struct ImageDump {
    /// The tree.
    pub dir: PathBuf,
    /// The image's index in the tree, in torchvision's ImageFolder order.
    pub index: usize,
    pub transform: TransformArg,
    pub size: usize,
    /// The seed of a training transform's crop and flip.
    pub seed: u64,
    /// The .npy to write.
    pub out: PathBuf,
}

/// Writes image `d.index` of `d.dir`, transformed, to `d.out` as .npy
/// ([size, size, 3] f32, normalized), and prints the source file's path.
pub fn dump(d: &ImageDump) -> Result<ExitCode> {
    let folder = ImageFolder::scan(&d.dir).map_err(|e| anyhow!("{e}"))?;
    super::model::input::note_unreadable(&folder);
    let Some(sample) = folder.samples().get(d.index) else {
        bail!(
            "--index {}: the tree has {} images (0 to {})",
            d.index,
            folder.len(),
            folder.len().saturating_sub(1)
        );
    };
    // Capped as the loader caps it: a sample linked to /dev/zero ends in
    // one line.
    let bytes = crate::bounded_read::read_bytes(
        &sample.path,
        crate::bounded_read::IMAGE_FILE_BYTES,
        "an image file",
    )
    .with_context(|| format!("cannot read '{}'", sample.path.display()))?;
    let t = Transform {
        kind: d.transform.kind(),
        size: d.size,
    };
    let mut out = vec![0.0f32; d.size * d.size * 3];
    transform::load_image(&bytes, &t, d.seed, &mut Scratch::default(), &mut out)
        .map_err(|e| anyhow!("'{}': {e}", sample.path.display()))?;
    let npy = output::data::npy(&[d.size as u64, d.size as u64, 3], &out)?;
    // Its error names the path already.
    crate::results::atomic::write_atomic_bytes(&d.out, &npy)?;
    // The source file on stdout, so that a script can hand both to a peer.
    output::print(&format!("{}\n", sample.path.display()))?;
    Ok(ExitCode::SUCCESS)
}
