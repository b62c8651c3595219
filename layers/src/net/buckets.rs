//! Gradient buckets: which parameters' gradients are all-reduced together
//! in data-parallel training, as PyTorch's DistributedDataParallel groups
//! them.
//!
//! The backward pass produces gradients from the last layer to the first,
//! so the parameters are walked in reverse graph order and cut into
//! buckets of about [`BUCKET_BYTES`]; a bucket can be all-reduced as soon
//! as the backward has produced its last gradient, while the backward of
//! earlier layers still runs. The first bucket is small
//! ([`FIRST_BUCKET_BYTES`]) so that communication starts early. The real
//! NCCL exchange and the projection to more GPUs both use [`assign`], so
//! that they agree on what is sent when.

use super::graph::Graph;

/// DDP's default bucket size, `bucket_cap_mb=25` (MiB: DDP multiplies by
/// 1024 * 1024).
pub const BUCKET_BYTES: usize = 25 << 20;

/// DDP's first bucket (`dist._DEFAULT_FIRST_BUCKET_BYTES`): small, so that
/// communication starts early in the backward.
pub const FIRST_BUCKET_BYTES: usize = 1 << 20;

/// One parameter's gradient, as the buckets see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GradParam {
    /// The graph node that holds the parameter.
    pub node: usize,
    /// Which of the node's parameters (0: weight, 1: bias).
    pub index: usize,
    /// The gradient's size in bytes.
    pub bytes: usize,
}

/// Parameters whose gradients are all-reduced together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bucket {
    /// Indices into the slice given to [`assign`], in the order added
    /// (reverse graph order).
    pub params: Vec<usize>,
    /// The bytes of all its gradients.
    pub bytes: usize,
    /// The node whose backward completes the bucket: the smallest node
    /// among its parameters, since the backward runs from the last node to
    /// the first.
    pub ready_after: usize,
}

impl Bucket {
    fn empty() -> Bucket {
        Bucket {
            params: Vec::new(),
            bytes: 0,
            ready_after: usize::MAX,
        }
    }
}

/// Cuts `params` (in graph order) into buckets as DDP's
/// `compute_bucket_assignment_by_size` does: walking them in reverse, each
/// parameter joins the open bucket, which closes as soon as its bytes
/// reach its cap (`first_cap` for the first bucket, `cap` for the rest).
/// A parameter is never split: one at or above the cap closes the bucket
/// it joins (a bucket of its own when that bucket was empty), so a bucket
/// may exceed its cap. The last bucket holds what is left, below the cap.
/// Buckets come in the order they become ready.
pub fn assign(params: &[GradParam], first_cap: usize, cap: usize) -> Vec<Bucket> {
    let mut buckets = Vec::new();
    let mut open = Bucket::empty();
    for (k, p) in params.iter().enumerate().rev() {
        open.params.push(k);
        open.bytes += p.bytes;
        open.ready_after = open.ready_after.min(p.node);
        let limit = if buckets.is_empty() { first_cap } else { cap };
        if open.bytes >= limit {
            buckets.push(std::mem::replace(&mut open, Bucket::empty()));
        }
    }
    if !open.params.is_empty() {
        buckets.push(open);
    }
    buckets
}

