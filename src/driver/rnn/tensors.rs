//! One RNN problem's tensors: seeded inputs, every pass's outputs, the
//! workspace, and `--dump` in PyTorch's layout.

use super::{reproducer, PASSES};
use crate::problem::rnn::RnnProblem;
use crate::results::dump::write_npy;
use crate::results::Dir;
use anyhow::{Context, Result};
use cnnbench_kernels::alloc::zeroed_huge;
use cnnbench_kernels::conv::reference::rel_l2_error;
use cnnbench_kernels::rnn::{
    self, Cell, Inputs, OutputGrads, Outputs, RnnShape, Weights, Workspace,
};
use cnnbench_kernels::Isa;
use cnnbench_layers::DType;
use serde_json::json;
use std::path::Path;

/// One problem's tensors, seeded, with every output and the workspace.
pub struct Tensors {
    pub x: Vec<f32>,
    pub hx: Vec<f32>,
    pub cx: Vec<f32>,
    pub weights: Vec<Weights>,
    pub dy: Vec<f32>,
    pub dhy: Vec<f32>,
    pub dcy: Vec<f32>,
    /// The passes' outputs (the GPU's, downloaded, when checking).
    pub out: Outputs,
}

impl Tensors {
    /// Values in [-1, 1) (states and gradients halved); weights at
    /// PyTorch's initial scale, 1/sqrt(hidden), so that the gates neither
    /// saturate nor vanish.
    pub fn new(s: &RnnShape, seed: u64) -> Tensors {
        let filled = |len: usize, k: u64, scale: f32| {
            let mut v = zeroed_huge(len);
            cnnbench_kernels::rng::fill_uniform(
                &mut v,
                seed.wrapping_mul(1000).wrapping_add(k),
                scale,
            );
            v
        };
        let scale = 1.0 / (s.hidden as f32).sqrt();
        let weights = (0..s.sets())
            .map(|set| {
                let mut w = Weights::zeros(s, set);
                for (i, t) in w.tensors_mut().into_iter().enumerate() {
                    *t = filled(t.len(), 10 + 4 * set as u64 + i as u64, scale);
                }
                w
            })
            .collect();
        let lstm = s.cell == Cell::Lstm;
        let state = s.state_len();
        let c_len = if lstm { state } else { 0 };
        Tensors {
            x: filled(s.x_len(), 1, 1.0),
            hx: filled(state, 2, 0.5),
            cx: filled(c_len, 3, 0.5),
            weights,
            dy: filled(s.y_len(), 4, 1.0),
            dhy: filled(state, 5, 0.5),
            dcy: filled(c_len, 6, 0.5),
            out: Outputs {
                y: zeroed_huge(s.y_len()),
                hy: zeroed_huge(state),
                cy: zeroed_huge(c_len),
                dx: zeroed_huge(s.x_len()),
                dhx: zeroed_huge(state),
                dcx: zeroed_huge(c_len),
                dw: (0..s.sets()).map(|set| Weights::zeros(s, set)).collect(),
            },
        }
    }

    /// Host bytes for `s` (with the reference's outputs when checking),
    /// `None` past `usize`.
    pub fn bytes_needed(s: &RnnShape, check: bool, cpu: bool) -> Option<usize> {
        let weights: usize = (0..s.sets())
            .map(|set| {
                s.set_shapes(set)
                    .iter()
                    .map(|d| d.iter().product::<usize>())
                    .sum::<usize>()
            })
            .sum();
        let floats = s
            .x_len()
            .checked_mul(2)?
            .checked_add(s.y_len().checked_mul(2)?)?
            .checked_add(s.state_len().checked_mul(9)?)?
            .checked_add(weights.checked_mul(2)?)?;
        let workspace = if cpu { Workspace::bytes_for(s)? } else { 0 };
        let tensors = floats.checked_mul(4)?.checked_add(workspace)?;
        // The reference keeps every step in f64 and its results in f32.
        let reference = if check {
            floats
                .checked_mul(4)?
                .checked_add(Workspace::bytes_for(s)?.checked_mul(2)?)?
        } else {
            0
        };
        tensors.checked_add(reference)
    }

