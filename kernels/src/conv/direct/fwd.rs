//! Forward: indirect GEMM over output pixels.
//!
//! The output is a `[pixels][oc]` matrix. A tile is `MR` consecutive pixels
//! (any mix of rows and images: each pixel gets its own input pointer per
//! tap) times `NR` output channels of one group; the reduction runs over taps
//! and the group's input channels. Each call first repacks the weights
//! (in parallel, reading them in order) into contiguous `(ic/g) x NR`
//! panels per oc block and tap, so a pass reads one sequential block
//! (cost: O(weights) per call, against O(weights x pixels) FLOPs).

use super::ukernel::{self, Igemm, Init, MRMAX, TMAX};
use super::util::{grid, split, target_items, AlignedBuf, SyncPtr};
use crate::conv::{ConvArgs, ConvPlan, ConvShape};
use crate::Isa;
use rayon::prelude::*;
use std::ptr;

/// Pixels `px` times flattened `(group, oc block)` range `blk`.
struct Item {
    px: (usize, usize),
    blk: (usize, usize),
}

pub(super) struct FwdPlan {
    p: ConvShape,
    isa: Isa,
    mr: usize,
    nr: usize,
    /// `ic/g` zeros: what a tap in the padding reads.
    zero: AlignedBuf,
    items: Vec<Item>,
    /// Taps and input channels per pass over an item's pixels: one pass
    /// uses a `tb x kc x NR` block of weights small enough to stay in L2
    /// while every tile of the item reuses it.
    tb: usize,
    kc: usize,
    /// Oc blocks per pass over a tile of pixels: their weights share the
    /// L2 budget, and the tile's input pointers are set up once for all.
    bg: usize,
    /// The weights repacked once per call as `[g][oc block][tap][ic/g][nr]`:
    /// each pass's block is then contiguous (read in place with a row stride
    /// of `oc/g` floats, a block maps onto a fraction of L1's sets and its
    /// rows, a page apart, defeat the prefetchers).
    pack: AlignedBuf,
}

impl FwdPlan {
    pub(super) fn new(p: &ConvShape, isa: Isa) -> Self {
        let (mr, nr) = ukernel::tile(isa);
        let pixels = p.mb * p.oh * p.ow;
        let blocks = p.g * p.ocg().div_ceil(nr);
        let (pc, bc) = grid(
            pixels.div_ceil(mr),
            blocks,
            (p.src_len() * 4) as f64,
            (p.wei_len() * 4) as f64,
            target_items(),
        );
        let mut items = Vec::new();
        for px in split(pixels, pc, mr) {
            for blk in split(blocks, bc, 1) {
                items.push(Item { px, blk });
            }
        }
        let (tb, kc) = ukernel::reduction_block(p.taps(), p.icg(), nr);
        let bg = ukernel::blocks_per_pass(tb, kc, nr);
        let pack = AlignedBuf::zeroed(blocks * p.taps() * p.icg() * nr);
        FwdPlan {
            p: *p,
            isa,
            mr,
            nr,
            zero: AlignedBuf::zeroed(p.icg()),
            items,
            tb,
            kc,
            bg,
            pack,
        }
    }

