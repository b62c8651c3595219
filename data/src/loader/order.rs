//! Which sample each slot of a batch gets: the tree's order, or a new
//! seeded permutation every epoch (torchvision's `RandomSampler`); and
//! each image's own augmentation seed, a function of the run's seed, the
//! epoch and the sample, so that a run reproduces whatever the threads'
//! timing.

use crate::transform::Rng;

/// One sample drawn: its index in the tree, its epoch, and whether it is
/// the epoch's last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Draw {
    pub sample: usize,
    pub epoch: u64,
    pub last_of_epoch: bool,
}

/// The order samples are drawn in, epoch after epoch.
pub struct EpochOrder {
    /// This epoch's sample indices; u32 halves the memory of usize
    /// (ImageNet-21k's 14 million samples: 56 MB).
    order: Vec<u32>,
    pos: usize,
    epoch: u64,
    shuffle: bool,
    seed: u64,
}

impl EpochOrder {
    /// The order of `n` samples (1 to `u32::MAX`; `None` outside).
    pub fn new(n: usize, shuffle: bool, seed: u64) -> Option<EpochOrder> {
        if n == 0 || u32::try_from(n).is_err() {
            return None;
        }
        let mut o = EpochOrder {
            order: vec![0; n],
            pos: 0,
            epoch: 0,
            shuffle,
            seed,
        };
        o.arrange();
        Some(o)
    }

    /// This epoch's order: the tree's, or a Fisher-Yates shuffle seeded by
    /// the run's seed and the epoch.
    fn arrange(&mut self) {
        for (i, s) in self.order.iter_mut().enumerate() {
            *s = i as u32;
        }
        if self.shuffle {
            let mut rng = Rng::new(mix(self.seed, self.epoch));
            for i in (1..self.order.len()).rev() {
                self.order.swap(i, rng.int(0, i));
            }
        }
    }

    pub fn next(&mut self) -> Draw {
        if self.pos == self.order.len() {
            self.pos = 0;
            self.epoch += 1;
            self.arrange();
        }
        self.pos += 1;
        Draw {
            sample: self.order[self.pos - 1] as usize,
            epoch: self.epoch,
            last_of_epoch: self.pos == self.order.len(),
        }
    }
}

/// SplitMix64's finalizer over `a` and `b`: a well-spread hash of the two.
fn mix(a: u64, b: u64) -> u64 {
    let mut z = a ^ b.wrapping_add(0x9E37_79B9_7F4A_7C15).rotate_left(29);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The seed of one image's random crop and flip.
pub fn image_seed(seed: u64, epoch: u64, sample: usize) -> u64 {
    mix(mix(seed, epoch), sample as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn epoch(o: &mut EpochOrder, n: usize) -> Vec<usize> {
        let draws: Vec<Draw> = (0..n).map(|_| o.next()).collect();
        for (k, d) in draws.iter().enumerate() {
            assert_eq!(d.last_of_epoch, k == n - 1, "{draws:?}");
            assert_eq!(d.epoch, draws[0].epoch);
        }
        draws.iter().map(|d| d.sample).collect()
    }

    #[test]
    fn in_order_epochs_repeat_the_tree() {
        let mut o = EpochOrder::new(5, false, 1).expect("an order");
        assert_eq!(epoch(&mut o, 5), [0, 1, 2, 3, 4]);
        assert_eq!(epoch(&mut o, 5), [0, 1, 2, 3, 4]);
    }

    #[test]
    fn shuffled_epochs_are_new_permutations_reproduced_by_the_seed() {
        let mut a = EpochOrder::new(50, true, 7).expect("an order");
        let mut b = EpochOrder::new(50, true, 7).expect("an order");
        let (a0, a1) = (epoch(&mut a, 50), epoch(&mut a, 50));
        assert_eq!(
            (epoch(&mut b, 50), epoch(&mut b, 50)),
            (a0.clone(), a1.clone())
        );
        assert_ne!(a0, a1, "a new order each epoch");
        for e in [&a0, &a1] {
            let mut s = e.clone();
            s.sort_unstable();
            assert_eq!(s, (0..50).collect::<Vec<_>>(), "each sample once");
        }
        let mut c = EpochOrder::new(50, true, 8).expect("an order");
        assert_ne!(epoch(&mut c, 50), a0, "another seed, another order");
    }

    #[test]
    fn empty_or_huge_trees_have_no_order() {
        assert!(EpochOrder::new(0, false, 0).is_none());
    }

    #[test]
    fn image_seeds_differ_by_seed_epoch_and_sample() {
        let s = image_seed(1, 0, 0);
        assert_ne!(s, image_seed(2, 0, 0));
        assert_ne!(s, image_seed(1, 1, 0));
        assert_ne!(s, image_seed(1, 0, 1));
        assert_ne!(image_seed(1, 1, 0), image_seed(1, 0, 1));
        assert_eq!(s, image_seed(1, 0, 0));
    }
}
