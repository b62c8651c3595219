//! Every fast convolution algorithm, on every ISA this CPU has, in every
//! direction, against the f64 reference on randomised awkward problems.

use cnnbench_kernels::conv::{self, reference, ConvArgs, ConvShape, Direction};
use cnnbench_kernels::rng::{fill_uniform, SplitMix64};
use cnnbench_kernels::Isa;

/// Builds a shape from benchdnn-like fields, computing oh/ow.
#[allow(clippy::too_many_arguments)]
fn shape(
    mb: usize,
    g: usize,
    ic: usize,
    ih: usize,
    iw: usize,
    oc: usize,
    kh: usize,
    kw: usize,
    sh: usize,
    sw: usize,
    ph: usize,
    pw: usize,
    dh: usize,
    dw: usize,
) -> ConvShape {
    let ext_h = (kh - 1) * (dh + 1) + 1;
    let ext_w = (kw - 1) * (dw + 1) + 1;
    let oh = (ih + 2 * ph - ext_h) / sh + 1;
    let ow = (iw + 2 * pw - ext_w) / sw + 1;
    ConvShape {
        mb,
        g,
        ic,
        ih,
        iw,
        oc,
        oh,
        ow,
        kh,
        kw,
        sh,
        sw,
        ph,
        pw,
        dh,
        dw,
    }
}

/// Hand-picked awkward problems: odd sizes, stride 2 and 3, padding,
/// asymmetric kernels, groups, depthwise, dilation, 1x1, tails of every
/// vector width.
#[rustfmt::skip]
fn fixed_problems() -> Vec<ConvShape> {
    vec![
        shape(2, 1, 16, 9, 9, 32, 3, 3, 1, 1, 1, 1, 0, 0),    // plain 3x3
        shape(1, 1, 3, 11, 13, 17, 3, 3, 1, 1, 1, 1, 0, 0),   // odd channels
        shape(2, 1, 7, 10, 9, 5, 3, 3, 2, 2, 1, 1, 0, 0),     // stride 2
        shape(1, 1, 8, 13, 11, 24, 3, 3, 3, 3, 0, 0, 0, 0),   // stride 3, no pad
        shape(2, 1, 12, 8, 10, 20, 1, 5, 1, 1, 0, 2, 0, 0),   // asymmetric 1x5
        shape(1, 1, 5, 12, 9, 9, 4, 2, 2, 1, 1, 0, 0, 0),     // even, asymmetric stride
        shape(2, 2, 12, 7, 7, 18, 3, 3, 1, 1, 1, 1, 0, 0),    // 2 groups
        shape(1, 4, 16, 9, 8, 32, 3, 3, 2, 2, 1, 1, 0, 0),    // 4 groups, stride 2
        shape(2, 24, 24, 9, 9, 24, 3, 3, 1, 1, 1, 1, 0, 0),   // depthwise
        shape(1, 16, 16, 10, 10, 32, 3, 3, 2, 2, 1, 1, 0, 0), // depthwise x2 multiplier
        shape(1, 1, 8, 13, 13, 16, 3, 3, 1, 1, 2, 2, 1, 1),   // dilation 1 (skip 1)
        shape(2, 1, 6, 15, 14, 10, 3, 2, 1, 2, 3, 1, 2, 1),   // mixed dilation
        shape(3, 1, 64, 5, 5, 48, 1, 1, 1, 1, 0, 0, 0, 0),    // 1x1
        shape(2, 1, 33, 7, 9, 65, 1, 1, 2, 2, 0, 0, 0, 0),    // 1x1 stride 2, tails
        shape(1, 1, 3, 23, 23, 16, 7, 7, 2, 2, 3, 3, 0, 0),   // 7x7 s2 stem
        shape(1, 1, 4, 4, 4, 8, 5, 5, 1, 1, 2, 2, 0, 0),      // kernel as large as input
        shape(1, 1, 70, 6, 5, 130, 3, 3, 1, 1, 1, 1, 0, 0),   // channels past 64/128
        shape(1, 1, 2, 5, 31, 3, 1, 3, 1, 1, 0, 1, 0, 0),     // long rows, tiny channels
        shape(2, 1, 64, 6, 6, 64, 3, 3, 1, 1, 1, 1, 0, 0),    // full vectors, 3x3
        shape(1, 1, 32, 9, 9, 96, 3, 3, 2, 2, 1, 1, 0, 0),    // full vectors, stride 2
        shape(1, 1, 8, 12, 12, 16, 5, 5, 1, 1, 0, 0, 0, 0),  // 25 taps in two passes, no padding
        shape(1, 1, 8, 40, 40, 16, 3, 3, 1, 1, 1, 1, 0, 0),  // padding under 4%: tiles inside and by the border
        shape(1, 1, 8, 64, 64, 16, 5, 5, 1, 1, 2, 2, 0, 0),  // the same with 25 taps: two passes, both flat
    ]
}

