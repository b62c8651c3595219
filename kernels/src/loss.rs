//! Softmax cross-entropy over `classes` logits per image, mean over the
//! batch (PyTorch's `F.cross_entropy`).

/// Forward: writes the probabilities (kept for the backward pass) and
/// returns the mean loss. Accumulates in f64; the work is tiny.
pub fn softmax_xent_fwd(classes: usize, logits: &[f32], labels: &[u32], probs: &mut [f32]) -> f32 {
    let n = labels.len();
    assert!(logits.len() == n * classes && probs.len() == logits.len());
    let mut loss = 0f64;
    for (i, (z, p)) in logits
        .chunks(classes)
        .zip(probs.chunks_mut(classes))
        .enumerate()
    {
        let max = z.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
        let sum: f64 = z.iter().map(|&v| (v as f64 - max).exp()).sum();
        for (p, &v) in p.iter_mut().zip(z) {
            *p = ((v as f64 - max).exp() / sum) as f32;
        }
        let l = labels[i] as usize;
        loss += -(z[l] as f64 - max - sum.ln());
    }
    (loss / n as f64) as f32
}

/// Backward of the mean loss: `dz = (p − onehot(label)) / n`.
pub fn softmax_xent_bwd(classes: usize, probs: &[f32], labels: &[u32], dlogits: &mut [f32]) {
    let n = labels.len();
    for (i, (d, p)) in dlogits
        .chunks_mut(classes)
        .zip(probs.chunks(classes))
        .enumerate()
    {
        for (j, (d, &p)) in d.iter_mut().zip(p).enumerate() {
            let t = if j == labels[i] as usize { 1.0 } else { 0.0 };
            *d = (p - t) / n as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_logits_give_log_classes_and_a_centred_gradient() {
        let (classes, labels) = (10, [3u32, 7]);
        let z = vec![0.5; 20];
        let mut p = vec![0.0; 20];
        let l = softmax_xent_fwd(classes, &z, &labels, &mut p);
        assert!((l - (10f32).ln()).abs() < 1e-6);
        let mut d = vec![0.0; 20];
        softmax_xent_bwd(classes, &p, &labels, &mut d);
        assert!((d[3] - (0.1 - 1.0) / 2.0).abs() < 1e-7);
        assert!((d[0] - 0.05).abs() < 1e-7);
        assert!(d.iter().sum::<f32>().abs() < 1e-6);
    }
}
