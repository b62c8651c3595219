//! Launch wrapper of `add.cu` (the residual add on 16-byte vectors, the
//! `--own-kernels` path), on the compiled [`Kernels`].

use crate::backend::cuda::kernel_name::{per_storage, PerStorage};
use crate::backend::cuda::nvrtc::{to_u64, vector_blocks, Arg, Kernels, Program};
use crate::backend::cuda::GpuResult;
use crate::core::dtype::Storage;
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::CudaStream;

/// One instance per storage ([`per_storage!`]).
pub(crate) const ADD_FWD: PerStorage = per_storage!("add_fwd");
/// The add with the ReLU after it in the same pass.
pub(crate) const ADD_RELU_FWD: PerStorage = per_storage!("add_relu_fwd");

/// `add.cu` and its kernels.
pub const PROGRAM: Program = Program {
    file: "add.cu",
    source: include_str!("add.cu"),
    per_storage: &[ADD_FWD, ADD_RELU_FWD],
    single: &[],
};

impl Kernels {
    /// `y = a + b` (`relu(a + b)` with `relu`) over `n` elements of
    /// storage `st`.
    ///
    /// # Safety
    ///
    /// `a`, `b` and `y` must hold `n` elements of `st` and live until the
    /// work completes on `stream`; `y` may be `a` or `b`, not otherwise
    /// overlap them.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn add_fwd(
        &self,
        stream: &CudaStream,
        st: Storage,
        a: CUdeviceptr,
        b: CUdeviceptr,
        y: CUdeviceptr,
        n: usize,
        relu: bool,
    ) -> GpuResult<()> {
        let name = if relu { ADD_RELU_FWD } else { ADD_FWD }.name(st);
        let n = to_u64(name, n)?;
        if n == 0 {
            return Ok(());
        }
        let args = [Arg::Ptr(a), Arg::Ptr(b), Arg::Ptr(y), Arg::U64(n)];
        // SAFETY: (const T* a, const T* b, T* y, u64 n) with the caller's
        // sizes.
        unsafe { self.launch(stream, name, vector_blocks(st, n), &args) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cuda::emu;
    use crate::ops::relu::kernels::tests::{
        emulate_eltwise, layouts, same, values, EltwiseCase, STORAGES,
    };

    /// `add.cu` on the host against the CPU's sum, in every storage, on
    /// lengths and starts that take the vector body and its tail, a peeled
    /// head and the scalar fallback; NaNs pass through.
    #[test]
    fn emulated_add_matches_the_cpu() {
        check_add("add_fwd", |v| v);
    }

    /// `add_relu_fwd`: the sum's ReLU in the same pass (a NaN stays NaN,
    /// as the own ReLU's), on the same layouts.
    #[test]
    fn emulated_add_relu_matches_the_cpu() {
        check_add(
            "add_relu_fwd",
            |v| if v > 0.0 || v.is_nan() { v } else { 0.0 },
        );
    }

    /// Kernel `name` against `then(a + b)`, rounded once to the storage.
    fn check_add(name: &str, then: impl Fn(f32) -> f32) {
        if !emu::available() {
            return;
        }
        for (storage, dtype) in STORAGES {
            let (mut cases, mut want) = (Vec::new(), Vec::new());
            for (n, offs, out) in layouts(2) {
                let (mut a, mut b) = (values(n, 4, true), values(n, 5, false));
                dtype.round_in_place(&mut a);
                dtype.round_in_place(&mut b);
                let mut y: Vec<f32> = a.iter().zip(&b).map(|(a, b)| then(a + b)).collect();
                dtype.round_in_place(&mut y);
                cases.push(EltwiseCase {
                    n,
                    inputs: vec![(a, offs[0]), (b, offs[1])],
                    out_offset: out,
                    call: format!("{name}_{storage}({{in0}}, {{in1}}, {{out}}, {{n}})"),
                    in_place: None,
                });
                want.push((format!("{storage} {name} n={n} {offs:?}"), y));
            }
            let got = emulate_eltwise(&PROGRAM, storage, &cases);
            for (got, (what, want)) in got.iter().zip(&want) {
                same(what, got, want);
            }
        }
    }
}