    /// Computes one work item.
    ///
    /// # Safety
    /// `src`, `wei`, `bias` and the output behind `out` must fit `self.p`
    /// (checked by `assert_fits`), and no other item may write this item's
    /// pixels x channels of the output.
    /// `pack` holds the packed weights (see [`FwdPlan::pack`]).
    unsafe fn run(
        &self,
        it: &Item,
        src: &[f32],
        bias: Option<&[f32]>,
        out: SyncPtr,
        pack: *const f32,
    ) {
        let p = &self.p;
        let (mr, nr) = (self.mr, self.nr);
        let (icg, ocg, taps) = (p.icg(), p.ocg(), p.taps());
        let nkb = ocg.div_ceil(nr);
        let zero = self.zero.as_slice().as_ptr();
        let mut a = [ptr::null::<f32>(); TMAX * MRMAX];
        let mut b = [ptr::null::<f32>(); TMAX];
        let mut c = [ptr::null_mut::<f32>(); MRMAX];
        // Per tile row: (input row, input column) of tap (0, 0), which may
        // lie in the padding, and the flat src offset it would have.
        let mut org = [(0isize, 0isize, 0isize); MRMAX];
        // Output row starts (channel 0 of the group) of the tile's pixels.
        let mut rows = [ptr::null_mut::<f32>(); MRMAX];
        for (g, blks) in ukernel::block_runs(it.blk, nkb, self.bg) {
            for t0 in (0..taps).step_by(self.tb) {
                let nt = self.tb.min(taps - t0);
                for c0 in (0..icg).step_by(self.kc) {
                    let kc = self.kc.min(icg - c0);
                    // (image, row, column) of the next pixel, advanced one
                    // pixel at a time: no divisions per tile.
                    let row = it.px.0 / p.ow;
                    let mut cur = (row / p.oh, row % p.oh, it.px.0 % p.ow);
                    let mut q0 = it.px.0;
                    while q0 < it.px.1 {
                        let m = mr.min(it.px.1 - q0);
                        for i in 0..mr {
                            if i >= m {
                                // Never inside: reads the zero row.
                                org[i] = (isize::MIN / 2, 0, 0);
                                continue;
                            }
                            let (img, oh, ow) = cur;
                            let h = (oh * p.sh) as isize - p.ph as isize;
                            let w = (ow * p.sw) as isize - p.pw as isize;
                            let off =
                                (((img * p.ih) as isize + h) * p.iw as isize + w) * p.ic as isize;
                            org[i] = (h, w, off + (g * icg + c0) as isize);
                            rows[i] = out.get().add((q0 + i) * p.oc + g * ocg);
                            cur.2 += 1;
                            if cur.2 == p.ow {
                                cur.2 = 0;
                                cur.1 += 1;
                                if cur.1 == p.oh {
                                    cur.1 = 0;
                                    cur.0 += 1;
                                }
                            }
                        }
                        // Tap (row, column), stepped along: no division per tap.
                        let (mut dh, mut dw) = (t0 / p.kw, t0 % p.kw);
                        for tb in 0..nt {
                            let (dh_el, dw_el) =
                                ((dh * p.dil_h()) as isize, (dw * p.dil_w()) as isize);
                            let doff = (dh_el * p.iw as isize + dw_el) * p.ic as isize;
                            // Padding (and rows past the tile) read zeros.
                            ukernel::point_tap_rows(
                                &mut a,
                                tb,
                                &org,
                                mr,
                                (dh_el, dw_el, doff),
                                (p.ih, p.iw),
                                src.as_ptr(),
                                zero,
                            );
                            dw += 1;
                            if dw == p.kw {
                                dw = 0;
                                dh += 1;
                            }
                        }
                        // The same pixels' pointers serve every block of
                        // the run: only the weights and output columns move.
                        for blk in blks.clone() {
                            let k0 = blk % nkb * nr;
                            let n = nr.min(ocg - k0);
                            for (tb, bp) in b.iter_mut().enumerate().take(nt) {
                                *bp = pack.add(((blk * taps + t0 + tb) * icg + c0) * nr);
                            }
                            for i in 0..m {
                                c[i] = rows[i].add(k0);
                            }
                            let init = match bias {
                                _ if t0 > 0 || c0 > 0 => Init::Acc,
                                Some(bv) => Init::Bias(bv.as_ptr().add(g * ocg + k0)),
                                None => Init::Zero,
                            };
                            let k = Igemm {
                                a: a.as_ptr(),
                                b: b.as_ptr(),
                                ntaps: nt,
                                kc,
                                ldb: nr,
                                c: c.as_ptr(),
                                m,
                                n,
                                init,
                            };
                            ukernel::igemm(self.isa, &k);
                        }
                        q0 += m;
                    }
                }
            }
        }
    }
}

impl ConvPlan for FwdPlan {
    fn workspace_bytes(&self) -> usize {
        self.zero.bytes() + self.pack.bytes() + self.items.len() * std::mem::size_of::<Item>()
    }

    fn kernel_name(&self) -> String {
        format!("{}_conv_fwd_f32_{}x{}", self.isa.name(), self.mr, self.nr)
    }

    fn execute(&mut self, args: ConvArgs<'_>) {
        args.assert_fits(&self.p);
        let ConvArgs::Fwd {
            src,
            wei,
            bias,
            dst,
        } = args
        else {
            panic!("forward plan run with {} tensors", args.direction());
        };
        let out = SyncPtr::new(dst);
        let p = self.p;
        let nr = self.nr;
        let (icg, ocg, taps) = (p.icg(), p.ocg(), p.taps());
        let nkb = ocg.div_ceil(nr);
        // Repack: each task reads a run of a (group, tap)'s `ic/g` rows of
        // weights in order and deals them out to the oc blocks. Runs of at
        // most REPACK_ROWS rows, so that a 1x1 layer's repack (one
        // (group, tap), up to 8 MiB in ResNet-50) is not one thread's job.
        const REPACK_ROWS: usize = 64;
        let runs = icg.div_ceil(REPACK_ROWS);
        let dstp = SyncPtr::new(self.pack.as_mut_slice());
        (0..p.g * taps * runs).into_par_iter().for_each(|task| {
            let (gt, run) = (task / runs, task % runs);
            let (g, t) = (gt / taps, gt % taps);
            for c in run * REPACK_ROWS..icg.min((run + 1) * REPACK_ROWS) {
                let from = &wei[p.wei_idx(g, t / p.kw, t % p.kw, c, 0)..][..ocg];
                for kb in 0..nkb {
                    let k0 = kb * nr;
                    let n = nr.min(ocg - k0);
                    // SAFETY: tasks write disjoint rows of the pack.
                    unsafe {
                        ptr::copy_nonoverlapping(
                            from.as_ptr().add(k0),
                            dstp.get().add((((g * nkb + kb) * taps + t) * icg + c) * nr),
                            n,
                        )
                    };
                }
            }
        });
        let this = &*self;
        // SAFETY: tensor sizes were checked above; items cover disjoint
        // (pixel range x channel block) parts of dst, and only read the pack.
        this.items
            .par_iter()
            .for_each(|it| unsafe { this.run(it, src, bias, out, dstp.get()) });
    }
}
