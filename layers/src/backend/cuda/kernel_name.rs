//! The one rule that names a kernel by the storage it runs in.
//!
//! A `.cu` file instantiates a kernel body once per storage with
//! prelude.cuh's `INSTANTIATE_STORAGES`, which names the instances
//! `<base>_f32`, `<base>_f16` and `<base>_bf16`. On the Rust side such a
//! kernel is one [`PerStorage`], made by [`per_storage!`] from its base
//! name, and [`PerStorage::name`] is the one function that picks the
//! instance of a storage (as candle's `kernel_name::<T>()` does). The
//! names are made at compile time (`concat!`), so a launch picks its
//! kernel without allocating, and the programs list them as they are
//! ([`super::nvrtc::Program::per_storage`]).

use crate::core::dtype::Storage;

/// A kernel compiled once per storage: its instances' names, in the order
/// of [`Storage`] (F32, F16, Bf16). Made by [`per_storage!`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PerStorage {
    names: [&'static str; 3],
}

impl PerStorage {
    /// For [`per_storage!`], which derives the names from the base name.
    #[doc(hidden)]
    pub const fn from_names(names: [&'static str; 3]) -> PerStorage {
        PerStorage { names }
    }

    /// The instance for storage `st`.
    pub const fn name(self, st: Storage) -> &'static str {
        match st {
            Storage::F32 => self.names[0],
            Storage::F16 => self.names[1],
            Storage::Bf16 => self.names[2],
        }
    }

    /// Every instance's name.
    pub const fn names(self) -> [&'static str; 3] {
        self.names
    }
}

/// `per_storage!("pool_fwd")`: the kernel `pool_fwd` as prelude.cuh's
/// `INSTANTIATE_STORAGES(M)` instantiates it, `M(f32, F32) M(f16, F16)
/// M(bf16, BF16)` defining `pool_fwd_##sfx` (the suffixes are checked
/// against the prelude in the tests).
macro_rules! per_storage {
    ($base:literal) => {
        $crate::backend::cuda::kernel_name::PerStorage::from_names([
            concat!($base, "_f32"),
            concat!($base, "_f16"),
            concat!($base, "_bf16"),
        ])
    };
}
pub(crate) use per_storage;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cuda::nvrtc::PRELUDE;

    /// The `(suffix, storage struct)` pairs of prelude.cuh's
    /// `INSTANTIATE_STORAGES`, in its order.
    fn instantiated() -> Vec<(String, String)> {
        let line = PRELUDE
            .lines()
            .find_map(|l| l.strip_prefix("#define INSTANTIATE_STORAGES(M) "))
            .expect("prelude.cuh defines INSTANTIATE_STORAGES(M)");
        line.split("M(")
            .filter(|s| !s.trim().is_empty())
            .map(|s| {
                let (sfx, st) = s.trim().trim_end_matches(')').split_once(',').unwrap();
                (sfx.trim().to_string(), st.trim().to_string())
            })
            .collect()
    }

    #[test]
    fn names_follow_the_preludes_instantiation() {
        let k = per_storage!("pool_fwd");
        let storages = [Storage::F32, Storage::F16, Storage::Bf16];
        let pairs = instantiated();
        assert_eq!(pairs.len(), storages.len(), "{pairs:?}");
        for (st, (sfx, d)) in storages.into_iter().zip(&pairs) {
            // The prelude's storage structs are the storages upper-cased.
            assert_eq!(format!("{st:?}").to_uppercase(), *d);
            assert_eq!(k.name(st), format!("pool_fwd_{sfx}"));
        }
        assert_eq!(k.names(), ["pool_fwd_f32", "pool_fwd_f16", "pool_fwd_bf16"]);
    }
}