/// Random small problems.
fn random_problems(count: usize, seed: u64) -> Vec<ConvShape> {
    let mut rng = SplitMix64::new(seed);
    let mut pick = |lo: usize, hi: usize| lo + (rng.next_u64() as usize) % (hi - lo + 1);
    let mut out = Vec::new();
    while out.len() < count {
        let g = [1, 1, 1, 2, 3][pick(0, 4)];
        let icg = pick(1, 20);
        let ocg = pick(1, 40);
        let (kh, kw) = (pick(1, 4), pick(1, 4));
        let (sh, sw) = (pick(1, 3), pick(1, 3));
        let (dh, dw) = (pick(0, 1) * pick(0, 2), pick(0, 1) * pick(0, 2));
        let (ph, pw) = (pick(0, kh), pick(0, kw));
        let (ih, iw) = (pick(1, 14), pick(1, 14));
        let ext_h = (kh - 1) * (dh + 1) + 1;
        let ext_w = (kw - 1) * (dw + 1) + 1;
        if ih + 2 * ph < ext_h || iw + 2 * pw < ext_w {
            continue;
        }
        let mb = pick(1, 3);
        out.push(shape(
            mb,
            g,
            g * icg,
            ih,
            iw,
            g * ocg,
            kh,
            kw,
            sh,
            sw,
            ph,
            pw,
            dh,
            dw,
        ));
    }
    out
}

struct Tensors {
    src: Vec<f32>,
    wei: Vec<f32>,
    bias: Vec<f32>,
    diff_dst: Vec<f32>,
}

fn tensors(p: &ConvShape, seed: u64) -> Tensors {
    let mut t = Tensors {
        src: vec![0.0; p.src_len()],
        wei: vec![0.0; p.wei_len()],
        bias: vec![0.0; p.bias_len()],
        diff_dst: vec![0.0; p.dst_len()],
    };
    fill_uniform(&mut t.src, seed, 1.0);
    fill_uniform(&mut t.wei, seed + 1, 1.0);
    fill_uniform(&mut t.bias, seed + 2, 1.0);
    fill_uniform(&mut t.diff_dst, seed + 3, 1.0);
    t
}

/// Outputs start as NaN so that any element an algorithm fails to write
/// shows up as an infinite error.
const POISON: f32 = f32::NAN;

