//! Chunked im2col + GEMM into an NHWC output, shared by forward and
//! backward-data: for every chunk of virtual output pixels and every group,
//! `out[rows x dg] = col[rows x K] · W[K x dg]`.
//!
//! Work items are (conv, pixel chunk, group, output-channel block), in that
//! order, so the consecutive items a rayon thread takes usually share their
//! im2col chunk; each thread remembers which chunk its buffer holds (reset at
//! every call) and skips the copy when it already has it.

use super::blas::{gemm_f32, MatRef};
use super::gather::Gather;
use super::packed::{self, PackedB, NR};
use super::par::{SendPtr, Slots};
use crate::Isa;
use rayon::prelude::*;

/// Bytes of im2col chunk one thread aims to keep: half of a 1.25 MiB L2, so
/// the chunk and gemm's packed panels stay resident together.
const COL_BUDGET: usize = 640 << 10;
/// Fewest and most rows per chunk: below, gemm's per-call packing of the
/// weights dominates; above, the chunk spills for no gain.
const MIN_ROWS: usize = 256;
const MAX_ROWS: usize = 768;
/// Fewest virtual pixels for the packed path: below, packing all of W per
/// call and re-reading dst per reduction pass outweigh the pixels. It was
/// 8192 (ResNet-50's 14x14 and 7x7 1x1 layers at batch 16 measured
/// 0.85-1.05x the `gemm` crate on a Zen 5 VM, 2026-11-27); on the Zen 4
/// VM since (2026-11-29, ABBA, 2-3 rounds, batch 16), the packed path ran
/// those layers' forwards at 1.01-1.08x the crate's (`--algo
/// im2col_gemm`), and with `--algo auto` at 0.98-1.09x (median 1.05x)
/// what the threshold of 8192 ran; backward-data level (0.98-1.02x,
/// `direct` mostly wins there); capped at AVX2, layer3.0.conv3 (256 to
/// 1024 at 14x14) 1.05x forward.
const PACKED_MIN_PIXELS: usize = 768;
/// Widest block of output channels per GEMM: beyond it the gemm crate's
/// blocking falls off (e.g. 53% of peak at n=512, k=4608 vs 100% at 256).
const MAX_COLS: usize = 256;

/// One convolution, as a gather into an output tensor `[mb][dst_h][dst_w][dst_c]`.
pub struct ConvGemm {
    pub gather: Gather,
    pub groups: usize,
    /// Output channels per group (columns of the GEMM).
    pub dg: usize,
    pub dst_c: usize,
    pub dst_h: usize,
    pub dst_w: usize,
    pub wei: Weights,
    /// Whether [`PackedB::gemm`] may run this conv (see `packable`):
    /// forward, and backward-data where the reduction is 64 or more
    /// (below it measured slower than the `gemm` crate).
    pub packed: bool,
}

/// Where the `[K x dg]` weight matrix of each group lives in the weight
/// buffer.
pub enum Weights {
    /// Row-major `[K x dg]`; group `g`'s starts at `off + g·K·dg`.
    Dense { off: usize },
    /// One `[cg x dg]` block per tap, stored transposed (`dg x cg` with row
    /// stride `cs`... i.e. element `(j, c)` at `offs[tap] + g·group + j + c·cs`).
    /// Lets backward-data read gHWIO weights in place, one GEMM per tap.
    TapsT {
        offs: Vec<usize>,
        group: usize,
        cs: usize,
    },
}

