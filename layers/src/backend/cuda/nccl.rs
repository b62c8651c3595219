//! NCCL, the collective library every data-parallel trainer uses, loaded at
//! run time like the other CUDA libraries (by its own loader: see
//! [`super::loader::nccl_sys`]): communicators (one per GPU of
//! this process, or one per launched rank), the all-reduce on a stream,
//! and groups. Every status becomes a [`GpuError`] naming the call and
//! NCCL's own words for it.

use super::error::GpuResult;
use super::loader::nccl_sys::{check, nccl, Lib, RawComm, UniqueId};
pub use super::loader::nccl_sys::{missing, version, version_name, ID_BYTES};
use cudarc::driver::CudaStream;
use std::ffi::{c_char, c_int, c_void};

/// A new unique id: rank 0 makes it and hands it to the others (needs no
/// GPU; NCCL picks the network interface its bootstrap listens on).
pub fn unique_id() -> GpuResult<[u8; ID_BYTES]> {
    let l = nccl("ncclGetUniqueId")?;
    let mut id = UniqueId {
        internal: [0; ID_BYTES],
    };
    // SAFETY: an out-pointer to a local of NCCL's layout.
    check(l, "ncclGetUniqueId", unsafe { (l.get_unique_id)(&mut id) })?;
    Ok(id.internal.map(|c| c as u8))
}

/// The element types cnnbench all-reduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    F32,
    F16,
    Bf16,
}

impl Elem {
    /// `ncclDataType_t`.
    fn raw(self) -> c_int {
        match self {
            Elem::F32 => 7,
            Elem::F16 => 6,
            Elem::Bf16 => 9,
        }
    }

    pub fn bytes(self) -> usize {
        match self {
            Elem::F32 => 4,
            Elem::F16 | Elem::Bf16 => 2,
        }
    }
}

/// The reduction: a sum, the mean over ranks (data-parallel gradients, as
/// PyTorch DDP averages them), or the largest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduce {
    Sum,
    Avg,
    Max,
}

/// One rank's communicator.
pub struct Comm {
    raw: RawComm,
    lib: &'static Lib,
    pub rank: usize,
    pub world_size: usize,
}

// SAFETY: a communicator is used by one thread at a time (its rank's); NCCL
// allows a communicator made on one thread to be used on another.
unsafe impl Send for Comm {}

impl Comm {
    /// One communicator per device of this process (`ncclCommInitAll`):
    /// rank `k` is device `ordinals[k]`.
    pub fn init_all(ordinals: &[i32]) -> GpuResult<Vec<Comm>> {
        let l = nccl("ncclCommInitAll")?;
        let n = ordinals.len();
        let mut raw = vec![std::ptr::null_mut(); n];
        // SAFETY: `raw` has room for one communicator per device.
        check(l, "ncclCommInitAll", unsafe {
            (l.comm_init_all)(raw.as_mut_ptr(), n as c_int, ordinals.as_ptr())
        })?;
        Ok(raw
            .into_iter()
            .enumerate()
            .map(|(rank, raw)| Comm {
                raw,
                lib: l,
                rank,
                world_size: n,
            })
            .collect())
    }

    /// This process's communicator among `world_size` launched ranks. The
    /// device is the one whose context is current on this thread (bind it
    /// first), as with `cudaSetDevice` before `ncclCommInitRank`.
    pub fn init_rank(world_size: usize, id: &[u8; ID_BYTES], rank: usize) -> GpuResult<Comm> {
        let l = nccl("ncclCommInitRank")?;
        let id = UniqueId {
            internal: id.map(|b| b as c_char),
        };
        let mut raw = std::ptr::null_mut();
        // SAFETY: an out-pointer to a local; the id is passed by value.
        check(l, "ncclCommInitRank", unsafe {
            (l.comm_init_rank)(&mut raw, world_size as c_int, id, rank as c_int)
        })?;
        Ok(Comm {
            raw,
            lib: l,
            rank,
            world_size,
        })
    }

