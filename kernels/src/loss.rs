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

/// Sigmoid with binary cross-entropy on one logit per image, mean over
/// the batch (PyTorch's `BCEWithLogitsLoss`, Keras's `Dense(1,
/// activation='sigmoid')` with `binary_crossentropy`), in the stable form
/// `max(z, 0) − z·y + ln(1 + e^−|z|)`. Labels are 0 or 1.
pub fn sigmoid_bce_fwd(logits: &[f32], labels: &[u32]) -> f32 {
    assert_eq!(logits.len(), labels.len());
    let n = labels.len();
    let loss: f64 = logits
        .iter()
        .zip(labels)
        .map(|(&z, &y)| {
            let z = z as f64;
            z.max(0.0) - z * y as f64 + (-z.abs()).exp().ln_1p()
        })
        .sum();
    (loss / n as f64) as f32
}

/// Backward of the mean loss: `dz = (σ(z) − y) / n`.
pub fn sigmoid_bce_bwd(logits: &[f32], labels: &[u32], dlogits: &mut [f32]) {
    let n = labels.len() as f64;
    for ((d, &z), &y) in dlogits.iter_mut().zip(logits).zip(labels) {
        let s = 1.0 / (1.0 + (-(z as f64)).exp());
        *d = ((s - y as f64) / n) as f32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigmoid_bce_matches_its_definition_and_its_derivative() {
        let z = [0.3f32, -2.0, 40.0, -40.0];
        let y = [1u32, 0, 0, 1];
        // The naive form, on probabilities, where it does not overflow.
        let naive = |z: f64, y: f64| {
            let p = 1.0 / (1.0 + (-z).exp());
            -(y * p.ln() + (1.0 - y) * (1.0 - p).ln())
        };
        let l = sigmoid_bce_fwd(&z[..2], &y[..2]) as f64;
        let want = (naive(0.3, 1.0) + naive(-2.0, 0.0)) / 2.0;
        assert!((l - want).abs() < 1e-6, "{l} {want}");
        // Saturated logits stay finite: the loss is |z| where wrong.
        let l = sigmoid_bce_fwd(&z[2..], &y[2..]);
        assert!((l - 40.0).abs() < 1e-4, "{l}");
        let mut d = [0f32; 4];
        sigmoid_bce_bwd(&z, &y, &mut d);
        for k in 0..4 {
            let h = 1e-3;
            let (mut zp, mut zm) = (z, z);
            zp[k] += h;
            zm[k] -= h;
            let fd = (sigmoid_bce_fwd(&zp, &y) - sigmoid_bce_fwd(&zm, &y)) / (2.0 * h);
            assert!((d[k] - fd).abs() < 1e-3, "{k}: {} {fd}", d[k]);
        }
    }

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