impl ConvGemm {
    /// Whether a chunk of virtual pixels is a run of dst rows with stride
    /// `dst_c`, so gemm can write the output in place.
    fn direct(&self) -> bool {
        self.gather.y.writes_identity(self.dst_h) && self.gather.x.writes_identity(self.dst_w)
    }
    /// Whether [`PackedB::gemm`] runs this conv on `isa`: one group and
    /// one tap (the 1x1 layers), dense weights, on AVX-512, or on AVX2
    /// where the reduction takes one pass. AVX2 against the `gemm` crate's
    /// AVX2 tiles (ResNet-50's 1x1 layers at batch 16 at 56x56 and 28x28,
    /// forward and backward-data, Zen 4 VM, 2 threads, ABBA, 3 rounds,
    /// `--algo im2col_gemm`): reductions of 64-256 1.04-1.29x (one at
    /// 0.98x); of 512, two passes, 0.93-1.01x.
    fn packable(&self, isa: Isa) -> bool {
        self.packed
            && matches!(self.wei, Weights::Dense { .. })
            && self.groups == 1
            && self.gather.k() == self.gather.cg
            && self.gather.k() > 0
            && self.gather.pixels() >= PACKED_MIN_PIXELS
            && packed::available(isa)
            && (isa == Isa::Avx512 || self.gather.k() <= packed::KC)
    }
    /// Weight buffer length this conv needs.
    fn wei_len(&self) -> usize {
        let (k, cg) = (self.gather.k(), self.gather.cg);
        match &self.wei {
            Weights::Dense { off } => off + self.groups * k * self.dg,
            Weights::TapsT { offs, group, cs } => offs
                .iter()
                .map(|o| o + (self.groups - 1) * group + (cg - 1) + (self.dg - 1) * cs + 1)
                .max()
                .unwrap_or(0),
        }
    }
}

#[derive(Clone, Copy)]
struct Item {
    conv: usize,
    p0: usize,
    rows: usize,
    g: usize,
    n0: usize,
    n1: usize,
}

struct Scratch {
    /// im2col chunk, `rows x K`.
    col: Vec<f32>,
    /// GEMM output when it cannot go straight into dst.
    out: Vec<f32>,
    /// (conv, p0, g) of the chunk `col` holds in this call.
    tag: Option<(usize, usize, usize)>,
}

pub struct Engine {
    convs: Vec<ConvGemm>,
    /// Per conv: its weights packed for [`PackedB::gemm`], when it takes
    /// that path (see `ConvGemm::packable`).
    packed: Vec<Option<PackedB>>,
    items: Vec<Item>,
    slots: Slots<Scratch>,
    workspace: usize,
    /// Whether the packed convs store dst non-temporally (see `new`).
    streams: bool,
    /// What the `gemm` crate's calls run on.
    isa: Isa,
}

/// How [`Engine::new`] splits its convs, computed before anything big is
/// allocated: per conv its chunk rows and output-channel block, and the
/// lengths of each thread's scratch.
struct Layout {
    /// Per conv: (rows per pixel chunk, columns per block).
    splits: Vec<(usize, usize)>,
    items: usize,
    col_len: usize,
    out_len: usize,
}

impl Layout {
    fn new(convs: &[ConvGemm], packable: impl Fn(usize) -> bool) -> Self {
        let threads = rayon::current_num_threads().max(1);
        let total: usize = convs
            .iter()
            .map(|c| c.gather.pixels())
            .sum::<usize>()
            .max(1);
        let (mut splits, mut items, mut col_len, mut out_len) = (Vec::new(), 0, 0, 0);
        for (ci, c) in convs.iter().enumerate() {
            let px = c.gather.pixels();
            let (nchunks, nblocks) = split_work(px, c.gather.k(), c.dg, c.groups, threads, total);
            // Even chunk sizes, so the last chunk is not a runt.
            let r = px.div_ceil(nchunks);
            // Packed GEMM blocks start on panel boundaries.
            let align = if packable(ci) { NR } else { 16 };
            let nb = c.dg.div_ceil(nblocks).next_multiple_of(align).min(c.dg);
            items += px.div_ceil(r.max(1)) * c.groups * c.dg.div_ceil(nb.max(1));
            splits.push((r, nb));
            if !c.gather.reads_identity() {
                col_len = col_len.max(r * c.gather.k());
            }
            if !c.direct() {
                out_len = out_len.max(r * nb);
            }
        }
        Layout {
            splits,
            items,
            col_len,
            out_len,
        }
    }
}

impl Engine {
    /// The bytes [`Engine::new`] allocates for `convs` on the current pool
    /// (see
    /// [`ConvAlgo::workspace_bound`](crate::conv::ConvAlgo::workspace_bound)).
    pub fn bytes_bound(convs: &[ConvGemm], isa: Isa) -> u128 {
        let l = Layout::new(convs, |ci| convs[ci].packable(isa));
        let u = |v: usize| v as u128;
        let threads = u(rayon::current_num_threads().max(1));
        let packed: u128 = convs
            .iter()
            .filter(|c| c.packable(isa))
            .map(|c| 4 * u(c.gather.k()) * u(c.dg.div_ceil(NR) * NR))
            .sum();
        threads * 4 * u(l.col_len + l.out_len)
            + packed
            + u(l.items) * std::mem::size_of::<Item>() as u128
            + u(convs.len()) * 64
    }

