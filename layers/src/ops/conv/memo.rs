//! What each network convolution's planning chose, kept for the process:
//! a later layer or network with the same problem, on the same GPU and
//! API, as deterministic or not (`--deterministic`), within the same
//! workspace limit and pointer alignment, takes the
//! same algorithm or engine configuration without searching again, as
//! PyTorch's `cudnn.benchmark` cache does. So two networks built in one
//! process (`check`'s, and the tests that hold a hooked, data-parallel or
//! graph-replayed step to a plain one) compute with the same kernels:
//! searched separately, two networks on an H200 picked different kernels
//! and their first convolution's weight gradients differed by 1-9% after
//! a step (f16, bf16, tf32), rounding that a whole step amplifies. What a
//! layer runs is still named in its record.

use crate::backend::cuda::ConvApi;
use crate::core::{DType, Layout};
use cnnbench_kernels::conv::{ConvShape, Direction};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// One direction's choice.
#[derive(Clone, Debug, PartialEq)]
pub enum Chosen {
    /// FindEx's algorithm and math type, and the workspace it runs in.
    Legacy {
        algo: u32,
        math: u32,
        workspace: usize,
    },
    /// A graph-API engine configuration, by its name (`eng62_k25=1`).
    Graph { config: String },
}

/// Everything a choice depends on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Key(String);

impl Key {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        device: &str,
        p: &ConvShape,
        dtype: DType,
        layout: Layout,
        dir: Direction,
        api: ConvApi,
        deterministic: bool,
        workspace_limit: usize,
        alignment: usize,
    ) -> Key {
        Key(format!(
            "{device}|{p:?}|{dtype}|{layout:?}|{dir}|{api:?}|{deterministic}|{workspace_limit}|{alignment}"
        ))
    }
}

fn memo() -> &'static Mutex<HashMap<Key, Chosen>> {
    static MEMO: OnceLock<Mutex<HashMap<Key, Chosen>>> = OnceLock::new();
    MEMO.get_or_init(|| Mutex::new(HashMap::new()))
}

/// What an earlier planning chose for `key`.
pub fn get(key: &Key) -> Option<Chosen> {
    memo().lock().ok()?.get(key).cloned()
}

/// Keeps `chosen` for `key` unless an earlier search (one that ran at the
/// same time) got there first, and returns what is kept: the caller runs
/// that, so that every layer with the key runs the same.
pub fn put(key: Key, chosen: Chosen) -> Chosen {
    match memo().lock() {
        Ok(mut m) => m.entry(key).or_insert(chosen).clone(),
        Err(_) => chosen,
    }
}

/// Replaces `key`'s choice (one cuDNN no longer offers).
pub fn replace(key: Key, chosen: Chosen) {
    if let Ok(mut m) = memo().lock() {
        m.insert(key, chosen);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(mb: usize) -> ConvShape {
        ConvShape {
            mb,
            g: 1,
            ic: 8,
            ih: 5,
            iw: 5,
            oc: 8,
            oh: 5,
            ow: 5,
            kh: 3,
            kw: 3,
            sh: 1,
            sw: 1,
            ph: 1,
            pw: 1,
            dh: 0,
            dw: 0,
        }
    }

    fn key(device: &str, mb: usize, dir: Direction, limit: usize) -> Key {
        key_det(device, mb, dir, limit, false)
    }

    fn key_det(device: &str, mb: usize, dir: Direction, limit: usize, det: bool) -> Key {
        let (d, l, a) = (DType::F16, Layout::Nhwc, ConvApi::Auto);
        Key::new(device, &shape(mb), d, l, dir, a, det, limit, 16)
    }

    /// A choice comes back for its own key only, and the first one stays.
    #[test]
    fn a_choice_is_kept_for_its_own_problem() {
        let k = key("memo-test-gpu#0", 2, Direction::Fwd, 1 << 20);
        assert_eq!(get(&k), None);
        let first = Chosen::Legacy {
            algo: 1,
            math: 1,
            workspace: 64,
        };
        let graph = Chosen::Graph {
            config: "eng0".into(),
        };
        assert_eq!(put(k.clone(), first.clone()), first);
        // A search that ended later runs what the first one kept.
        assert_eq!(put(k.clone(), graph.clone()), first);
        assert_eq!(get(&k), Some(first));
        replace(k.clone(), graph.clone());
        assert_eq!(get(&k), Some(graph));
        for other in [
            key("memo-test-gpu#1", 2, Direction::Fwd, 1 << 20),
            key("memo-test-gpu#0", 3, Direction::Fwd, 1 << 20),
            key("memo-test-gpu#0", 2, Direction::BwdData, 1 << 20),
            key("memo-test-gpu#0", 2, Direction::Fwd, 1 << 21),
            // A deterministic run may not take a nondeterministic choice.
            key_det("memo-test-gpu#0", 2, Direction::Fwd, 1 << 20, true),
        ] {
            assert_eq!(get(&other), None, "{other:?}");
        }
    }
}
