//! All three directions on every ISA this CPU has, against the f64 reference:
//! padding 0-2, sizes that leave partial tiles, channel counts around the
//! 64-lane blocks, and chunks of six tiles to all of them; forward and
//! backward-data in both schedules (chunks of tiles, panels of output
//! channels).

use super::*;
use crate::conv::reference;
use crate::rng::fill_uniform;

#[allow(clippy::too_many_arguments)]
fn shape(mb: usize, ic: usize, ih: usize, iw: usize, oc: usize, ph: usize, pw: usize) -> ConvShape {
    ConvShape {
        mb,
        g: 1,
        ic,
        ih,
        iw,
        oc,
        oh: ih + 2 * ph - 2,
        ow: iw + 2 * pw - 2,
        kh: 3,
        kw: 3,
        sh: 1,
        sw: 1,
        ph,
        pw,
        dh: 0,
        dw: 0,
    }
}

/// Runs `dir` of `p` twice on poisoned outputs and returns the worse
/// relative L2 error against the reference.
fn error(
    p: &ConvShape,
    dir: Direction,
    isa: Isa,
    scratch_bytes: usize,
    panels: Option<usize>,
) -> f64 {
    let mut src = vec![0.0; p.src_len()];
    let mut wei = vec![0.0; p.wei_len()];
    let mut bias = vec![0.0; p.oc];
    let mut dy = vec![0.0; p.dst_len()];
    fill_uniform(&mut src, 1, 1.0);
    fill_uniform(&mut wei, 2, 1.0);
    fill_uniform(&mut bias, 3, 1.0);
    fill_uniform(&mut dy, 4, 1.0);
    let mut plan = WinogradPlan::with_scratch_bytes(p, dir, isa, scratch_bytes, panels);
    let mut worst = 0.0f64;
    for _ in 0..2 {
        let err = match dir {
            Direction::Fwd => {
                let mut want = vec![0.0; p.dst_len()];
                reference::fwd(p, &src, &wei, Some(&bias), &mut want);
                let mut got = vec![f32::NAN; p.dst_len()];
                plan.execute(ConvArgs::Fwd {
                    src: &src,
                    wei: &wei,
                    bias: Some(&bias),
                    dst: &mut got,
                });
                reference::rel_l2_error(&got, &want)
            }
            Direction::BwdFilter => {
                let mut want_w = vec![0.0; p.wei_len()];
                let mut want_b = vec![0.0; p.oc];
                reference::bwd_filter(p, &src, &dy, &mut want_w, Some(&mut want_b));
                let mut got_w = vec![f32::NAN; p.wei_len()];
                let mut got_b = vec![f32::NAN; p.oc];
                plan.execute(ConvArgs::BwdFilter {
                    src: &src,
                    diff_dst: &dy,
                    diff_wei: &mut got_w,
                    diff_bias: Some(&mut got_b),
                });
                reference::rel_l2_error(&got_w, &want_w)
                    .max(reference::rel_l2_error(&got_b, &want_b))
            }
            Direction::BwdData => {
                let mut want = vec![0.0; p.src_len()];
                reference::bwd_data(p, &dy, &wei, &mut want);
                let mut got = vec![f32::NAN; p.src_len()];
                plan.execute(ConvArgs::BwdData {
                    diff_dst: &dy,
                    wei: &wei,
                    diff_src: &mut got,
                });
                reference::rel_l2_error(&got, &want)
            }
        };
        worst = if err.is_nan() {
            f64::NAN
        } else {
            worst.max(err)
        };
    }
    worst
}

#[test]
fn every_direction_matches_the_reference_on_every_isa() {
    let problems = [
        shape(2, 16, 8, 8, 32, 1, 1),   // whole tiles
        shape(1, 3, 11, 13, 17, 1, 1),  // partial tiles, odd channels
        shape(2, 70, 7, 9, 130, 1, 1),  // channels past one and two blocks
        shape(1, 64, 14, 14, 64, 1, 1), // ResNet-50's layer3 size
        shape(1, 8, 10, 9, 5, 0, 0),    // no padding
        shape(1, 5, 6, 7, 9, 2, 2),     // padding 2
        shape(3, 9, 5, 6, 12, 2, 0),    // mixed padding
        shape(1, 4, 3, 3, 4, 1, 1),     // one tile, mostly padding
        shape(2, 8, 48, 48, 8, 1, 1),   // 288 tiles: backward-filter past one KC (256)
        shape(1, 300, 6, 6, 70, 1, 1),  // forward reduction past one KC: two passes
        shape(1, 70, 6, 6, 300, 1, 1),  // the same for backward-data
    ];
    let mut failures = Vec::new();
    for isa in Isa::supported() {
        for p in &problems {
            for dir in Direction::ALL {
                assert!(
                    Winograd::BY_SIZE.supports(p, dir, Isa::detect()).is_ok(),
                    "{p:?}"
                );
                let sizes = match dir {
                    Direction::BwdFilter => [1, 64 << 10, bwd_filter::CHUNK_BYTES],
                    _ => [1, 64 << 10, SCRATCH_BYTES],
                };
                // Both schedules: chunks of tiles (None) and panels of
                // output channels over one tile, 7 (partial micro-tiles)
                // or every tile an item.
                let schedules: &[Option<usize>] = match dir {
                    Direction::BwdFilter => &[None],
                    _ => &[None, Some(1), Some(7), Some(1 << 20)],
                };
                for (i, scratch_bytes) in sizes.into_iter().enumerate() {
                    // Panels do not depend on the scratch size: once.
                    let schedules = if i == 0 { schedules } else { &schedules[..1] };
                    for &panels in schedules {
                        let err = error(p, dir, isa, scratch_bytes, panels);
                        if err.is_nan() || err > Winograd::BY_SIZE.tolerance(p, dir) {
                            failures.push(format!(
                                "{isa} {dir} scratch {scratch_bytes} panels {panels:?}: {err:e} on {p:?}"
                            ));
                        }
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn refuses_what_it_cannot_run() {
    let isa = Isa::detect();
    let ok = shape(1, 8, 8, 8, 8, 1, 1);
    for p in [
        ConvShape { sh: 2, oh: 4, ..ok },
        ConvShape { kh: 5, oh: 6, ..ok },
        ConvShape { dh: 1, oh: 4, ..ok },
        ConvShape { g: 2, ..ok },
        ConvShape {
            ph: 3,
            oh: 12,
            ..ok
        },
    ] {
        let why = Winograd::BY_SIZE
            .supports(&p, Direction::Fwd, isa)
            .unwrap_err();
        assert!(!why.is_empty());
    }
}

#[test]
fn winograd_panels_takes_panels_wherever_it_runs() {
    let isa = Isa::detect();
    // Small enough that `winograd` itself keeps to chunks.
    let p = shape(2, 16, 8, 8, 32, 1, 1);
    for dir in [Direction::Fwd, Direction::BwdData] {
        assert!(Winograd::PANELS.supports(&p, dir, isa).is_ok());
        let name = |a: &dyn ConvAlgo| a.plan(&p, dir, isa).kernel_name();
        assert!(name(&Winograd::PANELS).ends_with("+panels"), "{dir}");
        assert!(!name(&Winograd::BY_SIZE).ends_with("+panels"), "{dir}");
    }
    // Backward-filter is `winograd`'s alone; and the same refusals.
    assert!(Winograd::PANELS
        .supports(&p, Direction::BwdFilter, isa)
        .is_err());
    let strided = ConvShape { sh: 2, oh: 4, ..p };
    assert!(Winograd::PANELS
        .supports(&strided, Direction::Fwd, isa)
        .is_err());
}
