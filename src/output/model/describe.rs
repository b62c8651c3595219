//! `model --describe`: each model's layers (name, type, output, parameters,
//! MACs), as a table, JSON, or one benchdnn descriptor per convolution.

use crate::output::table::{aligned, Align};
use crate::output::Format;
use crate::problem::ConvProblem;
use crate::results::atomic::write_atomic;
use anyhow::{Context, Result};
use cnnbench_layers::net::{Graph, Op};
use serde::Serialize;
use std::path::Path;

/// One layer of `--describe --format json`.
#[derive(Serialize)]
struct LayerDesc {
    name: String,
    kind: &'static str,
    output: String,
    params: usize,
    macs: u64,
    /// The benchdnn descriptor at the chosen batch (convolutions only).
    #[serde(skip_serializing_if = "Option::is_none")]
    desc: Option<String>,
}

#[derive(Serialize)]
struct ModelDesc {
    model: String,
    params: usize,
    macs: u64,
    input: String,
    layers: Vec<LayerDesc>,
}

/// The benchdnn descriptor of convolution node `i` at `batch`, named
/// `model:layer`.
pub fn conv_descriptor(g: &Graph, i: usize, batch: usize) -> String {
    ConvProblem {
        shape: g.conv_shape(i, batch),
        name: Some(format!("{}:{}", g.name, g.nodes[i].name)),
    }
    .canonical()
}

fn model_desc(g: &Graph, batch: usize) -> ModelDesc {
    let layers = (1..g.nodes.len())
        .map(|i| {
            let n = &g.nodes[i];
            LayerDesc {
                name: n.name.clone(),
                kind: n.op.kind(),
                output: n.out.to_string(),
                params: g.node_params(i),
                macs: g.node_macs(i),
                desc: matches!(n.op, Op::Conv(_)).then(|| conv_descriptor(g, i, batch)),
            }
        })
        .collect();
    ModelDesc {
        model: g.name.clone(),
        params: g.params(),
        macs: g.macs(),
        input: g.input().to_string(),
        layers,
    }
}

/// Writes the layer tables of `graphs` at `batch` in `format` to `out`
/// (`--out`) or stdout.
pub fn describe(graphs: &[Graph], format: Format, batch: usize, out: Option<&Path>) -> Result<()> {
    let mut s = String::new();
    match format {
        Format::Json => {
            let descs: Vec<ModelDesc> = graphs.iter().map(|g| model_desc(g, batch)).collect();
            s = if descs.len() == 1 {
                serde_json::to_string_pretty(&descs[0])?
            } else {
                serde_json::to_string_pretty(&descs)?
            };
            s.push('\n');
        }
        Format::Benchdnn => {
            for g in graphs {
                let convs: Vec<usize> = (0..g.nodes.len())
                    .filter(|&i| matches!(g.nodes[i].op, Op::Conv(_)))
                    .collect();
                s += &format!(
                    "# {}: {} convolutions at batch {}, input {}\n",
                    g.name,
                    convs.len(),
                    batch,
                    g.input()
                );
                for i in convs {
                    s += &conv_descriptor(g, i, batch);
                    s.push('\n');
                }
            }
        }
        Format::Csv => {
            let mut w = csv::Writer::from_writer(Vec::new());
            w.write_record(["model", "layer", "kind", "output", "params", "macs", "desc"])?;
            for g in graphs {
                for l in model_desc(g, batch).layers {
                    w.write_record([
                        g.name.clone(),
                        l.name,
                        l.kind.into(),
                        l.output,
                        l.params.to_string(),
                        l.macs.to_string(),
                        l.desc.unwrap_or_default(),
                    ])?;
                }
            }
            s = String::from_utf8(w.into_inner().context("flushing CSV")?)?;
        }
        Format::Table | Format::Md => {
            let md = format == Format::Md;
            for g in graphs {
                let d = model_desc(g, batch);
                s += &format!(
                    "# {}: {} parameters, {:.3} GMACs per image, input {}\n",
                    d.model,
                    d.params,
                    d.macs as f64 / 1e9,
                    d.input
                );
                let rows: Vec<Vec<String>> = d
                    .layers
                    .iter()
                    .map(|l| {
                        vec![
                            l.name.clone(),
                            l.kind.into(),
                            l.output.clone(),
                            l.params.to_string(),
                            l.macs.to_string(),
                        ]
                    })
                    .collect();
                use Align::{Left as L, Right as R};
                s += &aligned(
                    &["layer", "type", "output", "params", "MACs"],
                    &[L, L, R, R, R],
                    &rows,
                    md,
                );
                s.push('\n');
            }
        }
    }
    match out {
        Some(p) => write_atomic(p, &s)?,
        None => crate::output::print(&s)?,
    }
    Ok(())
}
