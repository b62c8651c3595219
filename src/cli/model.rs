//! `cnnbench model`: time whole-model training steps (forward, backward,
//! optionally the SGD update) with a per-layer breakdown, or describe a
//! model's layers without running it. This file parses and checks the
//! options and hands the run to [`crate::driver::model`].

use super::gpu_paths::GpuPathArgs;
use super::output::StoreArgs;
use super::session::{self, Needs, Session, Target};
use super::{Device, TimingArgs};
use crate::dist::launch::{self, LauncherChoice};
use crate::driver::model::input::{DataOptions, DataPlan, TransformArg};
use crate::driver::model::projection::ProjectionPlan;
use crate::driver::model::{self, ModelRun, StepOptions};
use crate::driver::replicas::{self, Replicas};
use crate::note::note;
use crate::output::model::describe::describe;
use crate::output::model::ModelOutput;
use crate::output::{self, Format, MODEL_FORMATS};
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use cnnbench_layers::cuda::Gpu;
use cnnbench_layers::{DType, Layout};
use std::process::ExitCode;

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
    /// CPU: run every ReLU and residual add as a pass of its own, as
    /// PyTorch's eager mode does, rather than a ReLU inside the batch norm
    /// or add before it and an add with its ReLU inside the batch norm
    /// before the add
    #[arg(long)]
    pub no_fuse: bool,
    #[command(flatten)]
    pub gpu_paths: GpuPathArgs,
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
    /// Instruction set for the CPU path's kernels: auto, avx512, avx2, scalar (with scalar,
    /// the GEMMs run tiled on the `gemm` crate's own pick); a GPU run records the CPU's best
    #[arg(long, default_value = "auto", value_name = "ISA", env = "CNNBENCH_ISA")]
    pub isa: String,
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
    pub transform: Option<TransformArg>,
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

pub fn run(mut args: ModelArgs) -> Result<ExitCode> {
    let mut graphs = model::resolve(&args.models)?;
    let projecting = args
        .project_gpus
        .as_deref()
        .map(|list| ProjectionPlan::parse(list, &args.interconnect, args.gpus_per_node))
        .transpose()?;
    if projecting.is_some() {
        // A projection starts from each layer's backward time.
        args.per_layer = true;
    }
    if args.batch == 0 {
        bail!("--batch must be at least 1");
    }
    if args.describe {
        describable_at(&graphs, args.batch)?;
        describe(&graphs, args.format, args.batch, args.store.out.as_deref())?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.format == Format::Benchdnn {
        bail!("--format benchdnn goes with --describe");
    }
    let policy = args.timing.policy()?;
    let dtype = DType::parse(&args.dtype)?;
    let layout = Layout::parse(&args.layout)?;
    model::sequences_in_nhwc(&mut graphs, &args.models, layout)?;
    let data_parallel = args.gpus.is_some() || args.launcher.is_some();
    // `--fastest` leaves out the captured step where the run refuses one
    // (it is refused beside `--cuda-graph`, so only that flag conflicts).
    let graph_ok = !(args.per_layer || projecting.is_some() || data_parallel);
    model::graph_steps::refuse_conflicts(
        args.gpu_paths.cuda_graph,
        args.per_layer,
        projecting.is_some(),
        data_parallel,
    )?;
    let replicas = data_parallel_replicas(&args, graphs.len())?;
    let data = DataPlan::new(&DataOptions {
        data: args.data.as_deref(),
        transform: args.transform,
        loader_threads: args.loader_threads,
        prefetch: args.prefetch,
        data_parallel: args.gpus.is_some() || args.launcher.is_some(),
        seed: args.timing.seed,
    })?;
    model::fed_by_folder(&mut graphs, &args.models, data.is_some())?;
    let workspace_limit = args
        .workspace_limit
        .as_deref()
        .map(crate::plan::parse_bytes)
        .transpose()
        .context("--workspace-limit")?
        // A whole network's search may try this much cuDNN workspace per
        // convolution (as `conv`'s default).
        .unwrap_or(crate::driver::conv::DEFAULT_WORKSPACE_LIMIT);
    let mut cpu_why = None;
    let gpu = match &replicas {
        // The first replica's GPU describes the run.
        Some(r) => Some(Gpu::open_ordinal(r.first_device()).map_err(|e| anyhow::anyhow!("{e}"))?),
        None => match session::choose_device(args.device, Needs::CudnnAndNvrtc)? {
            Target::Gpu(g) => Some(*g),
            Target::Cpu(why) => {
                cpu_why = why;
                None
            }
        },
    };
    let paths = args
        .gpu_paths
        .paths_where(gpu.is_some(), cpu_why.as_deref(), graph_ok)?;
    // As conv and rnn: the ISA is the CPU path's, resolved (and refused
    // where this CPU lacks it) only there; a name that is no ISA is
    // refused on either path.
    let isa = match gpu {
        Some(_) if args.isa != "auto" && cnnbench_kernels::Isa::parse(&args.isa).is_none() => {
            crate::plan::resolve_isa(&args.isa)?
        }
        Some(_) => cnnbench_kernels::Isa::detect(),
        None => crate::plan::resolve_isa(&args.isa)?,
    };
    if let (Some(why), false) = (&cpu_why, args.quiet) {
        note!("cnnbench: device auto: {why}; using the CPU");
    }
    let recurrent = graphs.iter().any(|g| g.has_recurrent());
    if let Some(line) = paths.unverified_note_for(recurrent) {
        note!("cnnbench: {line}");
    }
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
    let run = ModelRun {
        isa,
        graphs,
        opts: StepOptions {
            batch: args.batch,
            update: args.update.is_some(),
            per_layer: args.per_layer,
            seed: args.timing.seed,
            fuse_relu: !args.no_fuse,
            paths,
        },
        policy,
        dtype,
        layout,
        workspace_limit,
        gpu,
        replicas,
        data,
        projecting,
    };
    let (store, format) = (&args.store, args.format);
    model::run(run, session.threads, &session.bar, |mut env| {
        env.price = store.price()?;
        let saved = store.create("model", &env)?;
        ModelOutput::new(env, format, store.out.clone(), saved)
    })
}

/// `--describe` describes a model at a batch that can exist: one whose
/// every tensor has fewer than 2^63 bytes (what benchdnn's and every
/// framework's 64-bit sizes hold; `conv` would refuse its descriptors).
/// The descriptors it prints are read back as `conv` reads them.
fn describable_at(graphs: &[cnnbench_layers::net::Graph], batch: usize) -> Result<()> {
    for g in graphs {
        for (i, n) in g.nodes.iter().enumerate() {
            let bytes = batch as u128 * n.out.len() as u128 * 4;
            if bytes > i64::MAX as u128 {
                bail!(
                    "--batch {batch}: {} layer '{}' would hold {bytes} bytes, more than 64-bit sizes hold (2^63)",
                    g.name,
                    n.name
                );
            }
            if matches!(n.op, cnnbench_layers::net::Op::Conv(_)) {
                let desc = crate::output::model::describe::conv_descriptor(g, i, batch);
                crate::problem::ConvProblem::parse(&desc).with_context(|| {
                    format!("--batch {batch}: {}'s {} descriptor", g.name, n.name)
                })?;
            }
        }
    }
    Ok(())
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
        bail!("--rendezvous-timeout must be more than 0 and at most 86400 seconds, got {secs}");
    }
    let world = launch::from_process_env(choice)?;
    replicas::launched_device(&world)?;
    Ok(Some(Replicas::Launched {
        world,
        timeout: std::time::Duration::from_secs_f64(secs),
    }))
}
