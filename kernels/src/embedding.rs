//! Embedding lookup: each token id selects one row of a `[vocab][dim]`
//! table. The forward pass copies rows; the backward pass sums each
//! token's output gradient into its row of the table's (dense) gradient,
//! as PyTorch's `nn.Embedding(sparse=False)` does.

use rayon::prelude::*;

/// The row a token id selects, or why it selects none: ids travel as f32
/// (the network's input buffer), so they must be whole numbers below
/// `vocab`.
pub fn row_of(id: f32, vocab: usize) -> Result<usize, String> {
    if id >= 0.0 && id.fract() == 0.0 && (id as usize) < vocab {
        Ok(id as usize)
    } else {
        Err(format!(
            "token id {id} is not a whole number below the vocabulary of {vocab}"
        ))
    }
}

/// `out[k] = table[ids[k]]` for every token `k` (`out`: `[tokens][dim]`).
pub fn forward(table: &[f32], dim: usize, ids: &[f32], out: &mut [f32]) -> Result<(), String> {
    let vocab = table.len() / dim.max(1);
    assert_eq!(out.len(), ids.len() * dim);
    // Check every id before writing anything.
    for &id in ids {
        row_of(id, vocab)?;
    }
    out.par_chunks_mut(dim.max(1))
        .zip(ids.par_iter())
        .for_each(|(o, &id)| {
            let r = id as usize;
            o.copy_from_slice(&table[r * dim..][..dim]);
        });
    Ok(())
}

/// `grad = Σ_k onehot(ids[k]) ⊗ dy[k]`, overwriting `grad`
/// (`[vocab][dim]`). The ids were checked by [`forward`].
pub fn backward(grad: &mut [f32], dim: usize, ids: &[f32], dy: &[f32]) {
    assert_eq!(dy.len(), ids.len() * dim);
    grad.par_chunks_mut(1 << 16).for_each(|c| c.fill(0.0));
    // Rows repeat across tokens, so the sum runs in token order on one
    // thread: a few hundred thousand additions, beside the zeroing above.
    for (&id, d) in ids.iter().zip(dy.chunks(dim.max(1))) {
        let r = id as usize;
        for (g, &v) in grad[r * dim..][..dim].iter_mut().zip(d) {
            *g += v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lookup as a product with one-hot rows, in f64.
    fn one_hot_product(table: &[f32], dim: usize, ids: &[f32]) -> Vec<f32> {
        let vocab = table.len() / dim;
        let mut out = Vec::new();
        for &id in ids {
            for j in 0..dim {
                let v: f64 = (0..vocab)
                    .map(|r| {
                        if r as f32 == id {
                            table[r * dim + j] as f64
                        } else {
                            0.0
                        }
                    })
                    .sum();
                out.push(v as f32);
            }
        }
        out
    }

    #[test]
    fn lookup_and_gradient_match_one_hot_products() {
        let (vocab, dim) = (7, 3);
        let table: Vec<f32> = (0..vocab * dim).map(|v| v as f32 * 0.5 - 3.0).collect();
        let ids = [2.0, 0.0, 6.0, 2.0, 2.0];
        let mut out = vec![0.0; ids.len() * dim];
        forward(&table, dim, &ids, &mut out).unwrap();
        assert_eq!(out, one_hot_product(&table, dim, &ids));
        // dW = onehotᵀ · dy, by hand.
        let dy: Vec<f32> = (0..ids.len() * dim).map(|v| v as f32 + 1.0).collect();
        let mut grad = vec![f32::NAN; vocab * dim];
        backward(&mut grad, dim, &ids, &dy);
        for r in 0..vocab {
            for j in 0..dim {
                let want: f32 = ids
                    .iter()
                    .enumerate()
                    .filter(|(_, &id)| id as usize == r)
                    .map(|(k, _)| dy[k * dim + j])
                    .sum();
                assert_eq!(grad[r * dim + j], want, "row {r} col {j}");
            }
        }
    }

    #[test]
    fn ids_outside_the_vocabulary_are_refused_before_writing() {
        let table = vec![1.0; 4 * 2];
        let mut out = vec![0.0; 4];
        for bad in [4.0, -1.0, 1.5, f32::NAN] {
            let e = forward(&table, 2, &[0.0, bad], &mut out).unwrap_err();
            assert!(e.contains("below the vocabulary of 4"), "{e}");
            assert_eq!(out, [0.0; 4]);
        }
    }
}
