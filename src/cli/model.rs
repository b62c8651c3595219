//! `cnnbench model`: time whole-model training steps (forward, backward,
//! optionally the SGD update) with a per-layer breakdown, or describe a
//! model's layers without running it.

use super::output::{end_run, save_run, StoreArgs};
use super::replicas::{self, Replicas};
use super::session::{self, Needs, Session, Target};
use super::{Device, TimingArgs};
use crate::bench::{RunPolicy, Stats};
use crate::dist::interconnect::{self, Interconnect};
use crate::dist::launch::{self, LauncherChoice};
use crate::dist::project;
use crate::note::note;
use crate::output::table::{aligned, Align};
use crate::output::{self, Format, MODEL_FORMATS};
use crate::results::memory::available;
use crate::results::model_record::MODEL_CSV_HEADER;
use crate::results::store::{RunFile, Store, FORMAT_VERSION};
use crate::results::{self, Environment, LayerTime, MemoryBytes, ModelRecord, ProjectionSet};
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use cnnbench_kernels::Isa;
use cnnbench_layers::cuda::Gpu;
use cnnbench_layers::net::buckets;
use cnnbench_layers::net::cpu::{estimate, CpuNet, CpuOptions};
use cnnbench_layers::net::{Graph, Op};
use cnnbench_layers::{zoo, DType, Layout};
use serde::Serialize;
use std::process::ExitCode;

pub(crate) mod data_parallel;
mod describe;
pub(crate) mod gpu;
pub(crate) mod input;
mod steps;

use describe::describe;
use steps::{time_steps, NetSteps};

#[derive(Args, Debug)]
#[command(after_help = "Examples:
    cnnbench model resnet50 --batch 16 --per-layer
    cnnbench model resnet50 --device gpu --dtype f16 --batch 64
    cnnbench model all --batch 8 --format csv --out models.csv
    cnnbench model resnet50 --describe
    cnnbench model resnet50 --describe --format benchdnn > resnet50.txt && cnnbench conv --from resnet50.txt

