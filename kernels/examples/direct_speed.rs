// Throwaway benchmark for the direct conv (untracked).
use cnnbench_kernels::conv::{self, ConvArgs, ConvShape, Direction};
use cnnbench_kernels::rng::fill_uniform;
use cnnbench_kernels::Isa;
use std::time::Instant;

#[allow(clippy::too_many_arguments)]
fn shape(mb: usize, ic: usize, ih: usize, oc: usize, k: usize, s: usize, pd: usize) -> ConvShape {
    let oh = (ih + 2 * pd - k) / s + 1;
    ConvShape { mb, g: 1, ic, ih, iw: ih, oc, oh, ow: oh, kh: k, kw: k, sh: s, sw: s, ph: pd, pw: pd, dh: 0, dw: 0 }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let filt = args.get(1).cloned().unwrap_or_default();
    let dirs = args.get(2).cloned().unwrap_or("fwd,bwd-data,bwd-filter".into());
    let algo_name = args.get(3).cloned().unwrap_or("direct".into());
    let reps: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(10);
    let layers = [
        ("3x3_64_56", shape(16, 64, 56, 64, 3, 1, 1)),
        ("3x3_128_28", shape(16, 128, 28, 128, 3, 1, 1)),
        ("3x3_256_14", shape(16, 256, 14, 256, 3, 1, 1)),
        ("3x3_512_7", shape(16, 512, 7, 512, 3, 1, 1)),
        ("3x3s2_128_56", shape(16, 128, 56, 128, 3, 2, 1)),
        ("3x3s2_256_28", shape(16, 256, 28, 256, 3, 2, 1)),
        ("3x3s2_512_14", shape(16, 512, 14, 512, 3, 2, 1)),
        ("1x1_64_256_56", shape(16, 64, 56, 256, 1, 1, 0)),
        ("1x1_256_64_56", shape(16, 256, 56, 64, 1, 1, 0)),
        ("1x1_1024_256_14", shape(16, 1024, 14, 256, 1, 1, 0)),
        ("1x1_256_1024_14", shape(16, 256, 14, 1024, 1, 1, 0)),
        ("1x1s2_256_512_56", shape(16, 256, 56, 512, 1, 2, 0)),
        ("7x7s2_3_64_224", shape(16, 3, 224, 64, 7, 2, 3)),
    ];
    let isa = Isa::detect();
    let algo = conv::find_algorithm(&algo_name).expect("algo");
    let peak = cnnbench_kernels::peak::measure_gflops(Isa::Avx512, rayon::current_num_threads(), 3);
    println!("peak {peak:.0} GFLOP/s on {} threads, isa {isa}", rayon::current_num_threads());
    for (name, p) in layers.iter() {
        if !filt.is_empty() && !name.contains(filt.as_str()) {
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
        let mut out_d = vec![0f32; p.dst_len()];
        let mut out_s = vec![0f32; p.src_len()];
        let mut out_w = vec![0f32; p.wei_len()];
        let mut out_b = vec![0f32; p.oc];
        let mut line = format!("{name:18}");
        for dir in Direction::ALL {
            if !dirs.contains(dir.name()) {
                continue;
            }
            let mut plan = algo.plan(p, dir, isa);
            let mut run = || match dir {
                Direction::Fwd => plan.execute(ConvArgs::Fwd { src: &src, wei: &wei, bias: Some(&bias), dst: &mut out_d }),
                Direction::BwdData => plan.execute(ConvArgs::BwdData { diff_dst: &dd, wei: &wei, diff_src: &mut out_s }),
                Direction::BwdFilter => plan.execute(ConvArgs::BwdFilter {
                    src: &src,
                    diff_dst: &dd,
                    diff_wei: &mut out_w,
                    diff_bias: Some(&mut out_b),
                }),
            };
            for _ in 0..3 {
                run();
            }
            let mut ts: Vec<f64> = (0..reps)
                .map(|_| {
                    let t0 = Instant::now();
                    run();
                    t0.elapsed().as_secs_f64()
                })
                .collect();
            ts.sort_by(|a, b| a.partial_cmp(b).unwrap());
            let med = ts[ts.len() / 2];
            let peak = cnnbench_kernels::peak::measure_gflops(Isa::Avx512, rayon::current_num_threads(), 5);
            let gf = p.flops() as f64 / med / 1e9;
            let best = p.flops() as f64 / ts[0] / 1e9;
            line += &format!("  {:>10} {:6.1} ({:3.0}% of {:3.0}) best {:6.1}", dir.name(), gf, 100.0 * gf / peak, peak, best);
        }
        println!("{line}");
    }
}
