//! A network on any backend against the CPU's, layer by layer: each layer
//! reads the reference network's inputs (forward) and output gradients
//! (backward), so that what it gets wrong is its own, free of what earlier
//! layers did. `check --device gpu` and the tests that run on every
//! backend use it.

use super::cpu::CpuNet;
use super::exec::Executor;
use super::graph::Op;
use super::plan::passes_gradient;
use crate::core::backend::Backend;
use crate::core::error::Result;
use crate::core::DType;
use crate::ops::spec::OpSpec;

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
/// output; the ReLU (and a fused add) has no backward of its own. Such a
/// layer (a batch norm) masks that gradient with its own forward output,
/// so its gradients are compared with the reference's under that mask
/// ([`masked_bn_grads`]). [`outputs`] has run first: its forward passes
/// are the ones each other layer's backward reads.
pub fn gradients<B: Backend>(
    dev: &mut Executor<B>,
    reference: &mut CpuNet,
    scale: impl Fn(&[&[f32]]) -> f32,
) -> Result<Vec<Pair>> {
    let g = dev.graph.clone();
    let mut got = Vec::new();
    let mut want_masked: Vec<(String, Vec<f32>)> = Vec::new();
    for i in (1..g.nodes.len()).rev() {
        if passes_gradient(&g.nodes[i].op) || dev.backward_taken(i) {
            continue;
        }
        let r = dev.reads_gradient_of(i);
        let parts = reference.dy_parts(r);
        if let (true, Op::BatchNorm(spec)) = (r != i, &g.nodes[i].op) {
            // The fused layer's forward again on the reference's inputs:
            // since `outputs` ran it, its output buffer was overwritten with
            // the reference's (as the next layer's input). Its backward
            // reads the state this leaves; later layers' backward has run.
            let runner = dev.forward_runner(r).unwrap_or(i);
            for t in dev.layer_inputs(runner) {
                dev.upload_output(t, reference.output(t))?;
            }
            dev.forward_one(runner)?;
            let x = reference.output(g.nodes[i].inputs[0]);
            let y = dev.output_host(r)?;
            let (dgamma, dbeta) = masked_bn_grads(x, &parts, &y, g.nodes[i].out.c, spec.eps);
            let name = |k| format!("{}.{}", g.nodes[i].name, spec.param_name(k));
            want_masked.extend([(name(0), dgamma), (name(1), dbeta)]);
        }
        let s = scale(&parts);
        dev.backward_one(i, &parts, s)?;
        for (name, mut grad) in dev.layer_grads(i)? {
            grad.iter_mut().for_each(|v| *v /= s);
            got.push((name, grad));
        }
    }
    // Every masked reference replaces a parameter's (a name that matched
    // none would silently leave the unmasked one).
    debug_assert!(
        want_masked
            .iter()
            .all(|(n, _)| reference.named_params().iter().any(|(m, _)| m == n)),
        "a masked reference names no parameter"
    );
    let mut out = Vec::new();
    for (name, p) in reference.named_params() {
        let found = got.iter().position(|(n, _)| *n == name);
        let masked = want_masked.iter_mut().find(|(n, _)| *n == name);
        out.push(Pair {
            tensor: format!("{name}.grad"),
            got: found.map_or_else(Vec::new, |k| std::mem::take(&mut got[k].1)),
            want: masked.map_or_else(|| p.grad.clone(), |(_, w)| std::mem::take(w)),
        });
    }
    Ok(out)
}

/// A training batch norm's weight and bias gradients (dγ = Σ dz·x̂,
/// dβ = Σ dz per channel) where its output's gradient is the ReLU's, `dy`
/// (summed over its parts), masked by `y > 0`: `y` is the fused layer's
/// own output, `x` the reference's input, NHWC with `c` channels
/// innermost; x̂ from `x`'s batch statistics, in f64.
///
/// Why not the reference's own: where the layer's input is in a half
/// type, its output can fall on the other side of 0 from the f32
/// reference's for elements within rounding of 0. In a PyTorch model of
/// ResNet-50 at batch 2 (results/reference/gpu-h200-checks-ab-a43e5a7/
/// mask-flips), layer1.0.bn1's input in f16 moves 1.4e-4 of its outputs
/// across 0 (2.2e-2 on the bias gradient as `check` measures it), in bf16
/// 1e-3 (5.6e-2); cuDNN's fused batch norm and the own one on an H200 were
/// off by about that (2.0e-2, 5.9e-2), the unfused layer (which reads the
/// reference's masked gradient) by 2.7e-4. Which side an
/// output falls on is the forward's to answer, and its output row checks
/// it; the backward is checked under the mask its forward made.
pub fn masked_bn_grads(
    x: &[f32],
    dy: &[&[f32]],
    y: &[f32],
    c: usize,
    eps: f32,
) -> (Vec<f32>, Vec<f32>) {
    let m = (x.len() / c.max(1)) as f64;
    let (mut sum, mut sq) = (vec![0f64; c], vec![0f64; c]);
    for (k, &v) in x.iter().enumerate() {
        sum[k % c] += v as f64;
    }
    let mean: Vec<f64> = sum.iter().map(|s| s / m).collect();
    for (k, &v) in x.iter().enumerate() {
        sq[k % c] += (v as f64 - mean[k % c]).powi(2);
    }
    let inv_std: Vec<f64> = sq
        .iter()
        .map(|s| 1.0 / (s / m + eps as f64).sqrt())
        .collect();
    let (mut dgamma, mut dbeta) = (vec![0f64; c], vec![0f64; c]);
    for k in 0..x.len() {
        if y[k] <= 0.0 {
            continue;
        }
        let dz: f64 = dy.iter().map(|p| p[k] as f64).sum();
        let ch = k % c;
        dbeta[ch] += dz;
        dgamma[ch] += dz * (x[k] as f64 - mean[ch]) * inv_std[ch];
    }
    let f32s = |v: Vec<f64>| v.into_iter().map(|v| v as f32).collect();
    (f32s(dgamma), f32s(dbeta))
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

/// The root mean square of every element of every gradient.
pub fn rms_of<'a>(grads: impl Iterator<Item = &'a [f32]>) -> f64 {
    let (sq, n) = grads
        .flatten()
        .fold((0.0, 0usize), |(s, n), &g| (s + (g as f64).powi(2), n + 1));
    (sq / n.max(1) as f64).sqrt()
}

