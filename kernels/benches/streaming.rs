//! Memory-bound kernels at ResNet-50's largest batch-16 sizes (12.8 M
//! floats, 51 MB per tensor): median ms of 15 runs and the bandwidth that
//! implies (bytes each kernel must move, not what caches do).
//!
//!     cargo bench -p cnnbench-kernels --bench streaming
//!
//! `ONLY="batchnorm bwd + relu"` runs the one kernel of that name (for
//! `perf`, or two bench binaries side by side); `BN_C=64` gives the batch
//! norms 64 channels (default 256) over the same number of floats.
//!
//! A kernel that falls well below its neighbours' GB/s is usually not
//! vectorised for the ISA (see `simd::on_isa!`).

use cnnbench_kernels::norm::batchnorm::{self, BatchStats, Epilogue};
use cnnbench_kernels::pool::{max_bwd, max_fwd, PoolShape};
use cnnbench_kernels::{eltwise, Isa};
use std::time::Instant;

fn time(name: &str, bytes: usize, mut f: impl FnMut()) {
    if let Ok(only) = std::env::var("ONLY") {
        if name != only {
            return;
        }
    }
    let mut secs: Vec<f64> = (0..15)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .collect();
    secs.sort_by(f64::total_cmp);
    let t = secs[secs.len() / 2];
    println!(
        "{name:28} {:8.2} ms {:6.1} GB/s",
        t * 1e3,
        bytes as f64 / t / 1e9
    );
}

fn main() {
    let isa = Isa::detect();
    println!("ISA {isa:?}, {} threads", rayon::current_num_threads());
    let n = 16 * 256 * 56 * 56;
    let f = n * 4;
    let y: Vec<f32> = (0..n).map(|i| (i % 7) as f32 - 3.0).collect();
    let a: Vec<f32> = (0..n).map(|i| (i % 5) as f32).collect();
    let b: Vec<f32> = (0..n).map(|i| (i % 3) as f32).collect();
    let mut out = vec![1.0f32; n];

    time("relu fwd", 2 * f, || eltwise::relu_fwd(isa, &y, &mut out));
    time("relu bwd, 1 consumer", 3 * f, || {
        eltwise::relu_bwd(isa, &y, &[&a], &mut out)
    });
    time("relu bwd, 2 consumers", 4 * f, || {
        eltwise::relu_bwd(isa, &y, &[&a, &b], &mut out)
    });
    time("sum of 2", 3 * f, || eltwise::sum(isa, &[&a, &b], &mut out));
    time("sum of 2 + relu", 3 * f, || {
        eltwise::sum_relu(isa, &[&a, &b], &mut out)
    });

    let c: usize = std::env::var("BN_C")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&c| c > 0 && n % c == 0)
        .unwrap_or(256);
    let (gamma, beta) = (vec![1.0f32; c], vec![0.0f32; c]);
    let mut st = BatchStats::new(c);
    let (mut dgamma, mut dbeta) = (vec![0.0; c], vec![0.0; c]);
    for relu in [false, true] {
        let with = if relu { " + relu" } else { "" };
        let epi = if relu { Epilogue::Relu } else { Epilogue::None };
        time(&format!("batchnorm fwd{with}"), 3 * f, || {
            batchnorm::fwd_train(isa, c, &y, &gamma, &beta, 1e-5, epi, &mut out, &mut st)
        });
        time(&format!("batchnorm bwd{with}"), 5 * f, || {
            batchnorm::bwd(
                isa,
                c,
                &y,
                &a,
                &gamma,
                &st,
                relu,
                &mut out,
                &mut dgamma,
                &mut dbeta,
            )
        });
    }
    // The block's end: BN, the residual add and its ReLU in one pass each
    // way (reads x and z, writes y; backward reads x, y and two gradient
    // parts, writes dz, then reads dz and x, writes dx).
    let mut fused = vec![0.0f32; n];
    time("batchnorm fwd + add + relu", 4 * f, || {
        batchnorm::fwd_train(
            isa,
            c,
            &y,
            &gamma,
            &beta,
            1e-5,
            Epilogue::AddRelu(&a),
            &mut fused,
            &mut st,
        )
    });
    let mut dz = vec![0.0f32; n];
    time("batchnorm bwd + add + relu", 8 * f, || {
        batchnorm::bwd_add_relu(
            isa,
            c,
            &y,
            &fused,
            &[&a, &b],
            &gamma,
            &st,
            &mut dz,
            &mut out,
            &mut dgamma,
            &mut dbeta,
        )
    });

    // ResNet's stem pool: 3x3 stride 2 over 16x64x112x112.
    let p = PoolShape {
        mb: 16,
        c: 64,
        ih: 112,
        iw: 112,
        oh: 56,
        ow: 56,
        kh: 3,
        kw: 3,
        sh: 2,
        sw: 2,
        ph: 1,
        pw: 1,
        count_pad: true,
    };
    let x: Vec<f32> = (0..p.src_len())
        .map(|i| ((i * 7919) % 1000) as f32)
        .collect();
    let (mut py, mut argmax) = (vec![0.0; p.dst_len()], vec![0u32; p.dst_len()]);
    let (src, dst) = (p.src_len() * 4, p.dst_len() * 4);
    time("max pool fwd", src + 2 * dst, || {
        max_fwd(isa, &p, &x, &mut py, &mut argmax)
    });
    let mut dx = vec![0.0; p.src_len()];
    time("max pool bwd", src + 2 * dst, || {
        max_bwd(&p, &py, &argmax, &mut dx)
    });
}
