//! Launch wrappers of `sigmoid_bce.cu` (sigmoid with binary cross-entropy,
//! mean over the batch), on the compiled [`Kernels`].

use crate::backend::cuda::kernel_name::{per_storage, PerStorage};
use crate::backend::cuda::nvrtc::{blocks_for, invalid, to_i32, Arg, Kernels, Program};
use crate::backend::cuda::GpuResult;
use crate::core::dtype::Storage;
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::CudaStream;

/// One instance per storage of the logits ([`per_storage!`]).
pub(crate) const BCE_FWD: PerStorage = per_storage!("sigmoid_bce_fwd");
pub(crate) const BCE_BWD: PerStorage = per_storage!("sigmoid_bce_bwd");

/// `sigmoid_bce.cu` and its kernels.
pub const PROGRAM: Program = Program {
    file: "sigmoid_bce.cu",
    source: include_str!("sigmoid_bce.cu"),
    per_storage: &[BCE_FWD, BCE_BWD],
    single: &[],
};

impl Kernels {
    /// The mean sigmoid cross-entropy of `batch` logits (storage `st`)
    /// against 0/1 `labels`, into `loss_out[0]` (f32), in one block.
    ///
    /// # Safety
    ///
    /// `logits` must hold `batch` elements of `st`, `labels` `batch` u32s
    /// (each 0 or 1) and `loss_out` one f32, live until the work completes
    /// on `stream`; `loss_out` must not overlap the others.
    pub unsafe fn sigmoid_bce_fwd(
        &self,
        stream: &CudaStream,
        st: Storage,
        logits: CUdeviceptr,
        labels: CUdeviceptr,
        loss_out: CUdeviceptr,
        batch: usize,
    ) -> GpuResult<()> {
        let name = BCE_FWD.name(st);
        if batch == 0 {
            return Err(invalid(name, "an empty batch".into()));
        }
        let args = [
            Arg::Ptr(logits),
            Arg::Ptr(labels),
            Arg::Ptr(loss_out),
            Arg::I32(to_i32(name, "batch", batch)?),
        ];
        // SAFETY: one block; (const T* z, const u32* labels, float* out,
        // int n) with the caller's sizes.
        unsafe { self.launch(stream, name, 1, &args) }
    }

    /// The mean loss's gradient, `dlogits = (σ(z) − y) / batch`, in
    /// storage `st`.
    ///
    /// # Safety
    ///
    /// `logits` and `dlogits` must hold `batch` elements of `st` and
    /// `labels` `batch` u32s, live until the work completes on `stream`;
    /// `dlogits` may equal `logits` but must not overlap `labels`.
    pub unsafe fn sigmoid_bce_bwd(
        &self,
        stream: &CudaStream,
        st: Storage,
        logits: CUdeviceptr,
        labels: CUdeviceptr,
        dlogits: CUdeviceptr,
        batch: usize,
    ) -> GpuResult<()> {
        let name = BCE_BWD.name(st);
        if batch == 0 {
            return Ok(());
        }
        let n = to_i32(name, "batch", batch)?;
        let args = [
            Arg::Ptr(logits),
            Arg::Ptr(labels),
            Arg::Ptr(dlogits),
            Arg::I32(n),
        ];
        // SAFETY: (const T* z, const u32* labels, T* dz, int n) with the
        // caller's sizes.
        unsafe { self.launch(stream, name, blocks_for(batch as u64), &args) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sigmoid_bce.cu` run on the host (`backend::cuda::emu`) as the
    /// wrappers launch it, against the CPU's f64 loss and gradient: more
    /// images than a block has threads, saturated logits among them.
    #[test]
    fn emulated_sigmoid_bce_matches_the_cpu() {
        use crate::backend::cuda::emu::{self, EmuRun};
        use cnnbench_kernels::loss;
        use cnnbench_kernels::rng::fill_uniform;
        if !emu::available() {
            return;
        }
        let batch = 600;
        let mut z = vec![0.0f32; batch];
        fill_uniform(&mut z, 5, 6.0);
        z[0] = 60.0;
        z[1] = -60.0;
        let labels: Vec<u32> = (0..batch as u32).map(|i| (i * 7 / 3) % 2).collect();
        let want = loss::sigmoid_bce_fwd(&z, &labels);
        let mut dz = vec![0.0; batch];
        loss::sigmoid_bce_bwd(&z, &labels, &mut dz);
        let labels_cpp = labels
            .iter()
            .map(|l| format!("{l}u"))
            .collect::<Vec<_>>()
            .join(", ");
        let main = format!(
            "auto z = emu_load<F32>(\"z.bin\", {batch});
             std::vector<u32> labels = {{{labels_cpp}}};
             std::vector<float> loss(1, NAN), dz({batch}, NAN);
             emu_launch(1, [&] {{ sigmoid_bce_fwd_f32(z.data(), labels.data(), loss.data(), {batch}); }});
             emu_launch(2, [&] {{ sigmoid_bce_bwd_f32(z.data(), labels.data(), dz.data(), {batch}); }});
             emu_save<F32>(\"loss.bin\", loss);
             emu_save<F32>(\"dz.bin\", dz);"
        );
        let got = EmuRun {
            program: &PROGRAM,
            main,
            inputs: vec![("z.bin".into(), z)],
            outputs: vec![("loss.bin".into(), 1), ("dz.bin".into(), batch)],
        }
        .run();
        // Both in double: the same to f32 rounding, the sum's order apart.
        assert!(
            ((got[0][0] - want) / want).abs() < 1e-6,
            "{} vs {want}",
            got[0][0]
        );
        for (i, (a, b)) in got[1].iter().zip(&dz).enumerate() {
            assert!((a - b).abs() <= 1e-6 * b.abs(), "dz[{i}]: {a} vs {b}");
        }
    }
}