    /// The engine for `convs` on `isa`, which
    /// [`blas::runs_on`](super::blas::runs_on) must accept.
    pub fn new(convs: Vec<ConvGemm>, isa: Isa) -> Self {
        debug_assert!(super::blas::runs_on(isa), "im2col engine on {isa}");
        let packed: Vec<Option<PackedB>> = convs
            .iter()
            .map(|c| {
                c.packable(isa)
                    .then(|| PackedB::new(c.gather.k(), c.dg, isa))
            })
            .collect();
        let l = Layout::new(&convs, |ci| packed[ci].is_some());
        let mut items = Vec::with_capacity(l.items);
        for (ci, (c, &(r, nb))) in convs.iter().zip(&l.splits).enumerate() {
            let px = c.gather.pixels();
            let mut p0 = 0;
            while p0 < px {
                let rows = r.min(px - p0);
                for g in 0..c.groups {
                    let mut n0 = 0;
                    while n0 < c.dg {
                        let n1 = (n0 + nb).min(c.dg);
                        items.push(Item {
                            conv: ci,
                            p0,
                            rows,
                            g,
                            n0,
                            n1,
                        });
                        n0 = n1;
                    }
                }
                p0 += rows;
            }
        }
        let (col_len, out_len) = (l.col_len, l.out_len);
        let slots = Slots::new(|| Scratch {
            col: vec![0.0; col_len],
            out: vec![0.0; out_len],
            tag: None,
        });
        let workspace = slots.len() * 4 * (col_len + out_len)
            + packed.iter().flatten().map(PackedB::bytes).sum::<usize>();
        // A dst larger than the caches goes out with non-temporal stores
        // from the packed GEMM's registers (see `crate::stream`): a plain
        // store would first read each line from memory. ResNet-50's
        // 64-to-256-channel 1x1 at 56x56, batch 16 (51 MB): 1.08-1.21x
        // forward (Zen 4 VM, 2 threads, four ABBA runs); 128 to 512 at
        // 28x28, 1.03-1.05x. Only a packed conv writing dst in place does.
        let streams = convs.iter().zip(&packed).any(|(c, pb)| {
            let dst_len = c.gather.mb * c.dst_h * c.dst_w * c.dst_c;
            pb.is_some() && c.direct() && crate::stream::bypasses_cache(dst_len)
        });
        Engine {
            convs,
            packed,
            items,
            slots,
            workspace,
            streams,
            isa,
        }
    }

    pub fn workspace_bytes(&self) -> usize {
        self.workspace
    }

    /// The packed micro-kernel's name where a conv runs on it, for records
    /// (`avx512_gemm_f32_6x64`, `avx2_gemm_f32_6x16`).
    pub fn packed_kernel(&self) -> Option<&'static str> {
        self.packed.iter().flatten().next()?;
        Some(match self.isa {
            Isa::Avx512 => "avx512_gemm_f32_6x64",
            _ => "avx2_gemm_f32_6x16",
        })
    }

    /// Runs every conv: reads `src` and the weight buffer `wei`, adds `bias`
    /// (indexed by dst channel) when given, overwrites `dst`.
    pub fn run(&mut self, src: &[f32], wei: &[f32], bias: Option<&[f32]>, dst: &mut [f32]) {
        for c in &self.convs {
            let gt = &c.gather;
            assert!(
                src.len() >= gt.mb * gt.y.src_len * gt.x.src_len * gt.src_c,
                "src too small"
            );
            assert!(
                dst.len() >= gt.mb * c.dst_h * c.dst_w * c.dst_c,
                "dst too small"
            );
            // Every virtual pixel must land inside dst (the scatter relies on it).
            assert!(gt.y.len == 0 || gt.y.dst_start + gt.y.dst_step * (gt.y.len - 1) < c.dst_h);
            assert!(gt.x.len == 0 || gt.x.dst_start + gt.x.dst_step * (gt.x.len - 1) < c.dst_w);
            assert!(wei.len() >= c.wei_len(), "weights too small");
            assert!(
                bias.is_none_or(|b| b.len() >= c.groups * c.dg),
                "bias too small"
            );
        }
        for s in self.slots.iter_mut() {
            s.tag = None;
        }
        for (c, pb) in self.convs.iter().zip(&mut self.packed) {
            let Some(pb) = pb else { continue };
            if let Weights::Dense { off } = &c.wei {
                pb.pack(&wei[*off..], c.dg);
            }
        }
        let (stream, isa) = (self.streams, self.isa);
        let dst = SendPtr(dst.as_mut_ptr());
        let (convs, slots, packed) = (&self.convs, &self.slots, &self.packed);
        self.items.par_iter().for_each(|it| {
            let mut s = slots.lock();
            let pb = packed[it.conv].as_ref();
            run_item(
                &convs[it.conv],
                pb,
                it,
                src,
                wei,
                bias,
                dst,
                &mut s,
                stream,
                isa,
            );
            if stream {
                crate::stream::fence();
            }
        });
    }
}

