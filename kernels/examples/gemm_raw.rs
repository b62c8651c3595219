//! Throwaway: raw gemm crate speed on one thread for conv-like shapes.
use std::time::Instant;
fn bench(m: usize, n: usize, k: usize, lt: bool, acc: bool) -> f64 {
    let a = vec![1.0f32; m * k];
    let b = vec![1.0f32; k * n];
    let mut c = vec![0.0f32; m * n];
    let (lrs, lcs) = if lt { (1isize, m as isize) } else { (k as isize, 1isize) };
    let mut best = f64::MAX;
    let reps = ((2e9 / (2.0 * (m * n * k) as f64)) as usize).clamp(3, 200);
    for _ in 0..reps {
        let t = Instant::now();
        unsafe {
            gemm::gemm(m, n, k, c.as_mut_ptr(), 1, n as isize, acc, a.as_ptr(), lcs, lrs, b.as_ptr(), 1, n as isize, if acc {1.0} else {0.0}, 1.0, false, false, false, gemm::Parallelism::None);
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    2.0 * (m * n * k) as f64 / best / 1e9
}
fn main() {
    let peak = cnnbench_kernels::peak::measure_gflops(cnnbench_kernels::Isa::detect(), 1, 3);
    println!("peak1 {peak:.1}");
    let args: Vec<usize> = std::env::args().skip(1).map(|s| s.parse().unwrap()).collect();
    let lt = std::env::var("LT").is_ok();
    let acc = std::env::var("ACC").is_ok();
    for ms in args.chunks(3) {
        let g = bench(ms[0], ms[1], ms[2], lt, acc);
        println!("m={} n={} k={} : {:.1} GFLOP/s ({:.0}%)", ms[0], ms[1], ms[2], g, g / peak * 100.0);
    }
}
