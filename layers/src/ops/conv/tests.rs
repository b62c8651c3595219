//! Tests every backend runs: the same body, whatever the device.

use super::cpu::CpuConv;
use super::*;
use cnnbench_kernels::conv::{algorithms, find_algorithm};
use cnnbench_kernels::Isa;

fn small() -> ConvShape {
    ConvShape {
        mb: 2,
        g: 1,
        ic: 5,
        ih: 7,
        iw: 6,
        oc: 9,
        oh: 4,
        ow: 3,
        kh: 3,
        kw: 3,
        sh: 2,
        sw: 2,
        ph: 1,
        pw: 1,
        dh: 0,
        dw: 0,
    }
}

#[test]
fn random_inputs_are_seeded_and_never_zero() {
    let a = ConvTensors::random(&small(), 7);
    let b = ConvTensors::random(&small(), 7);
    assert_eq!(a.src, b.src);
    assert!(a
        .src
        .iter()
        .chain(&a.wei)
        .chain(&a.diff_dst)
        .all(|&x| x != 0.0 && x.abs() <= 1.0));
    assert_ne!(a.src, ConvTensors::random(&small(), 8).src);
    assert!(a.dst.iter().all(|x| x.is_nan()), "outputs start poisoned");
}

#[test]
fn every_cpu_algorithm_matches_the_reference_in_every_direction() {
    let mut t = ConvTensors::random(&small(), 3);
    let isa = Isa::detect();
    let mut ran = 0;
    for algo in algorithms().iter().copied().chain(find_algorithm("ref")) {
        for dir in Direction::ALL {
            if algo.supports(&t.shape, dir, isa).is_err() {
                continue;
            }
            for bias in [true, false] {
                let want = reference_outputs(&t, dir, bias);
                t.poison(dir);
                CpuConv::new(algo, &t, dir, isa, bias).run(&mut t);
                let err = worst_rel_err(&t, dir, bias, &want);
                assert!(
                    err <= algo.tolerance(&t.shape, dir),
                    "{} {dir} bias={bias}: {err}",
                    algo.name()
                );
                ran += 1;
            }
        }
    }
    assert!(ran >= 6);
}

#[test]
fn an_unwritten_output_fails_the_check() {
    let mut t = ConvTensors::random(&small(), 3);
    let want = reference_outputs(&t, Direction::Fwd, true);
    t.poison(Direction::Fwd);
    // NaN never compares below a threshold: the error is reported as infinite.
    assert!(worst_rel_err(&t, Direction::Fwd, true, &want).is_infinite());
}