    /// Every input and parameter rounded to what `dtype` stores, so that
    /// the reference sees what the device computes on.
    pub fn round_to(&mut self, dtype: DType) {
        for v in [
            &mut self.x,
            &mut self.hx,
            &mut self.cx,
            &mut self.dy,
            &mut self.dhy,
            &mut self.dcy,
        ] {
            dtype.round_in_place(v);
        }
        for w in &mut self.weights {
            for v in w.tensors_mut() {
                dtype.round_in_place(v);
            }
        }
    }

    /// One pass on the CPU kernels, in `ws` (the pass before's state
    /// included).
    pub fn run(&mut self, isa: Isa, ws: &mut Workspace, s: &RnnShape, pass: Dir) {
        let inp = Inputs {
            x: &self.x,
            hx: &self.hx,
            cx: &self.cx,
            weights: &self.weights,
        };
        match pass {
            Dir::Fwd => rnn::forward(
                isa,
                s,
                &inp,
                ws,
                &mut self.out.y,
                &mut self.out.hy,
                &mut self.out.cy,
            ),
            Dir::BwdData => {
                let grads = OutputGrads {
                    dy: &self.dy,
                    dhy: &self.dhy,
                    dcy: &self.dcy,
                };
                rnn::backward_data(
                    isa,
                    s,
                    &inp,
                    &grads,
                    ws,
                    &mut self.out.dx,
                    &mut self.out.dhx,
                    &mut self.out.dcx,
                )
            }
            _ => rnn::backward_weights(isa, s, &inp, ws, &mut self.out.dw),
        }
    }

    /// The pass's outputs beside the reference's: the worst relative L2
    /// error over them.
    pub fn worst_error(&self, pass: Dir, want: &Outputs) -> f64 {
        let pairs: Vec<(&[f32], &[f32])> = match pass {
            Dir::Fwd => vec![
                (&self.out.y, &want.y),
                (&self.out.hy, &want.hy),
                (&self.out.cy, &want.cy),
            ],
            Dir::BwdData => vec![
                (&self.out.dx, &want.dx),
                (&self.out.dhx, &want.dhx),
                (&self.out.dcx, &want.dcx),
            ],
            _ => self
                .out
                .dw
                .iter()
                .zip(&want.dw)
                .flat_map(|(g, w)| g.tensors().into_iter().zip(w.tensors()))
                .collect(),
        };
        pairs
            .into_iter()
            .map(|(g, w)| rel_l2_error(g, w))
            .fold(0.0, f64::max)
    }
}

/// Every file a dump may write besides the parameters': what an earlier
/// dump into the same folder may have left (parameter files are matched
/// by their prefixes).
const DUMP_FILES: [&str; 13] = [
    "problem.json",
    "x.npy",
    "hx.npy",
    "cx.npy",
    "dy.npy",
    "dhy.npy",
    "dcy.npy",
    "y.npy",
    "hy.npy",
    "cy.npy",
    "dx.npy",
    "dhx.npy",
    "dcx.npy",
];

/// PyTorch's name of set `s`'s parameter `k` (`weight_ih_l0`,
/// `bias_hh_l1_reverse`): the second direction of a bidirectional layer
/// is `_reverse`; a right2left layer, PyTorch having none, is named as a
/// forward one and `problem.json` says which way it reads.
pub fn param_name(shape: &RnnShape, s: usize, k: usize) -> String {
    let dirs = shape.direction.count();
    let base = ["weight_ih", "weight_hh", "bias_ih", "bias_hh"][k];
    let reverse = if s % dirs == 1 { "_reverse" } else { "" };
    format!("{base}_l{}{reverse}", s / dirs)
}

