//! The embedding kernels run on the host (`backend::cuda::emu`) against
//! the CPU's lookup and gradient.

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
