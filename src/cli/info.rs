//! `cnnbench info`: the machine and the build, with the FP32 peak measured
//! by a register-only FMA loop per ISA; on a GPU machine, the GPU, the
//! libraries as loaded, and its peak per precision (from its properties,
//! and measured with cuBLAS).

use crate::output::table::{aligned, Align};
use crate::output::{self, Format, TABLE_OR_JSON};
use crate::results::environment::{self, BuildInfo};
use anyhow::Result;
use clap::Args;
use cnnbench_kernels::{peak, Isa};
use cnnbench_layers::cuda::device::supports_dtype;
use cnnbench_layers::cuda::loader::{self, LibraryInfo};
use cnnbench_layers::cuda::{DeviceInfo, Gpu, Peak};
use cnnbench_layers::gemm::cuda::measure_peak;
use cnnbench_layers::DType;
use serde::Serialize;
use std::process::ExitCode;

#[derive(Args)]
pub struct InfoArgs {
    #[arg(long, default_value = "table", value_parser = output::parser(TABLE_OR_JSON))]
    format: Format,
    /// Threads for the all-threads peak [default: all logical CPUs]
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
}

#[derive(Serialize)]
struct IsaPeak {
    isa: String,
    gflops_1_thread: f64,
    gflops_all_threads: f64,
}

#[derive(Serialize)]
struct Info {
    cpu: String,
    host: String,
    os: String,
    cores: usize,
    threads: usize,
    isa_detected: String,
    isa_used: String,
    isa_supported: Vec<String>,
    /// Peak FP32 GFLOP/s per ISA: an FMA = 2 FLOPs, register-only loop, best of `peak::DEFAULT_REPS`.
    peak: Vec<IsaPeak>,
    gpu: GpuSection,
    cnnbench: BuildInfo,
}

/// The GPU as loaded, or why there is none.
#[derive(Serialize)]
struct GpuSection {
    usable: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    device: Option<DeviceInfo>,
    /// Square cuBLAS GEMMs per dtype, beside the nominal peaks
    /// (`device.peaks`: the datasheet's, else SMs x max clock).
    measured: Vec<Peak>,
    /// Each NVIDIA library as loaded (file and version), or why not: told
    /// with or without a GPU or driver.
    libraries: Vec<LibraryInfo>,
}

fn gpu_section() -> Result<GpuSection> {
    match Gpu::open() {
        Err(why) => Ok(GpuSection {
            usable: false,
            reason: Some(why),
            device: None,
            measured: vec![],
            libraries: loader::libraries(),
        }),
        Ok(gpu) => {
            let mut measured = Vec::new();
            for d in DType::ALL {
                if !supports_dtype(&gpu.info.compute_capability, d) {
                    continue;
                }
                measured.push(measure_peak(&gpu, d)?);
            }
            Ok(GpuSection {
                usable: true,
                reason: None,
                libraries: gpu.info.libraries.clone(),
                device: Some(gpu.info.clone()),
                measured,
            })
        }
    }
}

pub fn run(args: InfoArgs) -> Result<ExitCode> {
    let threads = super::thread_count(args.threads)?;
    let mut peak = Vec::new();
    for isa in Isa::supported() {
        let measure = |t| crate::bench::timer::cpu_peak_gflops(isa, t, peak::DEFAULT_REPS);
        peak.push(IsaPeak {
            isa: isa.name().into(),
            gflops_1_thread: measure(1)?,
            gflops_all_threads: measure(threads)?,
        });
    }
    let info = Info {
        cpu: environment::cpu_model(),
        host: environment::host_name(),
        os: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
        cores: environment::logical_cores(),
        threads,
        isa_detected: Isa::detect().name().into(),
        isa_used: Isa::detect().name().into(),
        isa_supported: Isa::supported().iter().map(|i| i.name().into()).collect(),
        peak,
        gpu: gpu_section()?,
        cnnbench: BuildInfo::current(),
    };
    match args.format {
        Format::Json => crate::output::print(&(serde_json::to_string_pretty(&info)? + "\n"))?,
        _ => crate::output::print(&text(&info))?,
    }
    Ok(ExitCode::SUCCESS)
}

