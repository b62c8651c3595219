//! NormConv on a GPU against the host reference: the forward on a 1x1
//! shape in f16 and a 3x3 stride-2 one in bf16 (ResNet-50's kinds,
//! channels in multiples of 8), the data gradient on the 3x3 in f16, the
//! weight gradient on the 1x1 in bf16; the fastest plan of those runtime
//! fusion offers. Needs a
//! handle, hence a GPU; skips without one. What runs without one is in
//! `backend::cuda::cudnn_graph::tests`. Under `cuda` so that the GPU test
//! filters (`::cuda`) select it.

use crate::backend::cuda::{no_gpu_for_test, Gpu};
use crate::core::DType;
use crate::ops::conv::cudnn_algos::{family_tolerance, Family};
use crate::ops::conv::norm_conv::{errors, random_inputs, reference, GpuNormConv};
use cnnbench_kernels::conv::{reduction_len, ConvShape, Direction};

fn shapes() -> [ConvShape; 2] {
    let one = ConvShape {
        mb: 2,
        g: 1,
        ic: 32,
        ih: 8,
        iw: 8,
        oc: 64,
        oh: 8,
        ow: 8,
        kh: 1,
        kw: 1,
        sh: 1,
        sw: 1,
        ph: 0,
        pw: 0,
        dh: 0,
        dw: 0,
    };
    let three = ConvShape {
        ic: 64,
        oc: 32,
        ih: 9,
        iw: 9,
        oh: 5,
        ow: 5,
        kh: 3,
        kw: 3,
        sh: 2,
        sw: 2,
        ph: 1,
        pw: 1,
        ..one
    };
    [one, three]
}

#[test]
fn norm_conv_matches_the_reference() {
    let gpu = match Gpu::open() {
        Ok(g) => g,
        Err(e) => return no_gpu_for_test(&e),
    };
    // Four graphs, not twelve: each plan compiles at run time (seconds),
    // and this runs inside verify.sh's capped GPU test step. A direction
    // runtime fusion refuses here fails with cuDNN's reasons.
    let [one, three] = shapes();
    let cases = [
        (Direction::Fwd, one, DType::F16),
        (Direction::Fwd, three, DType::Bf16),
        (Direction::BwdData, three, DType::F16),
        (Direction::BwdFilter, one, DType::Bf16),
    ];
    // Every case runs, whatever an earlier one did, so that one GPU run
    // says which graphs runtime fusion takes here and which it does not.
    let mut failed = Vec::new();
    for (dir, p, dtype) in cases {
        let what = format!("{dir} k{} {dtype}", p.kh);
        match one_case(&gpu, dir, &p, dtype) {
            Ok(line) => eprintln!("{what}: ok: {line}"),
            Err(e) => {
                eprintln!("{what}: FAILED: {e}");
                failed.push(format!("{what}: {e}"));
            }
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("; "));
}

/// One graph planned, run from poisoned outputs and compared with the
/// reference; what was chosen, or why not.
fn one_case(gpu: &Gpu, dir: Direction, p: &ConvShape, dtype: DType) -> Result<String, String> {
    let inp = random_inputs(dir, p, dtype, 40);
    let want = reference(dir, p, &inp);
    let mut nc = GpuNormConv::new(gpu, dir, p, dtype, &inp).map_err(|e| e.to_string())?;
    let planned = nc.plan(256 << 20, &|| false).map_err(|e| e.to_string())?;
    let (_, name, ms) = nc.chosen().ok_or("not planned")?;
    nc.poison().map_err(|e| e.to_string())?;
    nc.run().map_err(|e| e.to_string())?;
    let got = nc.download().map_err(|e| e.to_string())?;
    // The convolution's inputs are rounded to the dtype inside the engine
    // (the reference keeps the activation in f32), and its output is
    // stored in the dtype: the dtype's tolerance for a convolution, as
    // `conv --norm-conv --check` holds it to.
    let tol = family_tolerance(dtype, Family::Gemm, reduction_len(p, dir));
    let errs = errors(&got, &want);
    let over: Vec<String> = errs
        .iter()
        .filter(|(_, e)| *e > tol)
        .map(|(field, e)| format!("{field} error {e} over {tol}"))
        .collect();
    if !over.is_empty() {
        return Err(format!("{name}: {}", over.join(", ")));
    }
    Ok(format!("{name} {ms:.4} ms, errors {errs:?}; {planned:?}"))
}
