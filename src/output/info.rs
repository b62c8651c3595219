//! `cnnbench info`'s output: aligned text or JSON.

use super::table::{aligned, Align};
use super::Format;
use crate::results::machine_info::Info;
use crate::results::memory::size;
use crate::results::roofline::Bandwidth;
use anyhow::Result;
use cnnbench_kernels::peak;
use cnnbench_layers::cuda::Peak;
use cnnbench_layers::DType;

/// `info` in `format` (table or JSON).
pub fn render(info: &Info, format: Format) -> Result<String> {
    Ok(match format {
        Format::Json => serde_json::to_string_pretty(info)? + "\n",
        // Table is the only other format `info` accepts.
        _ => text(info),
    })
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
    let counted = size(i.cache.counted_bytes.into());
    s += &match i.cache.largest_bytes {
        0 => format!("cpu cache     none reported; the kernels count on {counted}\n"),
        largest => format!(
            "cpu cache     {} (the largest level); the kernels count on {counted}\n",
            size(largest.into())
        ),
    };
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
    s += &bandwidth_line("\nmemory bandwidth", &i.memory_bandwidth);
    if let Some(b) = &i.gpu.bandwidth {
        s += &bandwidth_line("gpu bandwidth", b);
    }
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

/// `memory bandwidth  12.3 GB/s measured (how)`, with the nominal rate
/// where known.
fn bandwidth_line(head: &str, b: &Bandwidth) -> String {
    let nominal = b.nominal_gbs.map_or(String::new(), |n| {
        format!(
            ", {:.0}% of the nominal {n:.0} GB/s",
            100.0 * b.measured_gbs / n
        )
    });
    format!(
        "{head}: {:.1} GB/s measured{nominal} ({})\n",
        b.measured_gbs, b.method
    )
}