Models: alexnet googlenet inception-v3 vgg16 vgg19 resnet18 resnet34 resnet50 resnet101 resnet152 resnet200
(ImageNet, 224x224 or their own size), and the Keras examples of seed 001: mnist-mlp mnist-cnn cifar10-cnn
imdb-fasttext imdb-bilstm lstm-text (Keras batch sizes: 128 128 32 32 32 128)")]
pub struct ModelArgs {
    /// Model names, or `all`
    #[arg(required = true, value_name = "NAME")]
    pub models: Vec<String>,
    /// Images per step
    #[arg(long, default_value_t = 16)]
    pub batch: usize,
    /// Where to run: cpu, gpu (cuDNN and cuBLAS), or auto (the GPU when one is usable)
    #[arg(long, value_enum, default_value_t = Device::Cpu)]
    pub device: Device,
    /// Precision: f32 on the CPU; f32, tf32, f16 or bf16 on the GPU (f16/bf16: half
    /// activations, fp32 master weights and loss)
    #[arg(long, default_value = "f32")]
    pub dtype: String,
    /// Activation layout: nhwc on the CPU; nhwc or nchw on the GPU (models with recurrent
    /// layers: nhwc only)
    #[arg(long, default_value = "nhwc")]
    pub layout: String,
    /// GPU: most cuDNN workspace a convolution algorithm may use, in bytes (K/M/G suffixes)
    /// [default: 4G, halved until the search's scratch fits]
    #[arg(long, value_name = "BYTES")]
    pub workspace_limit: Option<String>,
    /// Also report each layer's forward and backward time
    #[arg(long)]
    pub per_layer: bool,
    /// CPU: run every ReLU as a pass of its own, as PyTorch's eager mode
    /// does, rather than inside the batch norm or residual add before it
    #[arg(long)]
    pub no_fuse: bool,
    /// Include a weight update in every step (SGD, momentum 0.9, lr 0.01)
    #[arg(long, value_enum)]
    pub update: Option<Update>,
    /// Print the layer table (name, type, output, parameters, MACs) without running
    #[arg(long)]
    pub describe: bool,
    #[arg(long, default_value = "table", value_parser = output::parser(MODEL_FORMATS))]
    pub format: Format,
    /// Worker threads [default: all logical CPUs]
    #[arg(long, value_name = "N", env = "CNNBENCH_THREADS")]
    pub threads: Option<usize>,
    #[command(flatten)]
    pub timing: TimingArgs,
    #[command(flatten)]
    pub store: StoreArgs,
    /// Data-parallel on this machine's GPUs, one replica per GPU in this process, gradients
    /// averaged over NCCL: a count (the first N) or device ids (0,2,3). Implies --device gpu;
    /// --batch is per GPU. Times the single-GPU step first, for the speedup
    #[arg(long, value_name = "N|IDS", conflicts_with = "launcher")]
    pub gpus: Option<String>,
    /// Data-parallel with one process per GPU started by a launcher (torchrun --no-python,
    /// srun), NCCL between them: read torchrun's or Slurm's variables (auto: whichever are
    /// set). Implies --device gpu; --batch is per GPU; rank 0 prints and saves the record
    #[arg(long, value_enum, value_name = "WHICH")]
    pub launcher: Option<LauncherChoice>,
    /// With --launcher: how long the ranks wait for each other, at the start and for the
    /// results [default: 300]
    #[arg(long, value_name = "SECS", requires = "launcher")]
    pub rendezvous_timeout: Option<f64>,
    /// Project the step on these GPU counts (2,4,8,64,512) from this run's per-layer backward
    /// times: gradient buckets all-reduced over --interconnect while the backward runs
    /// (implies --per-layer; a model, printed with every assumption)
    #[arg(long, value_name = "LIST")]
    pub project_gpus: Option<String>,
    /// The links a projection assumes, INTRA[,INTER]: nvlink4, nvlink3, pcie4, pcie5, ib-hdr,
    /// ib-ndr, eth100, or GBps:us
    #[arg(
        long,
        value_name = "LINKS",
        default_value = "nvlink4,ib-ndr",
        requires = "project_gpus"
    )]
    pub interconnect: String,
    /// GPUs per node in a projection: more than this fill whole nodes
    #[arg(long, value_name = "N", default_value_t = 8, requires = "project_gpus")]
    pub gpus_per_node: usize,
    /// Where the images come from: `synthetic` (seeded random tensors, set once), or an
    /// ImageFolder tree (one folder per class of JPEG/PNG files, as ImageNet's train folder)
    /// read, decoded and transformed for every step by the loader's own threads [default:
    /// synthetic]
    #[arg(long, value_name = "DIR|synthetic")]
    pub data: Option<std::path::PathBuf>,
    /// With --data: torchvision's training recipe (RandomResizedCrop + flip + normalize) or
    /// its eval recipe (resize + center crop + normalize) [default: train]
    #[arg(long, value_enum, value_name = "WHICH")]
    pub transform: Option<input::TransformArg>,
    /// With --data: decoding threads, apart from the compute threads [default: all logical
    /// CPUs]
    #[arg(long, value_name = "N")]
    pub loader_threads: Option<usize>,
    /// With --data: batches the loader may hold, filled while steps run (each is copied into the network's stage, then released) [default: 2]
    #[arg(long, value_name = "N")]
    pub prefetch: Option<usize>,
    /// No progress bar
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Update {
    Sgd,
}

/// Recurrent layers run in NHWC only (a sequence's features innermost,
/// as cuDNN's RNN API reads them): under `--layout nchw` a model named on
/// the command line with them is refused, and those `all` brought in are
/// left out, with a note.
pub fn sequences_in_nhwc(graphs: &mut Vec<Graph>, names: &[String], layout: Layout) -> Result<()> {
    if layout != Layout::Nchw {
        return Ok(());
    }
    let recurrent = |g: &Graph| g.nodes.iter().any(|n| matches!(n.op, Op::Recurrent(_)));
    if let Some(g) = graphs
        .iter()
        .find(|g| recurrent(g) && names.contains(&g.name))
    {
        bail!(
            "{} has recurrent layers, which run in the nhwc layout only; use --layout nhwc",
            g.name
        );
    }
    let left: Vec<String> = graphs
        .iter()
        .filter(|g| recurrent(g))
        .map(|g| g.name.clone())
        .collect();
    if !left.is_empty() {
        note!(
            "cnnbench: leaving out {} (recurrent layers run in the nhwc layout only)",
            left.join(", ")
        );
        graphs.retain(|g| !recurrent(g));
    }
    Ok(())
}

