//! A network on any backend against the CPU's, layer by layer: each layer
//! reads the reference network's inputs (forward) and output gradients
//! (backward), so that what it gets wrong is its own, free of what earlier
//! layers did. `check --device gpu` and the tests that run on every
//! backend use it.

use super::cpu::CpuNet;
use super::exec::Executor;
use super::plan::passes_gradient;
use crate::core::backend::Backend;
use crate::core::error::Result;
use crate::core::DType;

/// One tensor of the network under test beside the reference's.
pub struct Pair {
    /// `conv1.output`, `conv1.weight.grad`, or `loss (end to end)`.
    pub tensor: String,
    pub got: Vec<f32>,
    pub want: Vec<f32>,
}

/// The loss of `dev` run on its own against `reference`'s, then every
/// layer's output with the reference's inputs. `reference` has run its
/// forward pass unfused; `dev` has the same graph, batch and seed, and may
/// be fused: a fused layer's own output (and a fused add's) is not formed,
/// so its ReLU's row checks the fused output against the reference's ReLU
/// output, named for everything the layer ran (`bn1+relu1`,
/// `bn3+add+relu3`), as the CPU's `check` names them.
pub fn outputs<B: Backend>(dev: &mut Executor<B>, reference: &CpuNet) -> Result<Vec<Pair>> {
    let g = dev.graph.clone();
    let n = g.nodes.len();
    assert_eq!(reference.fused_relus(), 0, "the reference runs unfused");
    dev.forward()?;
    let mut out = vec![Pair {
        tensor: "loss (end to end)".into(),
        got: vec![dev.loss()?],
        want: vec![reference.loss()?],
    }];
    for i in 1..n {
        // A view of its input (a flatten) has no output of its own.
        if g.nodes[i].op.spec().aliases_input() {
            continue;
        }
        let Some(runner) = dev.forward_runner(i) else {
            continue;
        };
        for t in dev.layer_inputs(runner) {
            dev.upload_output(t, reference.output(t))?;
        }
        dev.forward_one(runner)?;
        let (got, want) = if i == n - 1 {
            (vec![dev.loss()?], vec![reference.loss()?])
        } else {
            (dev.output_host(i)?, reference.output(i).to_vec())
        };
        out.push(Pair {
            tensor: format!("{}.output", dev.fused_name(i)),
            got,
            want,
        });
    }
    Ok(out)
}

/// Every parameter gradient, each layer's backward reading the
/// reference's output gradients times `scale(parts)` (divided out again:
/// the layer is linear in them), in the reference's (graph) order.
/// `reference` has run its backward pass unfused. A layer of `dev` that
/// took a ReLU's backward reads the reference's gradient of the ReLU's
/// output; the ReLU (and a fused add) has no backward of its own.
pub fn gradients<B: Backend>(
    dev: &mut Executor<B>,
    reference: &mut CpuNet,
    scale: impl Fn(&[&[f32]]) -> f32,
) -> Result<Vec<Pair>> {
    let g = dev.graph.clone();
    let mut got = Vec::new();
    for i in (1..g.nodes.len()).rev() {
        if passes_gradient(&g.nodes[i].op) || dev.backward_taken(i) {
            continue;
        }
        let parts = reference.dy_parts(dev.reads_gradient_of(i));
        let s = scale(&parts);
        dev.backward_one(i, &parts, s)?;
        for (name, mut grad) in dev.layer_grads(i)? {
            grad.iter_mut().for_each(|v| *v /= s);
            got.push((name, grad));
        }
    }
    let mut out = Vec::new();
    for (name, p) in reference.named_params() {
        let found = got.iter().position(|(n, _)| *n == name);
        out.push(Pair {
            tensor: format!("{name}.grad"),
            got: found.map_or_else(Vec::new, |k| std::mem::take(&mut got[k].1)),
            want: p.grad.clone(),
        });
    }
    Ok(out)
}

/// The power of two that brings a layer's largest output gradient to 1/16
/// for half-precision runs (1 otherwise): the gradients training sees
/// (down to 1e-8 here) are below f16's normal range, where mixed-precision
/// training scales the loss for the same reason. The layer is linear in
/// its output gradient, so its gradients are divided by the same factor.
pub fn loss_scale(d: DType, parts: &[&[f32]]) -> f32 {
    if !matches!(d, DType::F16 | DType::Bf16) {
        return 1.0;
    }
    let max = parts
        .iter()
        .flat_map(|p| p.iter())
        .fold(0f32, |m, v| m.max(v.abs()));
    if max == 0.0 || !max.is_finite() {
        return 1.0;
    }
    2f32.powi((1.0 / 16.0 / max).log2().floor() as i32)
}
