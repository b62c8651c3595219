//! The graph API's three directions on a GPU against the CPU reference,
//! in every dtype and layout: the fastest plan of each direction, as
//! `conv --api graph --algo auto` takes it. They need a handle, hence a
//! GPU, and skip without one (`no_gpu_for_test`); what runs without one is
//! in `backend::cuda::cudnn_graph::tests`. Under `cuda` so that the GPU
//! test filters (`::cuda`) select them.

use super::{GpuConv, Prepared};
use crate::backend::cuda::{no_gpu_for_test, Gpu};
use crate::core::{DType, Layout};
use crate::ops::conv::cudnn_algos::{family_tolerance, Family};
use crate::ops::conv::graph_conv::fastest;
use crate::ops::conv::{reference_outputs, worst_rel_err, ConvTensors};
use cnnbench_kernels::conv::{reduction_len, ConvShape, Direction};

/// A 3x3 stride-2 convolution and a grouped 1x1 one.
fn shapes() -> [ConvShape; 2] {
    let three = ConvShape {
        mb: 2,
        g: 1,
        ic: 16,
        ih: 9,
        iw: 9,
        oc: 32,
        oh: 5,
        ow: 5,
        kh: 3,
        kw: 3,
        sh: 2,
        sw: 2,
        ph: 1,
        pw: 1,
        dh: 0,
        dw: 0,
    };
    let grouped = ConvShape {
        g: 2,
        ic: 16,
        ih: 7,
        iw: 7,
        oc: 16,
        oh: 7,
        ow: 7,
        kh: 1,
        kw: 1,
        sh: 1,
        sw: 1,
        ph: 0,
        pw: 0,
        ..three
    };
    [three, grouped]
}

/// bf16 and TF32 need compute capability 8.0.
fn runs_here(gpu: &Gpu, d: DType) -> bool {
    let major: u32 = gpu
        .info
        .compute_capability
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    !matches!(d, DType::Bf16 | DType::Tf32) || major >= 8
}

fn fastest_prepared(conv: &mut GpuConv, dir: Direction, what: &str) -> Prepared {
    let (plans, refused) = conv
        .graph_candidates(dir, 256 << 20)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(!plans.is_empty(), "{what}: no plan ({refused:?})");
    if conv.dtype == DType::F32 {
        for p in &plans {
            assert!(
                !p.notes.contains(&"tensor_core"),
                "{what}: {}",
                p.describe()
            );
        }
    }
    let times = conv
        .graph_times(dir, &plans, &|| false)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let i = fastest(&times).unwrap_or_else(|| panic!("{what}: no plan ran"));
    let plan = plans.into_iter().nth(i).expect("one of the plans");
    conv.prepare_graph(dir, plan, false)
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

#[test]
fn graph_api_matches_the_reference_in_every_direction_dtype_and_layout() {
    let gpu = match Gpu::open() {
        Ok(g) => g,
        Err(e) => return no_gpu_for_test(&e),
    };
    for p in shapes() {
        for dtype in DType::ALL.into_iter().filter(|&d| runs_here(&gpu, d)) {
            let mut t = ConvTensors::random(&p, 11);
            for v in [&mut t.src, &mut t.wei, &mut t.bias, &mut t.diff_dst] {
                dtype.round_in_place(v);
            }
            for layout in [Layout::Nhwc, Layout::Nchw] {
                let mut conv = GpuConv::new(&gpu, &t, dtype, layout, 1, None)
                    .unwrap_or_else(|e| panic!("{dtype} {layout}: {e}"));
                for dir in Direction::ALL {
                    let what = format!("g{} k{} {dtype} {layout} {}", p.g, p.kh, dir.name());
                    let want = reference_outputs(&t, dir, false);
                    let prepared = fastest_prepared(&mut conv, dir, &what);
                    conv.poison(dir).unwrap();
                    conv.run(&prepared)
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    gpu.synchronize().unwrap();
                    conv.download(dir, &mut t).unwrap();
                    let err = worst_rel_err(&t, dir, false, &want);
                    let transform = prepared.graph.is_some_and(|g| g.transform);
                    let family = if transform { Family::Fft } else { Family::Gemm };
                    let tol = family_tolerance(dtype, family, reduction_len(&p, dir));
                    let name = conv.kernel_name(&prepared);
                    assert!(err <= tol, "{what} {name}: error {err} over {tol}");
                }
            }
        }
    }
}