/// The graphs named on the command line (`all` expands), or a one-line
/// error naming the models there are.
pub fn resolve(names: &[String]) -> Result<Vec<Graph>> {
    let mut out = Vec::new();
    for n in names {
        if n == "all" {
            out.extend(zoo::NAMES.iter().filter_map(|m| zoo::build(m)));
            continue;
        }
        match zoo::build(n) {
            Some(g) => out.push(g),
            None => bail!(
                "unknown model '{n}'; there are: {}, or all",
                zoo::NAMES.join(", ")
            ),
        }
    }
    Ok(out)
}

pub fn run(mut args: ModelArgs) -> Result<ExitCode> {
    let mut graphs = resolve(&args.models)?;
    let projecting = projection_plan(&args)?;
    if projecting.is_some() {
        // A projection starts from each layer's backward time.
        args.per_layer = true;
    }
    if args.batch == 0 {
        bail!("--batch must be at least 1");
    }
    if args.describe {
        return describe(&graphs, &args);
    }
    if args.format == Format::Benchdnn {
        bail!("--format benchdnn goes with --describe");
    }
    let policy = args.timing.policy()?;
    let dtype = DType::parse(&args.dtype)?;
    let layout = Layout::parse(&args.layout)?;
    sequences_in_nhwc(&mut graphs, &args.models, layout)?;
    let replicas = data_parallel_replicas(&args, graphs.len())?;
    let data = input::DataPlan::from_args(&args)?;
    let workspace_limit = args
        .workspace_limit
        .as_deref()
        .map(crate::plan::parse_bytes)
        .transpose()
        .context("--workspace-limit")?
        .unwrap_or(gpu::DEFAULT_WORKSPACE_LIMIT);
    let gpu = match &replicas {
        // The first replica's GPU describes the run.
        Some(r) => Some(Gpu::open_ordinal(r.first_device()).map_err(|e| anyhow::anyhow!("{e}"))?),
        None => match session::choose_device(args.device, Needs::CudnnAndNvrtc)? {
            Target::Gpu(g) => Some(*g),
            Target::Cpu(why) => {
                if let (Some(why), false) = (why, args.quiet) {
                    note!("cnnbench: device auto: {why}; using the CPU");
                }
                None
            }
        },
    };
    if gpu.is_none() && (dtype != DType::F32 || layout != Layout::Nhwc) {
        bail!("--dtype {dtype} --layout {layout}: the CPU path runs f32 in nhwc only");
    }
    if gpu.is_some() {
        // cuDNN refuses tensors of 2^31 elements or more: say so before
        // running any model.
        for g in &graphs {
            cnnbench_layers::net::gpu::within_tensor_limit(g, args.batch)
                .map_err(|e| anyhow::anyhow!("{} on the GPU: {e}", g.name))?;
        }
    }
    let session = Session::start(args.threads, graphs.len() as u64, args.quiet)?;
    let (threads, bar) = (session.threads, &session.bar);
    let isa = Isa::detect();
    let gpu = match gpu {
        Some(g) => Some(gpu::Setup::new(g, dtype, layout, workspace_limit)?),
        None => None,
    };
    let env = match &gpu {
        Some(setup) => setup.environment(threads, isa),
        None => Environment::here(threads, isa.name().into(), None, "wall clock"),
    };
    if let (Some(r), Some(setup)) = (&replicas, &gpu) {
        if !r.leads() {
            // A rank other than 0: its times go to rank 0, which reports.
            for g in &graphs {
                data_parallel::run(&setup.replica_config(g, &args, policy), r, bar)?;
            }
            bar.finish_and_clear();
            return Ok(ExitCode::SUCCESS);
        }
    }
    let mut out = ModelOutput::new(env, &args)?;
    for g in &graphs {
        bar.set_message(g.name.clone());
        let recs = match (&gpu, &replicas) {
            (Some(setup), Some(r)) => {
                data_parallel::run(&setup.replica_config(g, &args, policy), r, bar)?
            }
            (Some(setup), None) => gpu::run(setup, g, &args, data.as_ref(), policy, bar)?
                .into_iter()
                .collect(),
            (None, _) => run_cpu(g, &args, data.as_ref(), policy, isa, bar)?
                .into_iter()
                .collect(),
        };
        if recs.is_empty() {
            break;
        }
        for mut rec in recs {
            if let Some(plan) = &projecting {
                rec.projection = plan.project(g, &rec)?;
            }
            out.push(rec)?;
        }
        bar.inc(1);
        if session.interrupted() {
            break;
        }
    }
    bar.finish_and_clear();
    out.finish(session.interrupted())
}