/// Runs one direction of `algo` (poisoned outputs, twice to catch state left
/// over between calls) and returns the relative error of every output.
fn check_one(
    algo: &dyn conv::ConvAlgo,
    isa: Isa,
    p: &ConvShape,
    dir: Direction,
    t: &Tensors,
) -> Vec<(String, f64)> {
    let mut plan = algo.plan(p, dir, isa);
    let mut errs = Vec::new();
    for _ in 0..2 {
        match dir {
            Direction::Fwd => {
                let mut want = vec![0.0; p.dst_len()];
                reference::fwd(p, &t.src, &t.wei, Some(&t.bias), &mut want);
                let mut got = vec![POISON; p.dst_len()];
                plan.execute(ConvArgs::Fwd {
                    src: &t.src,
                    wei: &t.wei,
                    bias: Some(&t.bias),
                    dst: &mut got,
                });
                errs.push(("dst".into(), reference::rel_l2_error(&got, &want)));
                reference::fwd(p, &t.src, &t.wei, None, &mut want);
                got.fill(POISON);
                plan.execute(ConvArgs::Fwd {
                    src: &t.src,
                    wei: &t.wei,
                    bias: None,
                    dst: &mut got,
                });
                errs.push(("dst(no bias)".into(), reference::rel_l2_error(&got, &want)));
            }
            Direction::BwdData => {
                let mut want = vec![0.0; p.src_len()];
                reference::bwd_data(p, &t.diff_dst, &t.wei, &mut want);
                let mut got = vec![POISON; p.src_len()];
                plan.execute(ConvArgs::BwdData {
                    diff_dst: &t.diff_dst,
                    wei: &t.wei,
                    diff_src: &mut got,
                });
                errs.push(("diff_src".into(), reference::rel_l2_error(&got, &want)));
            }
            Direction::BwdFilter => {
                let mut want_w = vec![0.0; p.wei_len()];
                let mut want_b = vec![0.0; p.oc];
                reference::bwd_filter(p, &t.src, &t.diff_dst, &mut want_w, Some(&mut want_b));
                let mut got_w = vec![POISON; p.wei_len()];
                let mut got_b = vec![POISON; p.oc];
                plan.execute(ConvArgs::BwdFilter {
                    src: &t.src,
                    diff_dst: &t.diff_dst,
                    diff_wei: &mut got_w,
                    diff_bias: Some(&mut got_b),
                });
                errs.push(("diff_wei".into(), reference::rel_l2_error(&got_w, &want_w)));
                errs.push(("diff_bias".into(), reference::rel_l2_error(&got_b, &want_b)));
                got_w.fill(POISON);
                plan.execute(ConvArgs::BwdFilter {
                    src: &t.src,
                    diff_dst: &t.diff_dst,
                    diff_wei: &mut got_w,
                    diff_bias: None,
                });
                errs.push((
                    "diff_wei(no bias)".into(),
                    reference::rel_l2_error(&got_w, &want_w),
                ));
            }
        }
    }
    errs
}

fn check_all(problems: &[ConvShape]) {
    let mut failures = Vec::new();
    let mut ran = 0;
    for algo in conv::algorithms() {
        for isa in Isa::supported() {
            for (i, p) in problems.iter().enumerate() {
                let t = tensors(p, 1000 + i as u64);
                for dir in Direction::ALL {
                    if let Err(why) = algo.supports(p, dir, isa) {
                        assert!(
                            !why.is_empty(),
                            "{} refused {p:?} {dir} without a reason",
                            algo.name()
                        );
                        continue;
                    }
                    ran += 1;
                    for (what, err) in check_one(*algo, isa, p, dir, &t) {
                        if err.is_nan() || err > algo.tolerance(p, dir) {
                            failures.push(format!(
                                "{} {isa} {dir} {what}: rel_err {err:e} on {p:?}",
                                algo.name()
                            ));
                        }
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(ran > 0, "no algorithm ran");
}

#[test]
fn fixed_problems_match_reference() {
    check_all(&fixed_problems());
}

#[test]
fn random_problems_match_reference() {
    check_all(&random_problems(40, 0xC0FFEE));
}

/// Every general algorithm supports every direction of the ResNet-50 kinds
/// of layer on the best ISA here: these are what users time first.
/// (Both Winograd algorithms are for 3x3 kernels at stride 1 only, and
/// say so; `winograd_panels` also refuses backward-filter.)
#[test]
fn common_shapes_are_supported_by_every_algorithm() {
    let isa = Isa::detect();
    let common = [
        shape(2, 1, 64, 14, 14, 64, 3, 3, 1, 1, 1, 1, 0, 0),
        shape(2, 1, 256, 14, 14, 64, 1, 1, 1, 1, 0, 0, 0, 0),
        shape(2, 1, 128, 14, 14, 128, 3, 3, 2, 2, 1, 1, 0, 0),
        shape(2, 1, 256, 14, 14, 512, 1, 1, 2, 2, 0, 0, 0, 0),
        shape(2, 1, 3, 32, 32, 64, 7, 7, 2, 2, 3, 3, 0, 0),
    ];
    for algo in conv::algorithms()
        .iter()
        .filter(|a| !a.name().starts_with("winograd"))
    {
        for p in &common {
            for dir in Direction::ALL {
                assert!(
                    algo.supports(p, dir, isa).is_ok(),
                    "{} does not support {dir} {p:?}",
                    algo.name()
                );
            }
        }
    }
}
