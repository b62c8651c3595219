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

/// The sorted gradient's launches ([`EmbeddingDims::sorted_bwd_launches`],
/// exactly what the layer runs) emulated twice in storage `storage`:
/// both table gradients, from a zeroed start.
fn emulate_sorted(storage: &str, d: EmbeddingDims, ids: &[f32], dy: &[f32]) -> Vec<Vec<f32>> {
    use crate::backend::cuda::emu::render;
    let ty = emu::storage_type(storage);
    let st = match storage {
        "f32" => Storage::F32,
        "f16" => Storage::F16,
        _ => Storage::Bf16,
    };
    let len = d.sort_scratch().unwrap();
    let (tokens, rows) = (d.n * d.t, d.vocab * d.dim);
    let mut main = format!(
        "auto ids = emu_load<F32>(\"ids.bin\", {tokens});
         auto dy = emu_load<{ty}>(\"dy.bin\", {tokens} * {dim});
         std::vector<u32> keys0({tokens}), keys1({tokens}), vals0({tokens}), vals1({tokens});
         std::vector<u32> hist({hist});
         std::vector<float> head({p}, NAN), tail({p}, NAN);\n",
        dim = d.dim,
        hist = len.hist,
        p = len.partials,
    );
    let name = |b: SortBuf| match b {
        SortBuf::Ids => "ids.data()".to_string(),
        SortBuf::Dy => "dy.data()".into(),
        SortBuf::Grad => "g.data()".into(),
        SortBuf::Keys(k) => format!("keys{k}.data()"),
        SortBuf::Vals(k) => format!("vals{k}.data()"),
        SortBuf::Hist => "hist.data()".into(),
        SortBuf::Head => "head.data()".into(),
        SortBuf::Tail => "tail.data()".into(),
        SortBuf::Null => "nullptr".into(),
    };
    let mut outputs = Vec::new();
    for run in 0..2 {
        main += &format!("{{ std::vector<float> g({rows}, 0.0f);\n");
        for l in d.sorted_bwd_launches(st).unwrap() {
            let args: Vec<String> = l
                .args
                .iter()
                .map(|a| match *a {
                    SortArg::Buf(b) => name(b),
                    SortArg::Val(v) => render(&[v]),
                })
                .collect();
            main += &format!(
                "emu_launch({}, [&] {{ {}({}); }});\n",
                l.grid,
                l.name,
                args.join(", ")
            );
        }
        main += &format!("emu_save<F32>(\"g{run}.bin\", g); }}\n");
        outputs.push((format!("g{run}.bin"), rows));
    }
    EmuRun {
        program: &PROGRAM,
        main,
        inputs: vec![
            ("ids.bin".into(), ids.to_vec()),
            ("dy.bin".into(), dy.to_vec()),
        ],
        outputs,
    }
    .run()
}

/// The sorted gradient on the host against the CPU's token-order sums:
/// two radix passes (a vocabulary over 256), several sort tiles, a
/// frequent row (a padding id) across many chunks, ids outside the
/// vocabulary, both layouts and every storage; two runs agree bit for
/// bit (no atomics: the order is fixed).
#[test]
fn emulated_sorted_gradient_matches_the_cpu() {
    if !emu::available() {
        return;
    }
    let cases = [
        EmbeddingDims {
            n: 3,
            t: 450,
            dim: 5,
            vocab: 300,
            nchw: false,
        },
        EmbeddingDims {
            n: 2,
            t: 45,
            dim: 3,
            vocab: 9,
            nchw: true,
        },
    ];
    for d in cases {
        let tokens = d.n * d.t;
        // Every other token the padding id 0, the rest spread (with
        // repeats), a few not in the vocabulary.
        let mut ids: Vec<f32> = (0..tokens)
            .map(|k| {
                if k % 2 == 0 {
                    0.0
                } else {
                    ((k * 7919) % d.vocab) as f32
                }
            })
            .collect();
        for (k, bad) in [(1, -1.0), (3, d.vocab as f32), (5, 1.5), (7, f32::NAN)] {
            ids[k] = bad;
        }
        let mut dy = vec![0.0; tokens * d.dim];
        fill_uniform(&mut dy, 9, 1.0);
        for (storage, dtype) in [
            ("f32", crate::core::DType::F32),
            ("f16", crate::core::DType::F16),
            ("bf16", crate::core::DType::Bf16),
        ] {
            let mut dy_st = dy.clone();
            dtype.round_in_place(&mut dy_st);
            // The CPU's sums over the ids it accepts.
            let mut want = vec![0.0f32; d.vocab * d.dim];
            for (k, &id) in ids.iter().enumerate() {
                if let Ok(r) = embedding::row_of(id, d.vocab) {
                    for j in 0..d.dim {
                        want[r * d.dim + j] += dy_st[k * d.dim + j];
                    }
                }
            }
            let dy_in = if d.nchw {
                nhwc_to_nchw(&dy, d.n, 1, d.t, d.dim)
            } else {
                dy.clone()
            };
            let got = emulate_sorted(storage, d, &ids, &dy_in);
            let what = format!("{storage} {d:?}");
            assert_eq!(
                got[0].iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                got[1].iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                "{what}: two runs differ"
            );
            close(&what, &got[0], &want, 1e-5);
            // A row whose tokens sort into one chunk (SEG_CHUNK), or
            // that no token selects, is the CPU's sum bit for bit.
            let mut order: Vec<(usize, usize)> = ids
                .iter()
                .enumerate()
                .filter_map(|(k, &id)| embedding::row_of(id, d.vocab).ok().map(|r| (r, k)))
                .collect();
            order.sort_unstable();
            let mut chunks = vec![(usize::MAX, 0); d.vocab];
            for (pos, &(r, _)) in order.iter().enumerate() {
                let c = &mut chunks[r];
                *c = (c.0.min(pos / SEG_CHUNK), c.1.max(pos / SEG_CHUNK));
            }
            let inside: Vec<usize> = (0..d.vocab)
                .filter(|&r| chunks[r].0 == chunks[r].1 || chunks[r].0 == usize::MAX)
                .collect();
            assert!(inside.len() > d.vocab / 2, "{what}");
            for r in inside {
                let row = r * d.dim..(r + 1) * d.dim;
                assert_eq!(got[0][row.clone()], want[row], "{what}: row {r}");
            }
        }
    }
}

#[test]
fn sorted_gradient_sizes_are_checked() {
    let d = EmbeddingDims {
        n: 128,
        t: 400,
        dim: 50,
        vocab: 20_000,
        nchw: false,
    };
    let len = d.sort_scratch().unwrap();
    assert_eq!(len.tokens, 51_200);
    assert_eq!(len.hist, 256 * 50);
    assert_eq!(len.partials, 1600 * 50);
    // 2 radix passes of 3 launches, then the sums and the carries.
    let launches = d.sorted_bwd_launches(Storage::F16).unwrap();
    let names: Vec<&str> = launches.iter().map(|l| l.name).collect();
    assert_eq!(names.len(), 8);
    assert_eq!(names[6], "embedding_seg_sum_f16");
    let huge = EmbeddingDims { n: 1 << 20, ..d };
    assert!(huge.sort_scratch().is_err());
    let empty = EmbeddingDims { n: 0, ..d };
    assert!(empty.sorted_bwd_launches(Storage::F32).unwrap().is_empty());
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