/// What `--project-gpus` asks for, checked before anything runs.
struct ProjectionPlan {
    gpus: Vec<usize>,
    links: Interconnect,
    gpus_per_node: usize,
}

fn projection_plan(args: &ModelArgs) -> Result<Option<ProjectionPlan>> {
    let Some(list) = &args.project_gpus else {
        return Ok(None);
    };
    let gpus = project::parse_gpu_list(list)?;
    let links = interconnect::parse_pair(&args.interconnect)?;
    let g = args.gpus_per_node;
    if g == 0 || g > project::MAX_GPUS {
        bail!("--gpus-per-node {g}: expected 1 to {}", project::MAX_GPUS);
    }
    if let Some(n) = gpus.iter().find(|&&n| n > g && n % g != 0) {
        bail!("--project-gpus: {n} GPUs do not fill whole nodes of {g} (--gpus-per-node)");
    }
    Ok(Some(ProjectionPlan {
        gpus,
        links,
        gpus_per_node: g,
    }))
}

impl ProjectionPlan {
    /// The projections of `rec`, a measured single-GPU record with its
    /// layer table (none for an OOM or a data-parallel record).
    fn project(&self, g: &Graph, rec: &ModelRecord) -> Result<Option<ProjectionSet>> {
        let (Some(f), Some(b), true, None) = (
            rec.forward_ms,
            rec.backward_ms,
            rec.status == "ok",
            &rec.data_parallel,
        ) else {
            return Ok(None);
        };
        // The layer table holds nodes 1.. in graph order; node 0 is the image.
        let node_backward_ms = std::iter::once(0.0)
            .chain(rec.layers.iter().map(|l| l.backward_ms))
            .collect();
        let measured = project::Measured {
            batch: rec.batch,
            forward_ms: f.median,
            backward_ms: b.median,
            update_ms: rec.update_ms.map_or(0.0, |u| u.median),
            node_backward_ms,
            grads: buckets::graph_params(g, project::GRAD_BYTES),
        };
        let rows = self
            .gpus
            .iter()
            .map(|&n| {
                project::project(
                    &measured,
                    &project::Topology {
                        gpus: n,
                        gpus_per_node: self.gpus_per_node,
                        links: self.links.clone(),
                    },
                )
            })
            .collect::<Result<Vec<_>>>()
            .with_context(|| format!("projecting {}", g.name))?;
        Ok(Some(ProjectionSet {
            interconnect: self.links.clone(),
            gpus_per_node: self.gpus_per_node,
            assumptions: project::assumptions(&self.links, self.gpus_per_node),
            rows,
        }))
    }
}

/// The replicas of a data-parallel run (`--gpus`, `--launcher`), checked
/// before anything runs: NCCL present, the devices there, the launcher's
/// variables sound.
fn data_parallel_replicas(args: &ModelArgs, models: usize) -> Result<Option<Replicas>> {
    if let Some(s) = &args.gpus {
        let ids = replicas::parse_gpus(s)?;
        replicas::check_devices(&format!("--gpus {s}"), &ids)?;
        return Ok(Some(Replicas::InProcess(ids)));
    }
    let Some(choice) = args.launcher else {
        return Ok(None);
    };
    if models > 1 {
        bail!("--launcher runs one model at a time (each needs its own NCCL communicator)");
    }
    let secs = args.rendezvous_timeout.unwrap_or(300.0);
    if !(secs.is_finite() && secs > 0.0 && secs <= 86_400.0) {
        bail!("--rendezvous-timeout must be between 0 and 86400 seconds, got {secs}");
    }
    let world = launch::from_process_env(choice)?;
    replicas::launched_device(&world)?;
    Ok(Some(Replicas::Launched {
        world,
        timeout: std::time::Duration::from_secs_f64(secs),
    }))
}

