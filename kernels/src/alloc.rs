//! A global allocator that starts every large block on a cache line.

use std::alloc::{GlobalAlloc, Layout, System};

/// Blocks of at least this many bytes get [`LINE`] alignment.
const LARGE: usize = 4096;
/// Cache line bytes (x86-64), and the width of an AVX-512 vector.
const LINE: usize = 64;

/// The system allocator, except that blocks of 4 KiB or more start on a
/// 64-byte line, as PyTorch's CPU tensors do. glibc's `malloc` puts large
/// blocks 16 bytes past a page (its chunk header), which leaves every
/// 64-byte vector of a tensor straddling two lines and rules out the
/// non-temporal stores of [`crate::simd::stream_rows`]. The binary and the
/// benches install it (`#[global_allocator]`).
pub struct LineAligned;

/// The layout actually asked of `System`: a function of the caller's
/// layout alone, so `dealloc` and `realloc` see what `alloc` used.
fn widen(layout: Layout) -> Layout {
    if layout.size() >= LARGE && layout.align() < LINE {
        Layout::from_size_align(layout.size(), LINE).unwrap_or(layout)
    } else {
        layout
    }
}

// SAFETY: forwards to `System` with `widen`ed layouts, which are valid
// (same size, a larger power-of-two alignment) and depend only on the
// caller's layout; on unix `System` frees every block with `free`, so a
// block `realloc` got from libc's `realloc` is freed alike. Every block
// is aligned to at least what its caller's layout asked.
unsafe impl GlobalAlloc for LineAligned {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        System.alloc(widen(layout))
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        System.alloc_zeroed(widen(layout))
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, widen(layout))
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = widen(layout);
        let new = widen(Layout::from_size_align_unchecked(new_size, layout.align()));
        if old.align() == layout.align() && new.align() == layout.align() {
            // Neither side widened.
            return System.realloc(ptr, layout, new_size);
        }
        #[cfg(unix)]
        if layout.align() <= 16 {
            // libc's realloc grows a large block in place (mremap), where
            // Rust's `System` moves any over-aligned block by hand and needs
            // both copies at once: a Vec growing to 8 MiB then ran out
            // under a 512 MiB data limit that plain `malloc` met. glibc's
            // realloc takes blocks from posix_memalign and returns 16-byte
            // alignment, all the caller asked for; the line is a wish, so
            // a block that lands off one moves only if memory allows.
            let p = libc::realloc(ptr.cast(), new_size).cast::<u8>();
            if p.is_null() || (p as usize).is_multiple_of(new.align()) {
                return p;
            }
            let q = System.alloc(new);
            if q.is_null() {
                return p;
            }
            std::ptr::copy_nonoverlapping(p, q, new_size);
            libc::free(p.cast());
            return q;
        }
        // Elsewhere: move by hand (null keeps the old block).
        let q = System.alloc(new);
        if !q.is_null() {
            std::ptr::copy_nonoverlapping(ptr, q, layout.size().min(new_size));
            System.dealloc(ptr, old);
        }
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Large blocks land on a line through every entry point; small ones
    /// keep their own alignment; contents survive a move across `LARGE`.
    #[test]
    fn large_blocks_start_on_a_line() {
        let a = LineAligned;
        unsafe {
            for size in [4096, 100_000, 10 << 20] {
                let l = Layout::from_size_align(size, 4).unwrap();
                let p = a.alloc(l);
                assert!(!p.is_null() && (p as usize).is_multiple_of(LINE), "{size}");
                a.dealloc(p, l);
                let p = a.alloc_zeroed(l);
                assert!((p as usize).is_multiple_of(LINE) && *p.add(size - 1) == 0);
                a.dealloc(p, l);
            }
            let small = Layout::from_size_align(100, 4).unwrap();
            let p = a.alloc(small);
            assert!((p as usize).is_multiple_of(4));
            for i in 0..100 {
                *p.add(i) = i as u8;
            }
            let q = a.realloc(p, small, 8192);
            assert!((q as usize).is_multiple_of(LINE));
            assert!((0..100).all(|i| *q.add(i) == i as u8));
            let big = Layout::from_size_align(8192, 4).unwrap();
            let r = a.realloc(q, big, 50);
            assert!((0..50).all(|i| *r.add(i) == i as u8));
            a.dealloc(r, Layout::from_size_align(50, 4).unwrap());
        }
    }
}