/// How many pixel chunks and output-channel blocks to cut one conv into.
///
/// Rows per chunk start from the L2 budget for the im2col chunk but stay
/// at least `MIN_ROWS`: gemm packs the weights on every call, a cost that
/// only many rows amortise. Channels go in blocks of at most `MAX_COLS`.
/// Then, while there are fewer than two items per thread (for this conv's
/// share of the pixels), split channels (blocks of 64 or more) before
/// pixels; and when items are few, make their count a multiple of the
/// thread count so the last round is not half empty.
fn split_work(
    px: usize,
    k: usize,
    dg: usize,
    groups: usize,
    threads: usize,
    total: usize,
) -> (usize, usize) {
    if px == 0 {
        return (1, 1);
    }
    let rows = (COL_BUDGET / (4 * k.max(1)))
        .clamp(MIN_ROWS, MAX_ROWS)
        .min(px);
    let mut nchunks = px.div_ceil(rows);
    let mut nblocks = dg.div_ceil(MAX_COLS);
    let want = (2 * threads * px).div_ceil(total).max(1);
    while nchunks * nblocks * groups < want {
        if dg / (nblocks + 1) >= 64 {
            nblocks += 1;
        } else if px / (nchunks + 1) >= 16 {
            nchunks += 1;
        } else {
            break;
        }
    }
    while nchunks * nblocks * groups < 8 * threads
        && !(nchunks * nblocks * groups).is_multiple_of(threads)
        && px / (nchunks + 1) >= 16
    {
        nchunks += 1;
    }
    (nchunks, nblocks)
}