/// Training FLOPs of one step at `batch`: forward 2·MACs; backward 2·MACs
/// for the weights, and 2·MACs for the data gradient except where the
/// layer's input is the image.
pub fn step_flops(g: &Graph, batch: usize) -> u64 {
    let mut f = 0;
    for (i, n) in g.nodes.iter().enumerate() {
        let m = g.node_macs(i);
        let data = if n.inputs.first() == Some(&0) {
            0
        } else {
            2 * m
        };
        f += 4 * m + data;
    }
    f * batch as u64
}

/// A record with what is known before running: `device` is `cpu` or
/// `gpu`, the dtype and layout those of the run.
pub(crate) fn base_record(
    g: &Graph,
    batch: usize,
    status: &str,
    (device, dtype, layout): RunKind,
) -> ModelRecord {
    ModelRecord {
        model: g.name.clone(),
        batch,
        device,
        dtype,
        layout: layout.into(),
        params: g.params(),
        macs: g.macs(),
        status: status.into(),
        forward_ms: None,
        backward_ms: None,
        update_ms: None,
        total_ms: None,
        images_per_sec: None,
        gflops: None,
        runs: 0,
        loss: None,
        memory: None,
        fused: None,
        layers: Vec::new(),
        data_parallel: None,
        projection: None,
        input: results::Input::default(),
    }
}

