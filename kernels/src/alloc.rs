//! A global allocator that starts every large block on a cache line.
//!
//! glibc's `malloc` aligns blocks to 16 bytes only (a mapped block starts
//! 16 bytes past a page), so a tensor held in a `Vec<f32>` may start 16
//! bytes into a cache line: every
//! 64-byte vector load or store of a row then touches two lines, and a
//! non-temporal store of one vector cannot write a whole line (the kernels
//! fall back to four 16-byte ones, whose lines the write-combining buffers
//! must assemble). PyTorch's CPU allocator aligns every tensor to 64 bytes,
//! as oneDNN recommends; the `cnnbench` binary registers [`Aligned64`]
//! (`#[global_allocator]`) so that its tensors start the same way.
//!
//! Blocks of [`FROM_BYTES`] or more get 64-byte alignment; smaller ones
//! (strings, small vectors) go to the system allocator unchanged.

use std::alloc::{GlobalAlloc, Layout, System};

/// Blocks from this size (bytes) start on a 64-byte boundary.
pub const FROM_BYTES: usize = 4096;
/// A cache line.
pub const ALIGN: usize = 64;

/// The system allocator, with blocks of [`FROM_BYTES`] or more aligned to
/// [`ALIGN`] bytes.
pub struct Aligned64;

#[cfg(unix)]
extern "C" {
    fn realloc(ptr: *mut std::ffi::c_void, size: usize) -> *mut std::ffi::c_void;
    fn free(ptr: *mut std::ffi::c_void);
}

/// A transparent huge page on x86-64 Linux (on other architectures the
/// advice still applies to whole 2 MiB ranges, which is harmless).
const HUGE_PAGE: usize = 2 << 20;

/// Asks Linux to back the whole 2 MiB pages inside `v`'s allocation with
/// huge pages (`madvise(MADV_HUGEPAGE)`; a no-op elsewhere, and where the
/// kernel's transparent huge pages are off). Call it before the pages are
/// first written: pages already faulted in stay small until the kernel's
/// background collapse. Where transparent huge pages are on only on
/// request (`madvise`, the usual default), a large buffer read a few
/// hundred bytes per page, far apart (the recurrent layers' step-major
/// gathers), otherwise costs a TLB miss per read, and a nested page walk
/// under a hypervisor. Returns whether the kernel took the advice.
///
/// A caveat: glibc may place a large block inside its heap rather than
/// in a mapping of its own (its mmap threshold rises to the size of any
/// mapped block freed, up to 32 MiB). The advice then stays on that
/// range of the heap after the block is freed, for whatever is placed
/// there next; and recycled heap pages, already faulted in, stay small.
pub fn advise_huge_pages<T>(v: &Vec<T>) -> bool {
    #[cfg(target_os = "linux")]
    {
        extern "C" {
            fn madvise(addr: *mut std::ffi::c_void, len: usize, advice: i32) -> i32;
        }
        const MADV_HUGEPAGE: i32 = 14;
        let p = v.as_ptr() as usize;
        let start = p.next_multiple_of(HUGE_PAGE);
        let end = (p + v.capacity() * std::mem::size_of::<T>()) / HUGE_PAGE * HUGE_PAGE;
        if end <= start {
            return false;
        }
        // SAFETY: the range lies inside `v`'s allocation; the advice
        // changes no contents, and a refusal (an old kernel) is harmless.
        unsafe { madvise(start as *mut _, end - start, MADV_HUGEPAGE) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (v, HUGE_PAGE);
        false
    }
}

/// `len` zeros on pages advised huge ([`advise_huge_pages`]), or `None`
/// where the allocation fails: the recurrent layers' workspace, weights
/// and tensors. On 2 threads of a Xeon VM (family 6, model 167), ABBA,
/// LSTMs of hidden 256 and 512: at batches 32 to 128 capped at AVX2, 8
/// rounds, 1.01-1.14x; at batches 16 to 128 on AVX-512, 12 rounds,
/// 0.98-1.16x; where a problem whose buffers are all under 2 MiB moved
/// 1.03-1.11x
/// (results/reference/cpu-rnn-xeon-hugepages/). Not every tensor: the
/// global allocator advising every block of 4 MiB or more slowed the
/// ResNet-50 training step (0.955x and 0.967x), with some Winograd layers
/// at up to twice the time.
pub fn try_zeroed_huge(len: usize) -> Option<Vec<f32>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).ok()?;
    Some(advised_zeros(v, len))
}

