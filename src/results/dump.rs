//! `--dump DIR`: every tensor of a problem as float32 `.npy` in logical
//! order (N,C,H,W activations; K,C/g,R,S weights), with `problem.json`, so
//! any framework can recompute and compare.

use anyhow::{Context, Result};
use cnnbench_kernels::conv::Direction;
use cnnbench_layers::conv::ConvTensors;
use cnnbench_layers::layout::{ghwio_to_kcrs, nhwc_to_nchw};
use npyz::WriterBuilder;
use serde_json::json;
use std::io::BufWriter;
use std::path::Path;

/// Writes `data` as a float32 `.npy` of `shape` at `path`. A write that
/// fails part way (a full disk, `ulimit -f`) removes the file: a dump
/// never holds a truncated tensor.
pub(crate) fn write_npy(path: &Path, shape: &[usize], data: &[f32]) -> Result<()> {
    removed_on_error(path, write_npy_file(path, shape, data))
}

/// Writes `text` to `path` (a dump's `problem.json`), removing the file
/// when the write fails part way.
pub(crate) fn write_doc(path: &Path, text: &str) -> Result<()> {
    removed_on_error(
        path,
        std::fs::write(path, text).with_context(|| format!("cannot write '{}'", path.display())),
    )
}

fn removed_on_error(path: &Path, written: Result<()>) -> Result<()> {
    if written.is_err() {
        let _ = std::fs::remove_file(path);
    }
    written
}

fn write_npy_file(path: &Path, shape: &[usize], data: &[f32]) -> Result<()> {
    let file = std::fs::File::create(path)
        .with_context(|| format!("cannot create '{}'", path.display()))?;
    let shape: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
    let mut w = npyz::WriteOptions::<f32>::new()
        .default_dtype()
        .shape(&shape)
        .writer(BufWriter::new(file))
        .begin_nd()
        .with_context(|| format!("writing '{}'", path.display()))?;
    w.extend(data.iter().copied())
        .with_context(|| format!("writing '{}'", path.display()))?;
    w.finish()
        .with_context(|| format!("writing '{}'", path.display()))
}

/// The folder of problem `index` in a dump of several: `003_NAME`, or the
/// problem's own text for unnamed problems, with anything but
/// `[A-Za-z0-9._-]` made `-`.
pub fn folder_name(index: usize, name: Option<&str>, unnamed: impl FnOnce() -> String) -> String {
    let base = name.map_or_else(unnamed, str::to_owned);
    let clean: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("{index:03}_{clean}")
}

/// What produced the outputs being dumped.
pub struct DumpInfo<'a> {
    pub problem: &'a str,
    pub name: Option<&'a str>,
    pub seed: u64,
    pub dirs: &'a [(Direction, bool)],
    pub algo_per_dir: &'a [(Direction, String)],
}

/// Every file a dump writes: what an earlier dump into the same folder
/// may have left.
const DUMP_FILES: [&str; 9] = [
    "problem.json",
    "src.npy",
    "wei.npy",
    "bias.npy",
    "diff_dst.npy",
    "dst.npy",
    "diff_src.npy",
    "diff_wei.npy",
    "diff_bias.npy",
];

/// Writes the inputs and the outputs of the directions that ran into `dir`.
/// An earlier dump's files are removed first (only those: nothing else in
/// the folder is touched), and `problem.json` is written last, so the
/// folder never pairs a problem with another problem's tensors, and a dump
/// cut short has no `problem.json`.
pub fn dump(dir: &Path, t: &ConvTensors, info: &DumpInfo) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create '{}'", dir.display()))?;
    for f in DUMP_FILES {
        match std::fs::remove_file(dir.join(f)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e)
                    .with_context(|| format!("cannot remove '{}'", dir.join(f).display()));
            }
            _ => {}
        }
    }
    let p = &t.shape;
    let src_shape = [p.mb, p.ic, p.ih, p.iw];
    let dst_shape = [p.mb, p.oc, p.oh, p.ow];
    let wei_shape = [p.oc, p.icg(), p.kh, p.kw];
    let nchw_src = |x: &[f32]| nhwc_to_nchw(x, p.mb, p.ih, p.iw, p.ic);
    let nchw_dst = |x: &[f32]| nhwc_to_nchw(x, p.mb, p.oh, p.ow, p.oc);
    let mut files = vec![];
    let mut put = |name: &str, shape: &[usize], data: Vec<f32>| -> Result<()> {
        write_npy(&dir.join(format!("{name}.npy")), shape, &data)?;
        files.push(json!({"name": name, "file": format!("{name}.npy"), "shape": shape}));
        Ok(())
    };
    put("src", &src_shape, nchw_src(&t.src))?;
    put("wei", &wei_shape, ghwio_to_kcrs(&t.wei, p))?;
    put("bias", &[p.oc], t.bias.clone())?;
    put("diff_dst", &dst_shape, nchw_dst(&t.diff_dst))?;
    for &(d, bias) in info.dirs {
        match d {
            Direction::Fwd => put("dst", &dst_shape, nchw_dst(&t.dst))?,
            Direction::BwdData => put("diff_src", &src_shape, nchw_src(&t.diff_src))?,
            Direction::BwdFilter => {
                put("diff_wei", &wei_shape, ghwio_to_kcrs(&t.diff_wei, p))?;
                if bias {
                    put("diff_bias", &[p.oc], t.diff_bias.clone())?;
                }
            }
        }
    }
    let doc = json!({
        "problem": info.problem,
        "name": info.name,
        "shape": {
            "mb": p.mb, "g": p.g, "ic": p.ic, "ih": p.ih, "iw": p.iw, "oc": p.oc, "oh": p.oh, "ow": p.ow,
            "kh": p.kh, "kw": p.kw, "sh": p.sh, "sw": p.sw, "ph": p.ph, "pw": p.pw, "dh": p.dh, "dw": p.dw,
        },
        "dilation_convention": "oneDNN: dh0 is dense; PyTorch dilation = dh + 1",
        "file_order": "activations N,C,H,W; weights K,C/g,R,S (logical, whatever the compute layout)",
        "compute_layout": "nhwc",
        "dtype": "f32",
        "seed": info.seed,
        "directions": info.dirs.iter().map(|(d, b)| json!({"dir": d.name(), "bias": b})).collect::<Vec<_>>(),
        "algo": info.algo_per_dir.iter().map(|(d, a)| json!({"dir": d.name(), "algo": a})).collect::<Vec<_>>(),
        "files": files,
    });
    let text = serde_json::to_string_pretty(&doc)? + "\n";
    let doc_path = dir.join("problem.json");
    write_doc(&doc_path, &text)
}
