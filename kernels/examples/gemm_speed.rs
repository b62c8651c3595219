//! Throwaway: time im2col_gemm on ResNet-50 layers (untracked).
use cnnbench_kernels::conv::{self, ConvArgs, ConvShape, Direction};
use cnnbench_kernels::rng::fill_uniform;
use cnnbench_kernels::Isa;
use std::time::Instant;

#[repr(C)]
struct Timespec {
    sec: i64,
    nsec: i64,
}
extern "C" {
    fn clock_gettime(clk: i32, tp: *mut Timespec) -> i32;
}
/// Process CPU seconds (all threads): immune to being descheduled on a busy box.
fn cpu_now() -> f64 {
    let mut t = Timespec { sec: 0, nsec: 0 };
    unsafe { clock_gettime(2, &mut t) };
    t.sec as f64 + t.nsec as f64 * 1e-9
}

#[allow(clippy::too_many_arguments)]
fn shape(mb: usize, ic: usize, ih: usize, oc: usize, k: usize, s: usize, p: usize) -> ConvShape {
    let oh = (ih + 2 * p - k) / s + 1;
    ConvShape { mb, g: 1, ic, ih, iw: ih, oc, oh, ow: oh, kh: k, kw: k, sh: s, sw: s, ph: p, pw: p, dh: 0, dw: 0 }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let threads: usize = std::env::var("T").ok().and_then(|v| v.parse().ok()).unwrap_or(2);
    let reps: usize = std::env::var("REPS").ok().and_then(|v| v.parse().ok()).unwrap_or(10);
    let algo_name = std::env::var("ALGO").unwrap_or("im2col_gemm".into());
    let cpu_mode = std::env::var("WALL").is_err();
    let filter = args.get(1).cloned().unwrap_or_default();
    let dirs = args.get(2).cloned().unwrap_or("fwd,bwd-data,bwd-filter".into());
    rayon::ThreadPoolBuilder::new().num_threads(threads).build_global().unwrap();
    let peak = cnnbench_kernels::peak::measure_gflops(Isa::detect(), threads, 3);
    println!("peak {peak:.1} GFLOP/s on {threads} threads");
    let mb = 16;
    let layers = [
        ("3x3_64_56", shape(mb, 64, 56, 64, 3, 1, 1)),
        ("3x3_128_28", shape(mb, 128, 28, 128, 3, 1, 1)),
        ("3x3_256_14", shape(mb, 256, 14, 256, 3, 1, 1)),
        ("3x3_512_7", shape(mb, 512, 7, 512, 3, 1, 1)),
        ("3x3s2_128_56", shape(mb, 128, 56, 128, 3, 2, 1)),
        ("3x3s2_256_28", shape(mb, 256, 28, 256, 3, 2, 1)),
        ("3x3s2_512_14", shape(mb, 512, 14, 512, 3, 2, 1)),
        ("1x1_64_64_56", shape(mb, 64, 56, 64, 1, 1, 0)),
        ("1x1_64_256_56", shape(mb, 64, 56, 256, 1, 1, 0)),
        ("1x1_256_64_56", shape(mb, 256, 56, 64, 1, 1, 0)),
        ("1x1_1024_256_14", shape(mb, 1024, 14, 256, 1, 1, 0)),
        ("1x1_256_1024_14", shape(mb, 256, 14, 1024, 1, 1, 0)),
        ("1x1_2048_512_7", shape(mb, 2048, 7, 512, 1, 1, 0)),
        ("1x1_512_2048_7", shape(mb, 512, 7, 2048, 1, 1, 0)),
        ("1x1s2_256_512_56", shape(mb, 256, 56, 512, 1, 2, 0)),
        ("1x1s2_1024_2048_14", shape(mb, 1024, 14, 2048, 1, 2, 0)),
        ("7x7s2_3_64_224", shape(mb, 3, 224, 64, 7, 2, 3)),
    ];
    let algo = conv::find_algorithm(&algo_name).expect("algo");
    let mut pct: Vec<Vec<f64>> = vec![vec![]; 3];
    for (name, p) in layers.iter() {
        if !name.contains(&filter) {
            continue;
        }
        let mut src = vec![0f32; p.src_len()];
        let mut wei = vec![0f32; p.wei_len()];
        let mut bias = vec![0f32; p.oc];
        let mut dd = vec![0f32; p.dst_len()];
        fill_uniform(&mut src, 1, 1.0);
        fill_uniform(&mut wei, 2, 1.0);
        fill_uniform(&mut bias, 3, 1.0);
        fill_uniform(&mut dd, 4, 1.0);
        let mut dst = vec![0f32; p.dst_len()];
        let mut dsrc = vec![0f32; p.src_len()];
        let mut dwei = vec![0f32; p.wei_len()];
        let mut dbias = vec![0f32; p.oc];
        let mut line = format!("{name:20}");
        for (di, dir) in Direction::ALL.into_iter().enumerate() {
            if !dirs.contains(dir.name()) {
                continue;
            }
            let mut plan = algo.plan(p, dir, Isa::detect());
            let mut run = |plan: &mut Box<dyn conv::ConvPlan>| match dir {
                Direction::Fwd => plan.execute(ConvArgs::Fwd { src: &src, wei: &wei, bias: Some(&bias), dst: &mut dst }),
                Direction::BwdData => plan.execute(ConvArgs::BwdData { diff_dst: &dd, wei: &wei, diff_src: &mut dsrc }),
                Direction::BwdFilter => plan.execute(ConvArgs::BwdFilter {
                    src: &src,
                    diff_dst: &dd,
                    diff_wei: &mut dwei,
                    diff_bias: Some(&mut dbias),
                }),
            };
            run(&mut plan);
            run(&mut plan);
            let mut ts: Vec<f64> = Vec::new();
            let mut cs: Vec<f64> = Vec::new();
            for _ in 0..reps {
                let (t, c) = (Instant::now(), cpu_now());
                run(&mut plan);
                cs.push((cpu_now() - c) / threads as f64);
                ts.push(t.elapsed().as_secs_f64());
            }
            ts.sort_by(|a, b| a.partial_cmp(b).unwrap());
            cs.sort_by(|a, b| a.partial_cmp(b).unwrap());
            let gf = p.flops() as f64 / ts[reps / 2] / 1e9;
            let gc = p.flops() as f64 / ts[0] / 1e9;
            let cpeak = 247.0 * threads as f64;
            pct[di].push(if cpu_mode { gc / cpeak * 100.0 } else { gf / peak * 100.0 });
            line += &format!(
                " {:>10} {:6.1} ({:4.1}%) best {:6.1} ({:4.1}%)",
                dir.name(),
                gf,
                gf / peak * 100.0,
                gc,
                gc / cpeak * 100.0
            );
        }
        println!("{line}");
    }
    for (di, dir) in Direction::ALL.into_iter().enumerate() {
        let mut v = pct[di].clone();
        if v.is_empty() {
            continue;
        }
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        println!("median {dir}: {:.1}% of peak", v[v.len() / 2]);
    }
}