/// Where and in which precision and layout a model ran.
pub(crate) type RunKind = (results::Device, DType, &'static str);

const CPU: RunKind = (results::Device::Cpu, DType::F32, "nhwc");

/// Times one model; `None` when interrupted before it finished.
fn run_cpu(
    g: &Graph,
    args: &ModelArgs,
    data: Option<&input::DataPlan>,
    policy: RunPolicy,
    isa: Isa,
    bar: &indicatif::ProgressBar,
) -> Result<Option<ModelRecord>> {
    let need = estimate(g, args.batch);
    if let Some(avail) = available(rayon::current_num_threads()) {
        if need > avail.bytes * 9 / 10 {
            note!(
                "cnnbench: {} at batch {}: needs about {}, {}: OOM",
                g.name,
                args.batch,
                crate::results::memory::size(need),
                avail.describe()
            );
            return Ok(Some(base_record(g, args.batch, "OOM", CPU)));
        }
    }
    let opts = CpuOptions {
        isa,
        reference: false,
        seed: args.timing.seed,
        fuse_relu: !args.no_fuse,
    };
    let mut steps = NetSteps {
        net: CpuNet::new(g, args.batch, opts).map_err(|e| anyhow::anyhow!("{}: {e}", g.name))?,
        update: args.update.is_some(),
        hook: None,
        feed: data.map(|d| d.start(g, args.batch)).transpose()?,
    };
    // The first step always runs untimed: it times the convolution
    // algorithms of each layer and keeps the fastest.
    let Some(timed) = time_steps(g, &mut steps, policy, bar)? else {
        return Ok(None);
    };
    let net = &steps.net;
    let mem = net.memory();
    let mem = MemoryBytes {
        params: mem.params,
        activations: mem.activations,
        workspace: mem.workspace,
        total: mem.total(),
    };
    let mut base = base_record(g, args.batch, "ok", CPU);
    base.fused = (net.fused_relus() > 0).then(|| "relu".into());
    if let Some(feed) = &steps.feed {
        base.input = feed.record(&timed);
        feed.note_skipped(&g.name);
    }
    let loss = net.loss().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(Some(timed.record(
        g,
        args,
        base,
        loss,
        mem,
        |i| net.kernels(i),
        1,
    )))
}

/// Renders and keeps the records of a model run.
struct ModelOutput {
    env: Environment,
    records: Vec<ModelRecord>,
    format: Format,
    path: Option<std::path::PathBuf>,
    store: Option<Store>,
}

impl ModelOutput {
    fn new(mut env: Environment, args: &ModelArgs) -> Result<ModelOutput> {
        env.price = args.store.price()?;
        let out = ModelOutput {
            store: args.store.create("model", &env)?,
            env,
            records: Vec::new(),
            format: args.format,
            path: args.store.out.clone(),
        };
        out.save(false, false)?;
        Ok(out)
    }

    fn push(&mut self, r: ModelRecord) -> Result<()> {
        self.records.push(r);
        self.save(false, false)
    }

    /// As the layer sink's: `last` is the run's final write.
    fn save(&self, complete: bool, last: bool) -> Result<()> {
        let file = RunFile {
            format_version: FORMAT_VERSION,
            subcommand: "model".into(),
            environment: self.env.clone(),
            records: self.records.clone(),
            skipped: Vec::new(),
            complete,
        };
        save_run(
            self.path.as_deref(),
            || self.render(complete),
            self.store.as_ref(),
            &file,
            last,
        )
    }

    /// As the layer sink's: JSON says whether the run is `complete`.
    fn render(&self, complete: bool) -> Result<String> {
        Ok(match self.format {
            Format::Json => {
                #[derive(Serialize)]
                struct Doc<'a> {
                    environment: &'a Environment,
                    records: &'a [ModelRecord],
                    complete: bool,
                }
                let doc = Doc {
                    environment: &self.env,
                    records: &self.records,
                    complete,
                };
                serde_json::to_string_pretty(&doc)? + "\n"
            }
            Format::Csv => {
                let mut w = csv::Writer::from_writer(Vec::new());
                w.write_record(MODEL_CSV_HEADER)?;
                for r in &self.records {
                    w.write_record(r.csv_row())?;
                }
                String::from_utf8(w.into_inner().context("flushing CSV")?)?
            }
            Format::Table | Format::Md | Format::Benchdnn => {
                let md = self.format == Format::Md;
                let e = &self.env;
                let (machine, clock) = match &e.gpu {
                    Some(g) => (
                        format!(
                            "{} | cuDNN {} | cuBLAS {}",
                            g.name,
                            g.cudnn_label(),
                            g.cublas
                        ),
                        "GPU time (CUDA events)",
                    ),
                    None => (
                        format!("{} | {} threads | isa {}", e.cpu, e.threads, e.isa),
                        "wall clock",
                    ),
                };
                let mut s = format!(
                    "# cnnbench {} ({}) | {machine} | training steps, median (min-max) of timed steps, {clock}\n",
                    e.cnnbench.version, e.cnnbench.git
                );
                s += &models_table(&self.records, md);
                for r in &self.records {
                    if let Some(f) = &r.input.folder {
                        s += &input_line(r, f);
                    }
                }
                for r in self.records.iter().filter(|r| !r.layers.is_empty()) {
                    s += &format!("\n## {} (batch {}), per layer\n", r.model, r.batch);
                    s += &layers_table(&r.layers, md);
                }
                for r in &self.records {
                    if let Some(p) = &r.projection {
                        s += &projection_section(r, p, md);
                    }
                }
                s
            }
        })
    }

    fn finish(&self, interrupted: bool) -> Result<ExitCode> {
        self.save(!interrupted, true)?;
        let out = self.path.as_deref();
        let end = end_run(
            out,
            self.render(!interrupted)?,
            self.records.len(),
            self.store.as_ref(),
            interrupted,
        )?;
        Ok(end.unwrap_or(ExitCode::SUCCESS))
    }
}

fn ms_range(s: &Option<Stats>) -> String {
    s.map_or("-".into(), |s| {
        format!("{:.1} ({:.1}-{:.1})", s.median, s.min, s.max)
    })
}

fn gib(b: usize) -> String {
    format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64)
}

