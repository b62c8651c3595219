//! Launch wrappers of `loss.cu` (softmax cross-entropy), on the compiled
//! [`Kernels`].

use crate::backend::cuda::kernel_name::{per_storage, PerStorage};
use crate::backend::cuda::nvrtc::{blocks_for, invalid, to_i32, to_u64, Arg, Kernels, Program};
use crate::backend::cuda::GpuResult;
use crate::core::dtype::Storage;
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::CudaStream;

pub(crate) const MEAN: &str = "mean_f32";

/// One instance per storage ([`per_storage!`]).
pub(crate) const XENT_FWD: PerStorage = per_storage!("softmax_xent_fwd");
pub(crate) const XENT_BWD: PerStorage = per_storage!("softmax_xent_bwd");

/// `loss.cu` and its kernels.
pub const PROGRAM: Program = Program {
    file: "loss.cu",
    source: include_str!("loss.cu"),
    per_storage: &[XENT_FWD, XENT_BWD],
    single: &[MEAN],
};

impl Kernels {
    /// Softmax cross-entropy forward over `batch` rows of `classes` logits
    /// (storage `st`): writes the f32 probabilities (for the backward),
    /// each row's loss, and their mean into `loss_out[0]`. A label outside
    /// `0..classes` makes its row's loss, and the mean, NaN.
    ///
    /// # Safety
    ///
    /// `logits` must hold `batch·classes` elements of `st`, `labels`
    /// `batch` u32s, `probs` `batch·classes` f32s, `row_loss` `batch`
    /// f32s and `loss_out` one f32, all live until the work completes on
    /// `stream`; the outputs must not overlap anything.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn softmax_xent_fwd(
        &self,
        stream: &CudaStream,
        st: Storage,
        logits: CUdeviceptr,
        labels: CUdeviceptr,
        probs: CUdeviceptr,
        row_loss: CUdeviceptr,
        loss_out: CUdeviceptr,
        batch: usize,
        classes: usize,
    ) -> GpuResult<()> {
        let name = XENT_FWD.name(st);
        if batch == 0 || classes == 0 {
            return Err(invalid(
                name,
                format!("empty input: batch {batch}, classes {classes}"),
            ));
        }
        let classes = to_i32(name, "classes", classes)?;
        let rows = to_i32(name, "batch", batch)?;
        let args = [
            Arg::Ptr(logits),
            Arg::Ptr(labels),
            Arg::Ptr(probs),
            Arg::Ptr(row_loss),
            Arg::I32(classes),
        ];
        // SAFETY: one block per row; (const T* logits, const u32* labels,
        // float* probs, float* row_loss, int classes), then (const float*
        // x, int n, float* out) in one block, with the caller's sizes.
        unsafe {
            self.launch(stream, name, rows as u32, &args)?;
            self.launch(
                stream,
                MEAN,
                1,
                &[Arg::Ptr(row_loss), Arg::I32(rows), Arg::Ptr(loss_out)],
            )
        }
    }

    /// Softmax cross-entropy backward of the mean loss:
    /// `dlogits = (probs − onehot(label)) / batch`, in storage `st`.
    ///
    /// # Safety
    ///
    /// `probs` must hold `batch·classes` f32s, `labels` `batch` u32s and
    /// `dlogits` `batch·classes` elements of `st`, live until the work
    /// completes on `stream`; `dlogits` must not overlap the others.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn softmax_xent_bwd(
        &self,
        stream: &CudaStream,
        st: Storage,
        probs: CUdeviceptr,
        labels: CUdeviceptr,
        dlogits: CUdeviceptr,
        batch: usize,
        classes: usize,
    ) -> GpuResult<()> {
        let name = XENT_BWD.name(st);
        let n = batch
            .checked_mul(classes)
            .ok_or_else(|| invalid(name, format!("{batch}·{classes} elements")))?;
        if n == 0 {
            return Ok(());
        }
        let args = [
            Arg::Ptr(probs),
            Arg::Ptr(labels),
            Arg::Ptr(dlogits),
            Arg::I32(to_i32(name, "classes", classes)?),
            Arg::I32(to_i32(name, "batch", batch)?),
        ];
        // SAFETY: (const float* probs, const u32* labels, T* dlogits, int
        // classes, int batch) with the caller's sizes.
        unsafe { self.launch(stream, name, blocks_for(to_u64(name, n)?), &args) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `loss.cu` run on the host (`backend::cuda::emu`) as the wrappers
    /// launch it, against the CPU's f64 softmax cross-entropy.
    #[test]
    fn emulated_softmax_xent_matches_the_cpu() {
        use crate::backend::cuda::emu::{self, EmuRun};
        use cnnbench_kernels::conv::reference::rel_l2_error;
        use cnnbench_kernels::loss;
        use cnnbench_kernels::rng::fill_uniform;
        if !emu::available() {
            return;
        }
        // More classes than a block has threads, as ImageNet's 1000.
        let (batch, classes) = (5, 1000);
        let labels: Vec<u32> = vec![0, 999, 3, 500, 257];
        let mut logits = vec![0.0f32; batch * classes];
        fill_uniform(&mut logits, 9, 4.0);
        let mut probs = vec![0.0; logits.len()];
        let want_loss = loss::softmax_xent_fwd(classes, &logits, &labels, &mut probs);
        let mut dlogits = vec![0.0; logits.len()];
        loss::softmax_xent_bwd(classes, &probs, &labels, &mut dlogits);
        let len = logits.len();
        let labels_cpp = labels
            .iter()
            .map(|l| format!("{l}u"))
            .collect::<Vec<_>>()
            .join(", ");
        let main = format!(
            "auto z = emu_load<F32>(\"z.bin\", {len});
             std::vector<u32> labels = {{{labels_cpp}}};
             std::vector<float> probs({len}, NAN), rows({batch}, NAN), loss(1, NAN), dz({len}, NAN);
             emu_launch({batch}, [&] {{ softmax_xent_fwd_f32(z.data(), labels.data(), probs.data(), rows.data(), {classes}); }});
             emu_launch(1, [&] {{ mean_f32(rows.data(), {batch}, loss.data()); }});
             emu_launch(3, [&] {{ softmax_xent_bwd_f32(probs.data(), labels.data(), dz.data(), {classes}, {batch}); }});
             emu_save<F32>(\"probs.bin\", probs);
             emu_save<F32>(\"loss.bin\", loss);
             emu_save<F32>(\"dz.bin\", dz);"
        );
        let got = EmuRun {
            program: &PROGRAM,
            main,
            inputs: vec![("z.bin".into(), logits)],
            outputs: vec![
                ("probs.bin".into(), len),
                ("loss.bin".into(), 1),
                ("dz.bin".into(), len),
            ],
        }
        .run();
        assert!(rel_l2_error(&got[0], &probs) < 1e-5);
        assert!(
            ((got[1][0] - want_loss) / want_loss).abs() < 1e-5,
            "{} vs {want_loss}",
            got[1][0]
        );
        assert!(rel_l2_error(&got[2], &dlogits) < 1e-5);
    }
}