impl Tensors {
    /// `--dump DIR`: the inputs, the parameters and the outputs of the
    /// passes that ran, as f32 `.npy` in PyTorch's layout (time-major
    /// sequences, `[layers·directions, mb, h]` states, `nn.LSTM`'s
    /// parameter names and shapes, gate order i,f,g,o / r,z,n), with
    /// `problem.json` naming each file, written last.
    pub fn dump(
        &self,
        dir: &Path,
        p: &RnnProblem,
        s: &RnnShape,
        seed: u64,
        ran: &[Dir],
    ) -> Result<()> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create '{}'", dir.display()))?;
        let stale = std::fs::read_dir(dir)
            .with_context(|| format!("cannot read '{}'", dir.display()))?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| {
                DUMP_FILES.contains(&n.as_str())
                    || (n.ends_with(".npy")
                        && ["weight_", "bias_", "grad_weight_", "grad_bias_"]
                            .iter()
                            .any(|pre| n.starts_with(pre)))
            });
        for name in stale.collect::<Vec<_>>() {
            let path = dir.join(&name);
            std::fs::remove_file(&path)
                .with_context(|| format!("cannot remove '{}'", path.display()))?;
        }
        let (t, mb, h) = (s.t, s.mb, s.hidden);
        let lstm = s.cell == Cell::Lstm;
        let states = [s.sets(), mb, h];
        let mut files = vec![];
        let mut put = |name: String, shape: &[usize], data: &[f32]| -> Result<()> {
            write_npy(&dir.join(format!("{name}.npy")), shape, data)?;
            files.push(json!({"name": name, "file": format!("{name}.npy"), "shape": shape}));
            Ok(())
        };
        put("x".into(), &[t, mb, s.input], &self.x)?;
        put("hx".into(), &states, &self.hx)?;
        if lstm {
            put("cx".into(), &states, &self.cx)?;
        }
        for (set, w) in self.weights.iter().enumerate() {
            for (k, (data, shape)) in w.tensors().iter().zip(s.set_shapes(set)).enumerate() {
                put(param_name(s, set, k), &shape, data)?;
            }
        }
        put("dy".into(), &[t, mb, s.output()], &self.dy)?;
        put("dhy".into(), &states, &self.dhy)?;
        if lstm {
            put("dcy".into(), &states, &self.dcy)?;
        }
        for pass in PASSES.iter().filter(|d| ran.contains(d)) {
            match pass {
                Dir::Fwd => {
                    put("y".into(), &[t, mb, s.output()], &self.out.y)?;
                    put("hy".into(), &states, &self.out.hy)?;
                    if lstm {
                        put("cy".into(), &states, &self.out.cy)?;
                    }
                }
                Dir::BwdData => {
                    put("dx".into(), &[t, mb, s.input], &self.out.dx)?;
                    put("dhx".into(), &states, &self.out.dhx)?;
                    if lstm {
                        put("dcx".into(), &states, &self.out.dcx)?;
                    }
                }
                _ => {
                    for (set, g) in self.out.dw.iter().enumerate() {
                        for (k, (data, shape)) in
                            g.tensors().iter().zip(s.set_shapes(set)).enumerate()
                        {
                            put(format!("grad_{}", param_name(s, set, k)), &shape, data)?;
                        }
                    }
                }
            }
        }
        let doc = json!({
            "problem": reproducer(p),
            "name": p.name,
            "cell": p.cell.name(),
            "direction": p.direction.name(),
            "layers": s.layers, "t": t, "mb": mb, "input": s.input, "hidden": h,
            "layout": "time-major: x, y, dy [t, mb, features]; states [layers*directions, mb, hidden]; parameters as PyTorch's nn.RNN/LSTM/GRU (gates i,f,g,o for LSTM, r,z,n for GRU)",
            "reverse_suffix": "_reverse marks a bidirectional layer's second direction; right2left layers read the sequence backwards under forward names",
            "dtype": "f32",
            "seed": seed,
            "passes": PASSES.iter().filter(|d| ran.contains(d)).map(|d| d.name()).collect::<Vec<_>>(),
            "files": files,
        });
        let text = serde_json::to_string_pretty(&doc)? + "\n";
        let doc_path = dir.join("problem.json");
        crate::results::dump::write_doc(&doc_path, &text)
    }
}