fn text(i: &Info) -> String {
    let mut s = String::new();
    let b = &i.cnnbench;
    s += &format!(
        "cnnbench      {} (git {}, {} build)\n",
        b.version, b.git, b.profile
    );
    s += &format!("cpu           {}\n", i.cpu);
    s += &format!("host          {} ({})\n", i.host, i.os);
    s += &format!("logical cpus  {}\n", i.cores);
    s += &format!(
        "isa           {} (supported: {})\n",
        i.isa_detected,
        i.isa_supported.join(", ")
    );
    match (&i.gpu.device, &i.gpu.reason) {
        (Some(g), _) => {
            s += &format!(
                "gpu           {} (sm_{}, {} SMs, {:.1} GiB, L2 {} MiB)\n",
                g.name,
                g.compute_capability.replace('.', ""),
                g.sms,
                g.memory_bytes as f64 / (1u64 << 30) as f64,
                g.l2_bytes >> 20
            );
            s += &format!(
                "gpu clocks    {} MHz max SM, {} MHz memory x {} bits ({:.0} GB/s)\n",
                g.clock_mhz,
                g.memory_clock_mhz,
                g.memory_bus_bits,
                g.memory_gbps()
            );
            s += &format!(
                "gpu software  driver CUDA {}, cuDNN {} (built for CUDA {}), cuBLAS {}\n",
                g.driver_cuda, g.cudnn, g.cudnn_cudart, g.cublas
            );
        }
        (None, Some(why)) => s += &format!("gpu           {why}\n"),
        (None, None) => {}
    }
    for (n, l) in i.gpu.libraries.iter().enumerate() {
        let head = if n == 0 { "gpu libraries" } else { "" };
        s += &format!("{head:<13} {}\n", l.describe());
    }
    s += &format!(
        "\nFP32 peak, measured (register-only FMA loop, FMA = 2 FLOPs, best of {}):\n",
        peak::DEFAULT_REPS
    );
    let threads_head = format!("{} threads GFLOP/s", i.threads);
    let rows: Vec<Vec<String>> = i
        .peak
        .iter()
        .map(|p| {
            vec![
                p.isa.clone(),
                format!("{:.1}", p.gflops_1_thread),
                format!("{:.1}", p.gflops_all_threads),
            ]
        })
        .collect();
    s += &aligned(
        &["isa", "1 thread GFLOP/s", &threads_head],
        &[Align::Left, Align::Right, Align::Right],
        &rows,
        false,
    );
    if let Some(g) = &i.gpu.device {
        s += "\nGPU peak per dtype (TFLOP/s; `% peak` divides by the nominal one):\n";
        let f = |p: Option<&Peak>| p.map_or("-".to_string(), |p| format!("{:.1}", p.tflops));
        let rows: Vec<Vec<String>> = DType::ALL
            .iter()
            .map(|&d| {
                let nominal = g.peak(d);
                let meas = i.gpu.measured.iter().find(|p| p.dtype == d.name());
                let ratio = match (nominal, meas) {
                    (Some(n), Some(m)) => format!("{:.0}%", 100.0 * m.tflops / n.tflops),
                    _ => "-".into(),
                };
                vec![
                    d.name().to_string(),
                    f(nominal),
                    f(meas),
                    ratio,
                    nominal.or(meas).map_or(String::new(), |p| p.source.clone()),
                ]
            })
            .collect();
        s += &aligned(
            &[
                "dtype",
                "nominal",
                "measured",
                "measured/nominal",
                "nominal from",
            ],
            &[
                Align::Left,
                Align::Right,
                Align::Right,
                Align::Right,
                Align::Left,
            ],
            &rows,
            false,
        );
    }
    s
}
