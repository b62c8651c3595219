//! im2col + GEMM on the `gemm` crate, all three directions.
//!
//! - forward: im2col a chunk of output pixels (sized for L2), then one GEMM
//!   per group against the gHWIO weights, written straight into dst;
//!   single-tap layers with enough pixels (at least 768) use our own packed
//!   GEMM instead (AVX-512; on AVX2 where the reduction takes one pass),
//!   with the bias fused and the pixel rows prefetched a micro-tile ahead
//!   (see [`packed`]);
//! - backward-data: one stride-1 "forward" conv of diff_dst per stride
//!   phase, with the weights transposed per call (see [`bwd_data`]); 1x1
//!   layers of 64 output channels or more on the packed GEMM too;
//! - backward-filter: `colᵀ · diff_dst`, split over weight tiles or over
//!   pixels with a final reduction (see [`bwd_filter`]).
//!
//! Parallelism is rayon's global pool over chunks; each GEMM runs on one
//! thread. Scratch lives in the plan, one slot per pool thread.

pub(crate) mod blas;
mod bwd_data;
mod bwd_filter;
mod col2im;
mod engine;
mod fwd;
mod gather;
pub(crate) mod packed;
pub(crate) mod par;

use super::{ConvAlgo, ConvArgs, ConvPlan, ConvShape, Direction, PLAN_SMALL_BYTES};
use crate::Isa;

pub struct Im2colGemm;

impl ConvAlgo for Im2colGemm {
    fn name(&self) -> &'static str {
        "im2col_gemm"
    }

    fn supports(&self, _: &ConvShape, _: Direction, isa: Isa) -> Result<(), String> {
        blas::refusal(isa)
    }

    fn plan(&self, p: &ConvShape, dir: Direction, isa: Isa) -> Box<dyn ConvPlan> {
        let kind = match dir {
            Direction::Fwd => Kind::Fwd(fwd::FwdPlan::new(p, isa)),
            Direction::BwdData if col2im::Col2imPlan::fits(p) => {
                Kind::Col2im(col2im::Col2imPlan::new(p, isa))
            }
            Direction::BwdData => Kind::BwdData(bwd_data::BwdDataPlan::new(p, isa)),
            Direction::BwdFilter => Kind::BwdFilter(bwd_filter::BwdFilterPlan::new(p, isa)),
        };
        Box::new(Plan { p: *p, kind, isa })
    }

    fn workspace_bound(&self, p: &ConvShape, dir: Direction, isa: Isa) -> u128 {
        PLAN_SMALL_BYTES
            + match dir {
                Direction::Fwd => fwd::FwdPlan::bytes_bound(p, isa),
                Direction::BwdData if col2im::Col2imPlan::fits(p) => {
                    col2im::Col2imPlan::bytes_bound(p)
                }
                Direction::BwdData => bwd_data::BwdDataPlan::bytes_bound(p, isa),
                Direction::BwdFilter => bwd_filter::BwdFilterPlan::bytes_bound(p),
            }
    }
}

enum Kind {
    Fwd(fwd::FwdPlan),
    BwdData(bwd_data::BwdDataPlan),
    Col2im(col2im::Col2imPlan),
    BwdFilter(bwd_filter::BwdFilterPlan),
}

struct Plan {
    p: ConvShape,
    kind: Kind,
    isa: Isa,
}

impl ConvPlan for Plan {
    fn workspace_bytes(&self) -> usize {
        match &self.kind {
            Kind::Fwd(k) => k.workspace_bytes(),
            Kind::BwdData(k) => k.workspace_bytes(),
            Kind::Col2im(k) => k.workspace_bytes(),
            Kind::BwdFilter(k) => k.workspace_bytes(),
        }
    }

    fn kernel_name(&self) -> String {
        let engine = match &self.kind {
            Kind::Fwd(k) => Some(k.engine()),
            Kind::BwdData(k) => Some(k.engine()),
            Kind::Col2im(_) | Kind::BwdFilter(_) => None,
        };
        match engine.and_then(|e| e.packed_kernel()) {
            Some(name) => format!("im2col+{name}"),
            None => format!("im2col+gemm_f32({})", blas::nearest(self.isa)),
        }
    }

    fn execute(&mut self, args: ConvArgs<'_>) {
        args.assert_fits(&self.p);
        match (&mut self.kind, args) {
            (
                Kind::Fwd(k),
                ConvArgs::Fwd {
                    src,
                    wei,
                    bias,
                    dst,
                },
            ) => k.run(src, wei, bias, dst),
            (
                Kind::BwdData(k),
                ConvArgs::BwdData {
                    diff_dst,
                    wei,
                    diff_src,
                },
            ) => k.run(diff_dst, wei, diff_src),
            (
                Kind::Col2im(k),
                ConvArgs::BwdData {
                    diff_dst,
                    wei,
                    diff_src,
                },
            ) => k.run(diff_dst, wei, diff_src),
            (
                Kind::BwdFilter(k),
                ConvArgs::BwdFilter {
                    src,
                    diff_dst,
                    diff_wei,
                    diff_bias,
                },
            ) => k.run(src, diff_dst, diff_wei, diff_bias),
            (_, args) => panic!(
                "im2col_gemm plan got {} arguments for another direction",
                args.direction()
            ),
        }
    }
}