/// Every parameter of `g` in graph order (a node's weight before its
/// bias), at `bytes_per_elem` bytes per element of its gradient.
pub fn graph_params(g: &Graph, bytes_per_elem: usize) -> Vec<GradParam> {
    (0..g.nodes.len())
        .flat_map(|node| {
            g.node_param_sizes(node)
                .into_iter()
                .enumerate()
                .map(move |(index, len)| GradParam {
                    node,
                    index,
                    bytes: len * bytes_per_elem,
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zoo;

    /// One parameter per node, node `i + 1` holding `bytes[i]`.
    fn one_per_node(bytes: &[usize]) -> Vec<GradParam> {
        bytes
            .iter()
            .enumerate()
            .map(|(i, &b)| GradParam {
                node: i + 1,
                index: 0,
                bytes: b,
            })
            .collect()
    }

    fn shape(buckets: &[Bucket]) -> Vec<(Vec<usize>, usize, usize)> {
        buckets
            .iter()
            .map(|b| (b.params.clone(), b.bytes, b.ready_after))
            .collect()
    }

    #[test]
    fn buckets_fill_in_reverse_and_close_at_their_cap() {
        let p = one_per_node(&[60, 20, 30, 40]);
        // Walk: k=3 (40) -> 40 < 50; k=2 (30) -> 70 >= 50: bucket [3, 2].
        // k=1 (20) -> 20 < 100; k=0 (60) -> 80 < 100: left over, [1, 0].
        assert_eq!(
            shape(&assign(&p, 50, 100)),
            vec![(vec![3, 2], 70, 3), (vec![1, 0], 80, 1)]
        );
    }

    #[test]
    fn the_first_bucket_has_its_own_cap() {
        // First cap 10: the last parameter (16) alone reaches it; then cap
        // 32: 8 + 8 + 16 = 32 closes exactly at the cap; 4 is left over.
        let p = one_per_node(&[4, 16, 8, 8, 16]);
        assert_eq!(
            shape(&assign(&p, 10, 32)),
            vec![(vec![4], 16, 5), (vec![3, 2, 1], 32, 2), (vec![0], 4, 1),]
        );
    }

    #[test]
    fn an_oversized_parameter_is_never_split() {
        // Reverse: 5 (first cap 4: closes alone), 3 (< 10), 500 (503 >=
        // 10: closes the bucket it joined, with the 3 before it), 500
        // (alone: the bucket was empty), 1 left over.
        let p = one_per_node(&[1, 500, 500, 3, 5]);
        assert_eq!(
            shape(&assign(&p, 4, 10)),
            vec![
                (vec![4], 5, 5),
                (vec![3, 2], 503, 3),
                (vec![1], 500, 2),
                (vec![0], 1, 1),
            ]
        );
    }

    #[test]
    fn no_parameters_no_buckets() {
        assert!(assign(&[], FIRST_BUCKET_BYTES, BUCKET_BYTES).is_empty());
    }

    #[test]
    fn a_bucket_is_ready_after_its_earliest_node() {
        // Node 2's weight and bias, node 7's weight, node 9's weight: the
        // bucket holding all of them waits for node 2's backward.
        let p = vec![
            GradParam {
                node: 2,
                index: 0,
                bytes: 8,
            },
            GradParam {
                node: 2,
                index: 1,
                bytes: 4,
            },
            GradParam {
                node: 7,
                index: 0,
                bytes: 8,
            },
            GradParam {
                node: 9,
                index: 0,
                bytes: 4,
            },
        ];
        let b = assign(&p, 1000, 1000);
        assert_eq!(shape(&b), vec![(vec![3, 2, 1, 0], 24, 2)]);
        // Closed early, the node-9 bucket waits only for node 9; then
        // node 7 and node 2's bias; node 2's weight is left over.
        let b = assign(&p, 4, 12);
        assert_eq!(
            shape(&b),
            vec![(vec![3], 4, 9), (vec![2, 1], 12, 2), (vec![0], 8, 2)]
        );
    }

    #[test]
    fn resnet50_buckets_cover_every_gradient_once() {
        let g = zoo::build("resnet50").expect("zoo model");
        let params = graph_params(&g, 4);
        // 53 convolutions (no bias), 53 batch norms (2 each), fc (2).
        assert_eq!(params.len(), 53 + 2 * 53 + 2);
        let buckets = assign(&params, FIRST_BUCKET_BYTES, BUCKET_BYTES);
        let bytes: usize = buckets.iter().map(|b| b.bytes).sum();
        assert_eq!(bytes, 4 * g.params());
        assert_eq!(g.params(), 25_557_032);
        let mut seen = vec![0; params.len()];
        for b in &buckets {
            assert_eq!(b.bytes, b.params.iter().map(|&k| params[k].bytes).sum());
            let min = b.params.iter().map(|&k| params[k].node).min();
            assert_eq!(Some(b.ready_after), min);
            for &k in &b.params {
                seen[k] += 1;
            }
        }
        assert!(seen.iter().all(|&n| n == 1));
        // Reverse order throughout: each bucket's indices fall, and every
        // bucket starts below where the previous one ended.
        let order: Vec<usize> = buckets.iter().flat_map(|b| b.params.clone()).collect();
        assert!(order.windows(2).all(|w| w[0] > w[1]));
        // The first bucket is fc (bias 4000 B, then the 8.192 MB weight,
        // which passes the 1 MiB cap); the other 94.0 MB fill 25 MiB
        // buckets: 102.2 MB in all over 26.2 MB each.
        assert_eq!(buckets[0].bytes, 4 * (1000 + 2048 * 1000));
        assert_eq!(buckets.len(), 5);
        for b in &buckets[1..buckets.len() - 1] {
            assert!(b.bytes >= BUCKET_BYTES, "{}", b.bytes);
        }
    }

    #[test]
    fn graph_params_follow_node_param_sizes() {
        let g = zoo::build("alexnet").expect("zoo model");
        let params = graph_params(&g, 2);
        let want: Vec<GradParam> = (0..g.nodes.len())
            .flat_map(|i| {
                g.node_param_sizes(i)
                    .into_iter()
                    .enumerate()
                    .map(move |(k, n)| GradParam {
                        node: i,
                        index: k,
                        bytes: 2 * n,
                    })
            })
            .collect();
        assert_eq!(params, want);
        // Five convolutions and three fully connected layers, with biases.
        assert_eq!(params.len(), 16);
    }
}
