//! What every measuring subcommand starts with, once: the device it runs
//! on (or why not the GPU), the worker threads, the stop signals the one
//! timing loop watches ([`crate::signals`]), and the progress bar.

use super::{init_threads, Device};
use crate::bench::{RunPolicy, Runner};
use anyhow::{bail, Result};
use cnnbench_layers::cuda::{nvrtc_missing, Gpu, Presence};
use indicatif::ProgressBar;

pub struct Session {
    pub threads: usize,
    pub bar: ProgressBar,
}

impl Session {
    /// Starts the worker threads and the signal handlers, and a progress
    /// bar over `work` steps (hidden with `quiet`).
    pub fn start(threads: Option<usize>, work: u64, quiet: bool) -> Result<Session> {
        let threads = init_threads(threads)?;
        crate::signals::install()?;
        Ok(Session {
            threads,
            bar: super::progress::bar(work, quiet),
        })
    }

    /// The one timing loop under `policy`, stopping at a stop signal.
    /// The one timing loop under `policy`, stopping at a stop signal.
    pub fn runner(&self, policy: RunPolicy) -> Runner<'static> {
        Runner::until_signal(policy)
    }

    /// Whether a stop signal (SIGINT, SIGTERM, SIGHUP) arrived.
    pub fn interrupted(&self) -> bool {
        crate::signals::stopped()
    }
}

/// Where a run goes: a GPU, or the CPU with the reason it is not a GPU
/// (`None` for `--device cpu`).
pub enum Target {
    Gpu(Box<Gpu>),
    Cpu(Option<String>),
}

/// What NVIDIA libraries a subcommand needs besides cuDNN and cuBLAS.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    Cudnn,
    /// Whole models: NVRTC too, for the kernels cuDNN lacks.
    CudnnAndNvrtc,
}

/// The GPU for `--device gpu` (or a one-line error), `auto` (the GPU, or
/// the CPU with the reason), and the CPU for `cpu`.
pub fn choose_device(device: Device, needs: Needs) -> Result<Target> {
    if device == Device::Cpu {
        return Ok(Target::Cpu(None));
    }
    let opened = match (needs, nvrtc_missing()) {
        // A machine with a driver but no NVRTC cannot run whole models.
        (Needs::CudnnAndNvrtc, Some(why)) if Presence::detect().driver => Err(why),
        _ => Gpu::open(),
    };
    match (opened, device) {
        (Ok(g), _) => Ok(Target::Gpu(Box::new(g))),
        (Err(why), Device::Gpu) => bail!("--device gpu: {why}"),
        (Err(why), _) => Ok(Target::Cpu(Some(why))),
    }
}