/// Paths the shared conv test's small problems never reach: wide channels
/// (per-tap backward-data, tiled backward-filter, channel blocks) and the
/// packed 1x1 path (many pixels).
#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv::{reference, TestInputs};

    #[allow(clippy::too_many_arguments)]
    fn shape(
        mb: usize,
        g: usize,
        ic: usize,
        ih: usize,
        oc: usize,
        k: usize,
        s: usize,
        p: usize,
    ) -> ConvShape {
        let oh = (ih + 2 * p - k) / s + 1;
        ConvShape {
            mb,
            g,
            ic,
            ih,
            iw: ih + 1,
            oc,
            oh,
            ow: (ih + 1 + 2 * p - k) / s + 1,
            kh: k,
            kw: k,
            sh: s,
            sw: s,
            ph: p,
            pw: p,
            dh: 0,
            dw: 0,
        }
    }

    /// Every direction of `p` against the reference on every ISA the
    /// algorithm supports here (AVX-512 and AVX2 on an AVX-512 CPU).
    fn check(p: &ConvShape) {
        for isa in Isa::supported() {
            if Im2colGemm.supports(p, Direction::Fwd, isa).is_ok() {
                check_on(p, isa);
            }
        }
    }

    fn check_on(p: &ConvShape, isa: Isa) {
        let TestInputs {
            src,
            wei,
            bias,
            diff_dst: dd,
        } = TestInputs::new(p);
        let err = |got: &[f32], want: &[f32], what: &str| {
            let e = reference::rel_l2_error(got, want);
            assert!(e <= 1e-5, "{what} on {isa}: {e:e} on {p:?}");
        };
        let (mut want, mut got) = (vec![0.0; p.dst_len()], vec![f32::NAN; p.dst_len()]);
        reference::fwd(p, &src, &wei, Some(&bias), &mut want);
        Im2colGemm
            .plan(p, Direction::Fwd, isa)
            .execute(ConvArgs::Fwd {
                src: &src,
                wei: &wei,
                bias: Some(&bias),
                dst: &mut got,
            });
        err(&got, &want, "fwd");
        let (mut want, mut got) = (vec![0.0; p.src_len()], vec![f32::NAN; p.src_len()]);
        reference::bwd_data(p, &dd, &wei, &mut want);
        let mut plan = Im2colGemm.plan(p, Direction::BwdData, isa);
        for _ in 0..2 {
            plan.execute(ConvArgs::BwdData {
                diff_dst: &dd,
                wei: &wei,
                diff_src: &mut got,
            });
            err(&got, &want, "bwd-data");
        }
        let (mut want, mut got) = (vec![0.0; p.wei_len()], vec![f32::NAN; p.wei_len()]);
        let (mut want_b, mut got_b) = (vec![0.0; p.oc], vec![f32::NAN; p.oc]);
        reference::bwd_filter(p, &src, &dd, &mut want, Some(&mut want_b));
        let mut plan = Im2colGemm.plan(p, Direction::BwdFilter, isa);
        for _ in 0..2 {
            plan.execute(ConvArgs::BwdFilter {
                src: &src,
                diff_dst: &dd,
                diff_wei: &mut got,
                diff_bias: Some(&mut got_b),
            });
            err(&got, &want, "bwd-filter");
            err(&got_b, &want_b, "bwd-bias");
        }
    }

    #[test]
    fn wide_channels_match_reference() {
        for p in [
            shape(2, 1, 96, 5, 272, 3, 1, 1),
            shape(1, 1, 64, 7, 288, 3, 2, 1),
            shape(2, 2, 80, 4, 528, 3, 1, 1),
            shape(1, 1, 32, 4, 520, 3, 1, 1),
            shape(2, 1, 16, 6, 512, 3, 2, 1),
            shape(4, 2, 6, 9, 16, 3, 2, 1),
            shape(3, 1, 40, 4, 300, 1, 1, 0),
            shape(1, 1, 24, 9, 320, 1, 2, 0),
            shape(1, 1, 300, 4, 40, 3, 1, 1),
            shape(1, 1, 3, 20, 64, 7, 2, 3),
            // Enough pixels for the packed 1x1 path: several reduction
            // passes (`packed::KC` is 256), partial panels, stride-2
            // gather and scatter.
            shape(2, 1, 520, 64, 40, 1, 1, 0),
            shape(2, 1, 40, 128, 136, 1, 2, 0),
            // Wide on both sides: reduction passes with a tail, three
            // panels, the last partial.
            shape(2, 1, 300, 64, 130, 1, 1, 0),
        ] {
            check(&p);
        }
        // Backward-filter of a 1x1 stride-1 layer with large weights, on 2
        // threads (the split depends on them): split by pixels (many per K
        // row), then by tiles (few).
        let two = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        two.install(|| {
            for p in [
                shape(2, 1, 256, 16, 544, 1, 1, 0),
                shape(1, 1, 600, 4, 256, 1, 1, 0),
            ] {
                check(&p);
            }
        });
    }

    /// The packed 1x1 GEMM streams outputs over this crate's test
    /// threshold (64 KiB) from its registers where a whole vector starts on
    /// a cache line, where the reduction takes one pass: outputs at a
    /// 64-byte, 16-byte and 4-byte aligned start (rows of 128 channels
    /// stream only at the first; of 100, also at 16 bytes; of 129, at every
    /// start), full and partial panels, no write outside the output, and
    /// reductions of two passes (which do not stream),
    /// forward (with bias) and backward-data (from a 64-channel reduction),
    /// against the reference. (A stride-2 layer's backward-data scatters
    /// its phases from a buffer, and does not stream.)
    /// A 1x1 layer just over `engine::PACKED_MIN_PIXELS` (768): 7x7 at
    /// batch 16, ResNet-50's last stage, runs the packed GEMM, forward and
    /// backward-data, and matches the reference.
    #[test]
    fn few_pixel_layers_take_the_packed_gemm() {
        for isa in Isa::supported()
            .into_iter()
            .filter(|&i| packed::available(i))
        {
            for (dir, p) in [
                (Direction::Fwd, shape(16, 1, 96, 7, 80, 1, 1, 0)),
                (Direction::BwdData, shape(16, 1, 80, 7, 96, 1, 1, 0)),
            ] {
                let inputs = TestInputs::new(&p);
                let want = inputs.want(&p, dir);
                let mut plan = Im2colGemm.plan(&p, dir, isa);
                let name = plan.kernel_name();
                assert!(
                    name.contains(&format!("{isa}_gemm_f32_6x")),
                    "{isa} {dir}: {name}"
                );
                let mut out = vec![f32::NAN; TestInputs::out_len(&p, dir)];
                inputs.execute(plan.as_mut(), dir, &mut out);
                let e = reference::rel_l2_error(&out, &want);
                assert!(e <= 1e-5, "{isa} {dir}: {e:e} on {p:?}");
            }
        }
    }

    #[test]
    fn streamed_packed_outputs_match_reference_at_every_alignment() {
        let cases = [
            // At least `engine::PACKED_MIN_PIXELS` (768) pixels each.
            (Direction::Fwd, shape(4, 1, 64, 48, 128, 1, 1, 0)),
            (Direction::Fwd, shape(4, 1, 72, 48, 100, 1, 1, 0)),
            (Direction::Fwd, shape(4, 1, 264, 48, 64, 1, 1, 0)),
            (Direction::BwdData, shape(4, 1, 128, 48, 64, 1, 1, 0)),
            (Direction::BwdData, shape(4, 1, 100, 48, 128, 1, 1, 0)),
            // An odd row length: rows start at every alignment.
            (Direction::Fwd, shape(4, 1, 64, 48, 129, 1, 1, 0)),
        ];
        let mut isas: Vec<Isa> = Isa::supported()
            .into_iter()
            .filter(|&i| packed::available(i))
            .collect();
        if isas.is_empty() {
            // Without AVX2 these layers run on the `gemm` crate; the test
            // still checks them, but nothing streams.
            eprintln!("no AVX2: the packed GEMM's streamed stores are not tested here");
            isas.push(Isa::detect());
        }
        for (isa, (dir, p)) in isas
            .iter()
            .flat_map(|&i| cases.iter().map(move |&c| (i, c)))
        {
            let out_len = TestInputs::out_len(&p, dir);
            assert!(crate::stream::bypasses_cache(out_len), "{p:?}");
            let inputs = TestInputs::new(&p);
            let want = inputs.want(&p, dir);
            let mut plan = Im2colGemm.plan(&p, dir, isa);
            let mut buf = vec![0.0f32; out_len + 32];
            // The first float of `buf` on a cache line.
            let line = (64 - buf.as_ptr() as usize % 64) % 64 / 4;
            for off in [line, line + 4, line + 1] {
                buf.fill(f32::NAN);
                let out = &mut buf[off..off + out_len];
                inputs.execute(plan.as_mut(), dir, out);
                let e = reference::rel_l2_error(out, &want);
                assert!(e <= 1e-5, "{isa} {dir} offset {off}: {e:e} on {p:?}");
                let mut outside = buf[..off].iter().chain(&buf[off + out_len..]);
                assert!(
                    outside.all(|v| v.is_nan()),
                    "{isa} {dir} offset {off}: wrote outside its output on {p:?}"
                );
            }
        }
    }
}