/// [`try_zeroed_huge`], aborting where the allocation fails (as `vec!`).
pub fn zeroed_huge(len: usize) -> Vec<f32> {
    advised_zeros(Vec::with_capacity(len), len)
}

/// `len` zeros in `v`'s room for them, advised huge before the first write.
fn advised_zeros(mut v: Vec<f32>, len: usize) -> Vec<f32> {
    advise_huge_pages(&v);
    v.resize(len, 0.0);
    v
}

/// The layout a block of `layout` is allocated (and freed) with: the same
/// function of the size on both sides, as `GlobalAlloc` requires.
fn widened(layout: Layout) -> Layout {
    if layout.size() >= FROM_BYTES && layout.align() < ALIGN {
        // Refused only for a size within 63 bytes of isize::MAX, which no
        // allocation reaches; that one keeps its own alignment.
        Layout::from_size_align(layout.size(), ALIGN).unwrap_or(layout)
    } else {
        layout
    }
}

// SAFETY: every call forwards to `System` with the layout `widened` makes
// of the caller's, which depends only on that layout, so a block is freed
// and reallocated with the layout it was allocated with.
unsafe impl GlobalAlloc for Aligned64 {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for the impl; layout has a non-zero size (caller).
        unsafe { System.alloc(widened(layout)) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(widened(layout)) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: ptr came from `alloc` with this layout (caller), so from
        // `System` with the widened one.
        unsafe { System.dealloc(ptr, widened(layout)) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new = Layout::from_size_align(new_size, layout.align());
        match new {
            // Not widened before or after (small, or aligned to 64 or more
            // already): the system's realloc keeps the alignment asked for.
            Ok(new) if widened(layout) == layout && widened(new) == new => {
                // SAFETY: as for `dealloc`; new_size is valid (caller).
                unsafe { System.realloc(ptr, layout, new_size) }
            }
            Ok(new) => {
                #[cfg(unix)]
                if widened(layout) != layout && widened(new) != new && layout.align() <= 16 {
                    // Large to large: the C library's realloc, which moves
                    // a mapped block with mremap (no copy, no second block
                    // at once: under a tight RLIMIT_DATA a copying realloc
                    // of a Vec's growth ran out of memory where glibc's had
                    // not) and keeps its offset in the page, so usually the
                    // alignment. `System` takes its blocks from the same
                    // malloc on Unix, which lets realloc and free take
                    // memalign's blocks, and frees what realloc returns (std
                    // documents `System` as malloc-based on Unix). Only for
                    // alignments malloc itself gives (16), so that a moved
                    // block is valid for its layout even unaligned.
                    // SAFETY: ptr is a live malloc-family block (above);
                    // on failure it stays valid and untouched.
                    let to = unsafe { realloc(ptr.cast(), new_size) }.cast::<u8>();
                    if to.is_null() || (to as usize).is_multiple_of(ALIGN) {
                        return to;
                    }
                    // Moved off the line: once more into an aligned block
                    // where there is room, else keep the moved one (valid
                    // for the layout's own alignment; `dealloc` frees
                    // either with free). `ptr` is gone by now, so a null
                    // here would lose the contents.
                    // SAFETY: `to` holds new_size bytes of the contents.
                    unsafe {
                        let aligned = self.alloc(new);
                        if aligned.is_null() {
                            return to;
                        }
                        std::ptr::copy_nonoverlapping(to, aligned, new_size);
                        free(to.cast());
                        return aligned;
                    }
                }
                // SAFETY: a fresh block of the new layout, the old one's
                // overlap copied, the old one freed as it was allocated.
                unsafe {
                    let to = self.alloc(new);
                    if !to.is_null() {
                        std::ptr::copy_nonoverlapping(ptr, to, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                    to
                }
            }
            Err(_) => std::ptr::null_mut(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `try_zeroed_huge` gives zeros, and on Linux with transparent huge
    /// pages its whole 2 MiB pages carry the advice (`hg` in the mapping's
    /// `VmFlags`); small buffers and the other constructor give zeros too.
    #[test]
    #[cfg_attr(miri, ignore)]
    fn zeroed_huge_buffers_are_zeros_advised_huge() {
        for len in [0, 1, 1000, 3 << 20] {
            let v = try_zeroed_huge(len).unwrap();
            assert_eq!(v.len(), len);
            assert!(v.iter().all(|&x| x == 0.0));
            assert_eq!(zeroed_huge(len), v);
        }
        #[cfg(target_os = "linux")]
        {
            let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled");
            if thp.is_err() {
                return;
            }
            let v = try_zeroed_huge(3 << 20).unwrap();
            // Refused (an emulator, a kernel that ignores it): nothing
            // to look for.
            if !advise_huge_pages(&v) {
                return;
            }
            let at = (v.as_ptr() as usize).next_multiple_of(HUGE_PAGE);
            let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
            let mut inside = false;
            let mut flags = None;
            for line in smaps.lines() {
                let range = line
                    .split_whitespace()
                    .next()
                    .and_then(|r| r.split_once('-'));
                if let Some((a, b)) = range.filter(|_| !line.starts_with("VmFlags")) {
                    if let (Ok(a), Ok(b)) =
                        (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                    {
                        inside = (a..b).contains(&at);
                        continue;
                    }
                }
                if inside && line.starts_with("VmFlags:") {
                    flags = Some(line.to_string());
                }
            }
            let flags = flags.expect("the buffer's mapping in /proc/self/smaps");
            assert!(flags.split_whitespace().any(|f| f == "hg"), "{flags}");
        }
    }

    /// Large blocks start on a cache line through alloc, alloc_zeroed and
    /// growing or shrinking realloc, keep their contents, and free without
    /// complaint; small ones keep the alignment asked for.
    #[test]
    fn large_blocks_are_line_aligned_small_ones_untouched() {
        let a = Aligned64;
        unsafe {
            for size in [FROM_BYTES, 51 << 20, 12_345_678] {
                let l = Layout::from_size_align(size, 4).unwrap();
                let p = a.alloc(l);
                assert!(!p.is_null() && (p as usize).is_multiple_of(ALIGN), "{size}");
                p.write_bytes(7, size);
                let q = a.realloc(p, l, size * 2);
                assert_eq!(q as usize % ALIGN, 0);
                assert!((0..size).all(|i| *q.add(i) == 7));
                let l2 = Layout::from_size_align(size * 2, 4).unwrap();
                let r = a.realloc(q, l2, 100);
                assert_eq!(r as usize % 4, 0);
                assert!((0..100).all(|i| *r.add(i) == 7));
                a.dealloc(r, Layout::from_size_align(100, 4).unwrap());
                let z = a.alloc_zeroed(l);
                assert!((z as usize).is_multiple_of(ALIGN) && (0..size).all(|i| *z.add(i) == 0));
                a.dealloc(z, l);
            }
            let l = Layout::from_size_align(24, 8).unwrap();
            let p = a.alloc(l);
            assert_eq!(p as usize % 8, 0);
            p.write_bytes(3, 24);
            let p = a.realloc(p, l, 40);
            // Small to large: aligned, contents kept.
            let l40 = Layout::from_size_align(40, 8).unwrap();
            let p = a.realloc(p, l40, 3 * FROM_BYTES);
            assert!((p as usize).is_multiple_of(ALIGN) && (0..24).all(|i| *p.add(i) == 3));
            a.dealloc(p, Layout::from_size_align(3 * FROM_BYTES, 8).unwrap());
            // A layout asking for more than a line keeps its own.
            let l = Layout::from_size_align(2 * FROM_BYTES, 256).unwrap();
            let p = a.alloc(l);
            assert_eq!(p as usize % 256, 0);
            let p = a.realloc(p, l, 8 * FROM_BYTES);
            assert_eq!(p as usize % 256, 0);
            a.dealloc(p, Layout::from_size_align(8 * FROM_BYTES, 256).unwrap());
        }
    }
}
