//! Every algorithm's `workspace_bound` against what its plan and two of
//! its calls really allocate, counted by this test binary's allocator, on
//! pools of 1 to 3 threads: the bound is what `cnnbench conv` checks
//! against the memory left before planning, so a plan over it could abort
//! on a failed allocation instead of being refused in one line.

use cnnbench_kernels::conv::{
    algorithms, ConvAlgo, ConvArgs, ConvShape, Direction, CALL_BYTES_PER_THREAD,
};
use cnnbench_kernels::rng::SplitMix64;
use cnnbench_kernels::Isa;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// The system allocator, counting the bytes live now and the most since
/// the last [`Counting::reset`].
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

impl Counting {
    fn grew(bytes: usize) {
        let live = LIVE.fetch_add(bytes, Relaxed) + bytes;
        PEAK.fetch_max(live, Relaxed);
    }
    /// Starts a measurement; returns the bytes live at its start.
    fn reset() -> usize {
        let live = LIVE.load(Relaxed);
        PEAK.store(live, Relaxed);
        live
    }
    /// The most bytes live since `reset` returned `start`, above it.
    fn peak_since(start: usize) -> usize {
        PEAK.load(Relaxed).saturating_sub(start)
    }
}

// SAFETY: every call is forwarded to `System` unchanged; the counters
// only observe sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded.
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            Self::grew(l.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded.
        let p = unsafe { System.alloc_zeroed(l) };
        if !p.is_null() {
            Self::grew(l.size());
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size(), Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded.
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            // Both blocks count until the copy is done, as a moving
            // realloc holds them.
            Self::grew(new);
            LIVE.fetch_sub(l.size(), Relaxed);
        }
        q
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// A square problem of `mb` images; `d` is the dilation (0 for none).
#[allow(clippy::too_many_arguments)]
fn shape(
    mb: usize,
    g: usize,
    ic: usize,
    ih: usize,
    oc: usize,
    k: usize,
    s: usize,
    pad: usize,
    d: usize,
) -> ConvShape {
    let o = (ih + 2 * pad - (d + 1) * (k - 1) - 1) / s + 1;
    ConvShape {
        mb,
        g,
        ic,
        ih,
        iw: ih,
        oc,
        oh: o,
        ow: o,
        kh: k,
        kw: k,
        sh: s,
        sw: s,
        ph: pad,
        pw: pad,
        dh: d,
        dw: d,
    }
}

/// Shapes whose plans grow with the batch (tap tiles of a big batch, the
/// stem's wide input, depthwise items, Winograd's weights) and ResNet-50
/// layers, run on the best ISA here.
fn big_problems() -> Vec<ConvShape> {
    vec![
        shape(400, 1, 16, 32, 16, 3, 1, 1, 0),
        shape(16, 1, 3, 224, 64, 7, 2, 3, 0),
        shape(16, 1, 64, 56, 64, 3, 1, 1, 0),
        shape(16, 1, 256, 56, 512, 1, 2, 0, 0),
        shape(16, 1, 512, 7, 512, 3, 1, 1, 0),
        shape(64, 1, 8, 64, 4, 3, 1, 1, 0),
        shape(32, 64, 64, 28, 64, 3, 1, 1, 0),
        shape(4, 4, 32, 20, 32, 5, 2, 2, 1),
        shape(1, 1, 1, 9, 1, 3, 1, 0, 0),
    ]
}

/// Random small problems, run on every ISA here.
fn small_problems() -> Vec<ConvShape> {
    let mut v = Vec::new();
    let mut rng = SplitMix64::new(29);
    let mut pick = |lo: usize, hi: usize| lo + (rng.next_u64() % (hi - lo + 1) as u64) as usize;
    while v.len() < 32 {
        let (k, d) = (pick(1, 5), pick(0, 1));
        let (g, s) = ([1, 1, 2, 3][pick(0, 3)], pick(1, 3));
        let pad = pick(0, k / 2 + d);
        let ih = pick(1, 30);
        if ih + 2 * pad < (d + 1) * (k - 1) + 1 {
            continue;
        }
        v.push(shape(
            pick(1, 24),
            g,
            g * pick(1, 40),
            ih,
            g * pick(1, 70),
            k,
            s,
            pad,
            d,
        ));
    }
    v
}

/// The plan's peak, and the peak over it and two of its calls, above
/// what was live before.
fn measured(a: &dyn ConvAlgo, p: &ConvShape, dir: Direction, isa: Isa) -> (usize, usize) {
    let (src, wei) = (vec![0.5f32; p.src_len()], vec![0.25f32; p.wei_len()]);
    let (mut dst, mut diff_src) = (vec![0.5f32; p.dst_len()], vec![0f32; p.src_len()]);
    let (mut diff_wei, mut diff_bias) = (vec![0f32; p.wei_len()], vec![0f32; p.oc]);
    let start = Counting::reset();
    let mut plan = a.plan(p, dir, isa);
    let planned = Counting::peak_since(start);
    for _ in 0..2 {
        plan.execute(match dir {
            Direction::Fwd => ConvArgs::Fwd {
                src: &src,
                wei: &wei,
                bias: None,
                dst: &mut dst,
            },
            Direction::BwdData => ConvArgs::BwdData {
                diff_dst: &dst,
                wei: &wei,
                diff_src: &mut diff_src,
            },
            Direction::BwdFilter => ConvArgs::BwdFilter {
                src: &src,
                diff_dst: &dst,
                diff_wei: &mut diff_wei,
                diff_bias: Some(&mut diff_bias),
            },
        });
    }
    let peak = Counting::peak_since(start);
    drop(plan);
    (planned, peak)
}

#[test]
fn every_plan_allocates_within_its_bound() {
    let best = Isa::detect();
    let cases: Vec<(Isa, ConvShape)> = big_problems()
        .into_iter()
        .map(|p| (best, p))
        .chain(
            Isa::supported()
                .into_iter()
                .flat_map(|isa| small_problems().into_iter().map(move |p| (isa, p))),
        )
        .collect();
    let mut worst = (0.0, String::new());
    for threads in 1..=3 {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("pool");
        for &(isa, ref p) in &cases {
            for dir in [Direction::Fwd, Direction::BwdData, Direction::BwdFilter] {
                for &a in algorithms() {
                    if a.supports(p, dir, isa).is_err() {
                        continue;
                    }
                    let (bound, (plan, calls)) =
                        pool.install(|| (a.workspace_bound(p, dir, isa), measured(a, p, dir, isa)));
                    let case = format!("{} {dir} {isa} {threads} threads {p:?}", a.name());
                    assert!(
                        plan as u128 <= bound,
                        "{case}: the plan allocated {plan} bytes, bound {bound}"
                    );
                    let per_thread = CALL_BYTES_PER_THREAD * threads as u128;
                    assert!(
                        calls as u128 <= bound + per_thread,
                        "{case}: plan and calls allocated {calls} bytes, bound {bound} + {per_thread}"
                    );
                    // A bound far over the plan would refuse problems
                    // that fit.
                    let over = bound.saturating_sub(1 << 20) as f64 / plan.max(1) as f64;
                    if over > worst.0 {
                        worst = (over, case);
                    }
                }
            }
        }
    }
    eprintln!(
        "largest bound over the plan, less 1 MiB: {:.2}x, {}",
        worst.0, worst.1
    );
    assert!(worst.0 < 2.0, "bound {:.1}x the peak: {}", worst.0, worst.1);
}