#[allow(clippy::too_many_arguments)]
fn run_item(
    c: &ConvGemm,
    pb: Option<&PackedB>,
    it: &Item,
    src: &[f32],
    wei: &[f32],
    bias: Option<&[f32]>,
    dst: SendPtr,
    s: &mut Scratch,
    stream: bool,
    isa: Isa,
) {
    let gt = &c.gather;
    let (k, nbw) = (gt.k(), it.n1 - it.n0);
    let lhs = if gt.reads_identity() {
        // 1x1 stride 1 unpadded: the source rows are the im2col matrix.
        MatRef {
            ptr: src[it.p0 * gt.src_c + it.g * gt.cg..].as_ptr(),
            rs: gt.src_c as isize,
            cs: 1,
        }
    } else {
        let tag = (it.conv, it.p0, it.g);
        if k > 0 && s.tag != Some(tag) {
            gt.im2col(src, it.g, it.p0, it.rows, 0, k, &mut s.col);
            s.tag = Some(tag);
        }
        MatRef {
            ptr: s.col.as_ptr(),
            rs: k as isize,
            cs: 1,
        }
    };
    // out[rows x nbw] (+)= col · W, into `d` (row stride d_rs).
    // SAFETY (for callers): lhs covers rows x k (source rows or the col
    // chunk), the weight reads stay within `wei` (bounds checked in `run`
    // via `wei_len`), and `d` must be rows x nbw writable elements owned by
    // this item.
    let mul = |d: *mut f32, d_rs: usize, acc: bool| unsafe {
        if let Some(pb) = pb {
            // `acc` is only set when the bias was copied into dst first,
            // which the packed path never asks for.
            debug_assert!(!acc);
            return pb.gemm(
                it.rows,
                lhs.ptr,
                lhs.rs as usize,
                it.n0,
                it.n1,
                d,
                d_rs,
                None,
                false,
            );
        }
        match &c.wei {
            Weights::Dense { off } => {
                // A phase with no taps (k == 0) owns no weights; gemm_f32
                // then only writes zeros and never reads rhs.
                let w0 = (off + it.g * k * c.dg + it.n0).min(wei.len());
                let rhs = MatRef {
                    ptr: wei[w0..].as_ptr(),
                    rs: c.dg as isize,
                    cs: 1,
                };
                gemm_f32(isa, it.rows, nbw, k, d, d_rs, acc, lhs, rhs);
            }
            Weights::TapsT { offs, group, cs } if !offs.is_empty() => {
                let cg = gt.cg;
                for (t, &o) in offs.iter().enumerate() {
                    let lhs_t = MatRef {
                        ptr: lhs.ptr.add(t * cg),
                        ..lhs
                    };
                    let w0 = o + it.g * group + it.n0 * cs;
                    let rhs = MatRef {
                        ptr: wei[w0..].as_ptr(),
                        rs: 1,
                        cs: *cs as isize,
                    };
                    gemm_f32(isa, it.rows, nbw, cg, d, d_rs, acc || t > 0, lhs_t, rhs);
                }
            }
            Weights::TapsT { .. } => gemm_f32(isa, it.rows, nbw, 0, d, d_rs, acc, lhs, lhs),
        }
    };
    let ch0 = it.g * c.dg + it.n0;
    let bias = bias.map(|b| &b[ch0..ch0 + nbw]);
    if c.direct() {
        // SAFETY: rows p0..p0+rows, channels ch0..ch0+nbw of dst are in
        // bounds (checked in `run`) and belong to this item alone: items
        // partition (pixel, channel) pairs, and dst stays borrowed mutably
        // for the whole parallel call.
        let d = unsafe { dst.ptr().add(it.p0 * c.dst_c + ch0) };
        if let Some(pb) = pb {
            // Bias added as the tiles are stored: no separate pass.
            // SAFETY: dst block as above, lhs as in `mul`, bias holds nbw
            // floats.
            return unsafe {
                pb.gemm(
                    it.rows,
                    lhs.ptr,
                    lhs.rs as usize,
                    it.n0,
                    it.n1,
                    d,
                    c.dst_c,
                    bias.map(|b| b.as_ptr()),
                    stream,
                )
            };
        }
        if let Some(b) = bias {
            for i in 0..it.rows {
                // SAFETY: as above, row i of this item's block.
                unsafe { std::slice::from_raw_parts_mut(d.add(i * c.dst_c), nbw) }
                    .copy_from_slice(b);
            }
        }
        // dst block as above; see `mul`.
        mul(d, c.dst_c, bias.is_some());
    } else {
        let out = &mut s.out[..it.rows * nbw];
        // A conv with no taps (a stride phase no kernel tap reaches) only
        // writes zeros (or the bias): straight into dst, no GEMM.
        let zeros = k == 0;
        if !zeros {
            // `out` is this thread's own buffer of rows x nbw; see `mul`.
            mul(out.as_mut_ptr(), nbw, false);
        }
        for (i, row) in out.chunks_exact(nbw).enumerate() {
            let (n, ty, tx) = gt.coords(it.p0 + i);
            let y = gt.y.dst_start + gt.y.dst_step * ty;
            let x = gt.x.dst_start + gt.x.dst_step * tx;
            let at = ((n * c.dst_h + y) * c.dst_w + x) * c.dst_c + ch0;
            // SAFETY: distinct virtual pixels map to distinct dst pixels and
            // convs to disjoint pixel sets (stride phases), so this element
            // range belongs to this item alone; in bounds as checked in `run`.
            let d = unsafe { std::slice::from_raw_parts_mut(dst.ptr().add(at), nbw) };
            if zeros {
                match bias {
                    Some(b) => d.copy_from_slice(b),
                    None => d.fill(0.0),
                }
                continue;
            }
            match bias {
                Some(b) => d
                    .iter_mut()
                    .zip(row.iter().zip(b))
                    .for_each(|(d, (v, b))| *d = v + b),
                None => d.copy_from_slice(row),
            }
        }
    }
}
