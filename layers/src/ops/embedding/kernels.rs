//! Launch wrappers of `embedding.cu` (row gather, atomic scatter-add
//! gradient), on the compiled [`Kernels`].

use crate::backend::cuda::kernel_name::{per_storage, PerStorage};
use crate::backend::cuda::nvrtc::{blocks_for, invalid, to_i32, to_u64, Arg, Kernels, Program};
use crate::backend::cuda::GpuResult;
use crate::core::dtype::Storage;
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::CudaStream;

/// One instance per storage of the output (and its gradient)
/// ([`per_storage!`]).
pub(crate) const EMBEDDING_FWD: PerStorage = per_storage!("embedding_fwd");
pub(crate) const EMBEDDING_BWD: PerStorage = per_storage!("embedding_bwd");

/// `embedding.cu` and its kernels.
pub const PROGRAM: Program = Program {
    file: "embedding.cu",
    source: include_str!("embedding.cu"),
    per_storage: &[EMBEDDING_FWD, EMBEDDING_BWD],
    single: &[],
};

/// An embedding's sizes: `n` sequences of `t` tokens, rows of `dim`
/// features out of `vocab`, the output NCHW (`[n][dim][1][t]`) when
/// `nchw`, else NHWC (`[n][t][dim]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmbeddingDims {
    pub n: usize,
    pub t: usize,
    pub dim: usize,
    pub vocab: usize,
    pub nchw: bool,
}

impl EmbeddingDims {
    /// The kernels' arguments after their pointers, and the output's
    /// element count (0: nothing to launch).
    fn args(&self, name: &'static str) -> GpuResult<(Vec<Arg>, u64)> {
        let tokens = self
            .n
            .checked_mul(self.t)
            .ok_or_else(|| invalid(name, format!("{}·{} tokens", self.n, self.t)))?;
        let len = tokens
            .checked_mul(self.dim)
            .ok_or_else(|| invalid(name, format!("{tokens}·{} elements", self.dim)))?;
        let args = vec![
            Arg::U64(to_u64(name, tokens)?),
            Arg::I32(to_i32(name, "dim", self.dim)?),
            Arg::I32(to_i32(name, "vocab", self.vocab)?),
            Arg::I32(to_i32(name, "t", self.t)?),
            Arg::I32(self.nchw as i32),
        ];
        Ok((args, to_u64(name, len)?))
    }
}

impl Kernels {
    /// `y = table[ids]`: each token's row of the f32 `table`
    /// (`[vocab][dim]`) into `y` in storage `st`. An id that is not a
    /// whole number below `vocab` gets a row of zeros (the CPU refuses it).
    ///
    /// # Safety
    ///
    /// `ids` must hold `n·t` f32s, `table` `vocab·dim` f32s and `y`
    /// `n·t·dim` elements of `st`, live until the work completes on
    /// `stream`; `y` must not overlap the others.
    pub unsafe fn embedding_fwd(
        &self,
        stream: &CudaStream,
        st: Storage,
        ids: CUdeviceptr,
        table: CUdeviceptr,
        y: CUdeviceptr,
        d: EmbeddingDims,
    ) -> GpuResult<()> {
        let name = EMBEDDING_FWD.name(st);
        let (rest, len) = d.args(name)?;
        if len == 0 {
            return Ok(());
        }
        let mut args = vec![Arg::Ptr(ids), Arg::Ptr(table), Arg::Ptr(y)];
        args.extend(rest);
        // SAFETY: (const float* ids, const float* table, T* y, u64 tokens,
        // int dim, int vocab, int t, int nchw) with the caller's sizes.
        unsafe { self.launch(stream, name, blocks_for(len), &args) }
    }