/// A gradient's L2 error relative to the larger of its own norm and the
/// norm it would have at the network's RMS gradient. The floor matters
/// for sums that cancel (a batch norm's bias gradient sums dy over the
/// batch, and the next batch norm's backward makes dy sum to nearly zero):
/// their tiny true value would turn rounding noise into a large relative
/// error, while the error against the gradients training sees stays small.
pub fn grad_error(got: &[f32], want: &[f32], rms: f64) -> f64 {
    let diff: f64 = got
        .iter()
        .zip(want)
        .map(|(&g, &w)| (g as f64 - w as f64).powi(2))
        .sum::<f64>()
        .sqrt();
    let norm: f64 = want.iter().map(|&w| (w as f64).powi(2)).sum::<f64>().sqrt();
    diff / norm
        .max(rms * (want.len() as f64).sqrt())
        .max(f64::MIN_POSITIVE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::cpu::CpuOptions;
    use crate::net::graph::Graph;
    use crate::net::tests::residual_net;
    use cnnbench_kernels::conv::reference::rel_l2_error;
    use cnnbench_kernels::Isa;

    fn cpu_net(g: &Graph, reference: bool) -> CpuNet {
        let opts = CpuOptions {
            isa: Isa::detect(),
            reference,
            seed: 7,
            fuse_relu: !reference,
        };
        CpuNet::new(g, 2, opts).expect("a CPU network")
    }

    /// On the CPU in f32 the fused batch norms' masks are the reference's,
    /// so the masked reference is the reference's own gradient, and the
    /// fused layers match it.
    #[test]
    fn the_masked_reference_is_the_reference_where_the_masks_agree() {
        let g = residual_net();
        let mut want = cpu_net(&g, true);
        want.forward().expect("forward");
        want.backward().expect("backward");
        let own: Vec<Vec<f32>> = want
            .named_params()
            .into_iter()
            .map(|(_, p)| p.grad.clone())
            .collect();
        let mut dev = cpu_net(&g, false);
        assert!(dev.fused_relus() > 0, "the CPU fuses its ReLUs");
        outputs(&mut dev, &want).expect("outputs");
        let pairs = gradients(&mut dev, &mut want, |_| 1.0).expect("gradients");
        assert_eq!(pairs.len(), own.len());
        for (p, own) in pairs.iter().zip(&own) {
            let masked = rel_l2_error(&p.want, own);
            assert!(
                masked < 1e-5,
                "{}: masked reference off by {masked:.2e}",
                p.tensor
            );
            let err = rel_l2_error(&p.got, &p.want);
            assert!(err < 1e-4, "{}: off by {err:.2e}", p.tensor);
        }
    }

    /// Each element the mask takes adds its gradient to the bias gradient
    /// and its gradient times x̂ to the weight gradient; one the mask
    /// drops adds nothing.
    #[test]
    fn each_element_counts_where_its_output_is_above_zero() {
        // Two channels, NHWC: channel 0 holds 1, 3; channel 1 holds 2, 6.
        let x = [1.0, 2.0, 3.0, 6.0];
        let dy = [0.5, -1.0, 2.0, 4.0];
        let all = masked_bn_grads(&x, &[&dy], &[1.0; 4], 2, 0.0);
        assert_eq!(all.1, vec![2.5, 3.0]);
        // x̂ is -1 then 1 in each channel.
        assert_eq!(all.0, vec![1.5, 5.0]);
        // Two parts (an output read twice) are summed first.
        let some = masked_bn_grads(&x, &[&dy, &dy], &[1.0, 0.0, 0.0, 2.0], 2, 0.0);
        assert_eq!(some.1, vec![1.0, 8.0]);
        assert_eq!(some.0, vec![-1.0, 8.0]);
    }
}