    /// Enqueues an all-reduce of `count` elements on `stream`; in place
    /// when `send == recv`.
    ///
    /// # Safety
    /// Both pointers hold `count` elements of `elem` on this rank's device
    /// and stay alive until the stream has run the reduction.
    pub unsafe fn all_reduce(
        &self,
        send: *const c_void,
        recv: *mut c_void,
        count: usize,
        elem: Elem,
        op: Reduce,
        stream: &CudaStream,
    ) -> GpuResult<()> {
        let op = raw_op(op, self.world_size);
        let l = self.lib;
        check(
            l,
            "ncclAllReduce",
            (l.all_reduce)(
                send,
                recv,
                count,
                elem.raw(),
                op,
                self.raw,
                stream.cu_stream() as *mut c_void,
            ),
        )
    }
}

/// `ncclRedOp_t` for `op` among `world_size` ranks: ncclSum 0, ncclMax 2,
/// ncclAvg 4 (NCCL 2.10 and later). The mean over one rank is its input,
/// so it goes to NCCL as a sum, which NCCL makes a copy (or nothing, in
/// place). A float mean at one rank runs NCCL's `oneRankReduce` kernel
/// instead, and from 2.19 to 2.29.3 that kernel's blocks (up to 32) cover
/// only `blocks x alignUp(count / blocks, 16 bytes)` elements: where
/// `count / blocks` is a whole number of 16-byte packs, the last
/// `count % blocks` elements of an out-of-place result were never written
/// (2^24+1 f32: the last one). Fixed in 2.29.7 (`src/device/onerank.cu`).
fn raw_op(op: Reduce, world_size: usize) -> c_int {
    match op {
        Reduce::Avg if world_size == 1 => 0,
        Reduce::Sum => 0,
        Reduce::Max => 2,
        Reduce::Avg => 4,
    }
}

impl Drop for Comm {
    fn drop(&mut self) {
        // SAFETY: the communicator is live and dropped once. A failure here
        // has nobody to report to.
        unsafe {
            (self.lib.comm_destroy)(self.raw);
        }
    }
}

/// Collectives enqueued between [`group_start`] and [`group_end`] launch
/// together (one call for a bucket's parameters, or for every GPU of this
/// process).
pub fn group_start() -> GpuResult<()> {
    let l = nccl("ncclGroupStart")?;
    // SAFETY: no arguments.
    check(l, "ncclGroupStart", unsafe { (l.group_start)() })
}

pub fn group_end() -> GpuResult<()> {
    let l = nccl("ncclGroupEnd")?;
    // SAFETY: no arguments.
    check(l, "ncclGroupEnd", unsafe { (l.group_end)() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_codes_read_as_nccl_writes_them() {
        assert_eq!(version_name(23203), "2.32.3");
        assert_eq!(version_name(21805), "2.18.5");
        assert_eq!(version_name(2804), "2.8.4");
    }

    #[test]
    fn a_mean_over_one_rank_goes_to_nccl_as_a_sum() {
        assert_eq!(raw_op(Reduce::Avg, 1), raw_op(Reduce::Sum, 1));
        for n in [2, 3, 8, 64] {
            assert_eq!(raw_op(Reduce::Avg, n), 4);
            assert_eq!(raw_op(Reduce::Sum, n), 0);
            assert_eq!(raw_op(Reduce::Max, n), 2);
        }
        assert_eq!(raw_op(Reduce::Max, 1), 2);
    }

    /// CI's real-library stage: pip's NCCL loads, says its version and
    /// makes unique ids without a driver.
    #[test]
    fn real_libs_nccl_loads_and_answers() {
        let why = missing();
        if !crate::backend::cuda::gpu_lib_for_test("NCCL (libnccl.so.2)", why.is_none()) {
            return;
        }
        let v = version().expect("ncclGetVersion");
        assert!(v.starts_with("2."), "{v}");
        let (a, b) = (unique_id().expect("an id"), unique_id().expect("an id"));
        assert!(a.iter().any(|&x| x != 0));
        assert_ne!(a, b, "each id is new");
    }
}