    /// The table's gradient: `grad[ids[k]] += dy[k]` for every token `k`,
    /// `dy` in storage `st` and layout as `y`. `grad` (f32, `[vocab][dim]`)
    /// must be zeroed first, on the same stream. Ids out of range add
    /// nothing.
    ///
    /// # Safety
    ///
    /// `ids` must hold `n·t` f32s, `dy` `n·t·dim` elements of `st` and
    /// `grad` `vocab·dim` f32s, live until the work completes on `stream`;
    /// `grad` must not overlap the others.
    pub unsafe fn embedding_bwd(
        &self,
        stream: &CudaStream,
        st: Storage,
        ids: CUdeviceptr,
        dy: CUdeviceptr,
        grad: CUdeviceptr,
        d: EmbeddingDims,
    ) -> GpuResult<()> {
        let name = EMBEDDING_BWD.name(st);
        let (rest, len) = d.args(name)?;
        if len == 0 {
            return Ok(());
        }
        let mut args = vec![Arg::Ptr(ids), Arg::Ptr(dy), Arg::Ptr(grad)];
        args.extend(rest);
        // SAFETY: (const float* ids, const T* dy, float* grad, u64 tokens,
        // int dim, int vocab, int t, int nchw) with the caller's sizes.
        unsafe { self.launch(stream, name, blocks_for(len), &args) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cuda::emu::{self, EmuRun};
    use crate::core::layout::nhwc_to_nchw;
    use cnnbench_kernels::embedding;
    use cnnbench_kernels::rng::fill_uniform;

    /// One emulated forward and backward of `storage` (`f32`, `f16`,
    /// `bf16`) over `ids`, in both layouts: per layout, `y` and the table
    /// gradient, both back in NHWC order.
    fn emulate(
        storage: &str,
        d: EmbeddingDims,
        ids: &[f32],
        table: &[f32],
        dy: &[f32],
    ) -> Vec<(Vec<f32>, Vec<f32>)> {
        let ty = emu::storage_type(storage);
        let (tokens, len, rows) = (d.n * d.t, d.n * d.t * d.dim, d.vocab * d.dim);
        let mut main = format!(
            "auto ids = emu_load<F32>(\"ids.bin\", {tokens});
             auto table = emu_load<F32>(\"table.bin\", {rows});\n"
        );
        let mut inputs = vec![
            ("ids.bin".into(), ids.to_vec()),
            ("table.bin".into(), table.to_vec()),
        ];
        let mut outputs = Vec::new();
        for nchw in [false, true] {
            let dy = if nchw {
                nhwc_to_nchw(dy, d.n, 1, d.t, d.dim)
            } else {
                dy.to_vec()
            };
            inputs.push((format!("dy{nchw}.bin"), dy));
            let n = nchw as i32;
            // The gradient starts as NaN but for the zeroing the layer
            // does first (a memset there).
            main += &format!(
                "{{ auto dy = emu_load<{ty}>(\"dy{nchw}.bin\", {len});
                   std::vector<{ty}::T> y({len});
                   std::vector<float> g({rows}, 0.0f);
                   emu_launch(3, [&] {{ embedding_fwd_{storage}(ids.data(), table.data(), y.data(),
                       {tokens}ull, {dim}, {vocab}, {t}, {n}); }});
                   emu_launch(3, [&] {{ embedding_bwd_{storage}(ids.data(), dy.data(), g.data(),
                       {tokens}ull, {dim}, {vocab}, {t}, {n}); }});
                   emu_save<{ty}>(\"y{nchw}.bin\", y);
                   emu_save<F32>(\"g{nchw}.bin\", g); }}\n",
                dim = d.dim,
                vocab = d.vocab,
                t = d.t,
            );
            outputs.push((format!("y{nchw}.bin"), len));
            outputs.push((format!("g{nchw}.bin"), rows));
        }
        let got = EmuRun {
            program: &PROGRAM,
            main,
            inputs,
            outputs,
        }
        .run();
        got.chunks(2)
            .zip([false, true])
            .map(|(p, nchw)| {
                let y = if nchw {
                    crate::core::layout::nchw_to_nhwc(&p[0], d.n, 1, d.t, d.dim)
                } else {
                    p[0].clone()
                };
                (y, p[1].clone())
            })
            .collect()
    }

    fn close(what: &str, got: &[f32], want: &[f32], tol: f32) {
        assert_eq!(got.len(), want.len(), "{what}");
        for (i, (a, b)) in got.iter().zip(want).enumerate() {
            assert!(
                (a - b).abs() <= tol * b.abs().max(1.0),
                "{what}[{i}]: {a} vs {b}"
            );
        }
    }

    /// `embedding.cu` run on the host (`backend::cuda::emu`) against the
    /// CPU's lookup and gradient, in both layouts and every storage; ids
    /// repeat, so the atomic additions race (ThreadSanitizer watches).
    #[test]
    fn emulated_embedding_matches_the_cpu() {
        if !emu::available() {
            return;
        }
        let d = EmbeddingDims {
            n: 3,
            t: 7,
            dim: 5,
            vocab: 9,
            nchw: false,
        };
        let ids: Vec<f32> = (0..d.n * d.t).map(|k| ((k * 7) % 4 * 2) as f32).collect();
        let mut table = vec![0.0; d.vocab * d.dim];
        fill_uniform(&mut table, 3, 1.0);
        let mut dy = vec![0.0; d.n * d.t * d.dim];
        fill_uniform(&mut dy, 4, 1.0);
        for (storage, dtype) in [
            ("f32", crate::core::DType::F32),
            ("f16", crate::core::DType::F16),
            ("bf16", crate::core::DType::Bf16),
        ] {
            // What the run's storage holds: the rounded table rows and
            // gradient.
            let mut dy_st = dy.clone();
            dtype.round_in_place(&mut dy_st);
            let mut y = vec![0.0; dy.len()];
            embedding::forward(&table, d.dim, &ids, &mut y).expect("valid ids");
            dtype.round_in_place(&mut y);
            let mut grad = vec![f32::NAN; table.len()];
            embedding::backward(&mut grad, d.dim, &ids, &dy_st);
            for (nchw, (gy, gg)) in [false, true]
                .iter()
                .zip(emulate(storage, d, &ids, &table, &dy))
            {
                assert_eq!(gy, y, "{storage} y, nchw={nchw}");
                // Sums of a few values in another order.
                close(&format!("{storage} grad, nchw={nchw}"), &gg, &grad, 1e-5);
            }
        }
    }

    /// Ids the CPU refuses select no row: zeros out, nothing back.
    #[test]
    fn emulated_embedding_skips_ids_outside_the_vocabulary() {
        if !emu::available() {
            return;
        }
        let d = EmbeddingDims {
            n: 1,
            t: 6,
            dim: 3,
            vocab: 4,
            nchw: false,
        };
        let ids = [1.0, -1.0, 4.0, 1.5, f32::NAN, 3.0];
        let table: Vec<f32> = (0..12).map(|v| v as f32 + 1.0).collect();
        let dy = vec![1.0; 18];
        for (gy, gg) in emulate("f32", d, &ids, &table, &dy) {
            let mut want_y = vec![0.0; 18];
            want_y[..3].copy_from_slice(&table[3..6]);
            want_y[15..].copy_from_slice(&table[9..12]);
            assert_eq!(gy, want_y);
            let mut want_g = vec![0.0; 12];
            want_g[3..6].fill(1.0);
            want_g[9..12].fill(1.0);
            assert_eq!(gg, want_g);
        }
    }
}