fn models_table(records: &[ModelRecord], md: bool) -> String {
    let header = [
        "model", "batch", "params", "fwd ms", "bwd ms", "step ms", "img/s", "GFLOP/s", "memory",
        "runs", "status",
    ];
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|r| {
            vec![
                r.model.clone(),
                r.batch.to_string(),
                r.params.to_string(),
                ms_range(&r.forward_ms),
                ms_range(&r.backward_ms),
                ms_range(&r.total_ms),
                r.images_per_sec.map_or("-".into(), |v| format!("{v:.1}")),
                r.gflops.map_or("-".into(), |v| format!("{v:.1}")),
                r.memory.map_or("-".into(), |m| gib(m.total)),
                r.runs.to_string(),
                r.status.clone(),
            ]
        })
        .collect();
    use Align::{Left as L, Right as R};
    aligned(&header, &[L, R, R, R, R, R, R, R, R, R, L], &rows, md)
}

/// Where a real-data run's images came from and whether the loader kept
/// up, in two lines under the table.
fn input_line(r: &ModelRecord, f: &results::FolderInput) -> String {
    let step = r.total_ms.map_or(0.0, |s| s.median);
    let share = if step > 0.0 {
        100.0 * f.wait_ms.median / step
    } else {
        0.0
    };
    format!(
        "{} input: {} ({} images, {} classes{}), {} transform, {}, {} loader thread(s), prefetch {}
           loader {:.1} img/s (its threads' capacity) vs step {:.1} img/s; each step waited {:.2} ms (median, {share:.1}% of the step): {}
",
        r.model,
        f.path,
        f.images,
        f.classes,
        if f.skipped > 0 {
            format!(", {} skipped", f.skipped)
        } else {
            String::new()
        },
        f.transform,
        f.decoder,
        f.loader_threads,
        f.prefetch,
        f.loader_images_per_sec,
        r.images_per_sec.unwrap_or(0.0),
        f.wait_ms.median,
        if f.input_bound {
            "INPUT-BOUND"
        } else {
            "compute-bound"
        },
    )
}

/// A record's projections, marked as such, with every assumption.
fn projection_section(r: &ModelRecord, p: &ProjectionSet, md: bool) -> String {
    let mut s = format!(
        "\n## {} (batch {} per GPU), PROJECTED data-parallel steps (a model from this run's per-layer backward times, not a measurement)\n",
        r.model, r.batch
    );
    let rows: Vec<Vec<String>> = p
        .rows
        .iter()
        .map(|x| {
            vec![
                x.gpus.to_string(),
                x.nodes.to_string(),
                x.buckets.to_string(),
                x.algorithm.clone(),
                format!("{:.2}", x.comm_ms),
                format!("{:.2}", x.exposed_ms),
                format!("{:.1}", x.step_ms),
                format!("{:.0}", x.images_per_sec),
                format!("{:.1}", x.speedup),
                format!("{:.1}%", 100.0 * x.efficiency),
            ]
        })
        .collect();
    use Align::{Left as L, Right as R};
    s += &aligned(
        &[
            "GPUs",
            "nodes",
            "buckets",
            "all-reduce",
            "comm ms",
            "exposed ms",
            "step ms",
            "img/s",
            "speedup",
            "efficiency",
        ],
        &[R, R, R, L, R, R, R, R, R, R],
        &rows,
        md,
    );
    s += "\nAssumptions:\n";
    for a in &p.assumptions {
        s += &format!("{}- {a}\n", if md { "" } else { "  " });
    }
    s
}

fn layers_table(layers: &[LayerTime], md: bool) -> String {
    let header = [
        "layer",
        "type",
        "output",
        "fwd ms",
        "bwd ms",
        "% step",
        "algorithms",
    ];
    let rows: Vec<Vec<String>> = layers
        .iter()
        .map(|l| {
            vec![
                l.name.clone(),
                l.kind.clone(),
                l.output.clone(),
                format!("{:.3}", l.forward_ms),
                format!("{:.3}", l.backward_ms),
                format!("{:.1}", l.percent),
                l.kernels.clone(),
            ]
        })
        .collect();
    use Align::{Left as L, Right as R};
    aligned(&header, &[L, L, R, R, R, R, L], &rows, md)
}
