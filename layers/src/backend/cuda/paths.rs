//! The GPU's optional paths: each one a switch a user can turn on to see
//! what it buys (own memory-bound kernels, batch norm fused with what
//! follows it, a CUDA-graph step, cuDNN's graph API for convolutions).
//! Each is off by default until a GPU run shows it correct and faster;
//! records name the ones that ran ([`GpuPaths::names`]).

use super::rnn_algo::RnnAlgo;

/// Which cuDNN API runs the convolutions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ConvApi {
    /// `cudnnConvolution{Forward,BackwardData,BackwardFilter}` with the
    /// algorithm FindEx chose.
    #[default]
    Legacy,
    /// The graph (backend) API: an operation graph per direction, the
    /// engine configurations cuDNN's heuristics offer, each timed, the
    /// fastest kept (as PyTorch's `cudnn.benchmark`).
    Graph,
    /// Per layer and direction, whichever of the two ran faster while
    /// planning: FindEx's algorithm and the graph API's fastest plan, each
    /// timed the same way on the layer's own tensors. On the H200 the graph
    /// API was faster in most layers (f32: 1.3-2.1x per direction) but, in
    /// f16, twice as slow on ResNet-50's first convolution (3 input
    /// channels).
    Auto,
}

impl ConvApi {
    pub fn name(self) -> &'static str {
        match self {
            ConvApi::Legacy => "legacy",
            ConvApi::Graph => "graph",
            ConvApi::Auto => "auto",
        }
    }

    pub fn parse(s: &str) -> Result<ConvApi, String> {
        match s {
            "legacy" => Ok(ConvApi::Legacy),
            "graph" => Ok(ConvApi::Graph),
            "auto" => Ok(ConvApi::Auto),
            _ => Err(format!("unknown cuDNN API '{s}' (legacy, graph or auto)")),
        }
    }
}

/// Which cuDNN recurrence algorithm the network's recurrent layers run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RnnChoice {
    /// This algorithm in every layer.
    Algo(RnnAlgo),
    /// Per layer, the fastest forward + backward of the algorithms cuDNN
    /// accepts for it (standard, persist-static, persist-static-small-h),
    /// each on the network's batch-major sequences and on time-major ones
    /// behind transposes, each timed the same way while planning. PyTorch runs its LSTMs of
    /// hidden size 128 and less (forward: 192) on persist-static-small-h,
    /// where the network layers had run on standard.
    Auto,
}

impl Default for RnnChoice {
    fn default() -> Self {
        RnnChoice::Algo(RnnAlgo::Standard)
    }
}

impl RnnChoice {
    pub fn name(self) -> &'static str {
        match self {
            RnnChoice::Algo(a) => a.name(),
            RnnChoice::Auto => "auto",
        }
    }

    /// `auto` or an algorithm's name, or one line listing them.
    pub fn parse(s: &str) -> Result<RnnChoice, String> {
        if s == "auto" {
            return Ok(RnnChoice::Auto);
        }
        RnnAlgo::parse(s).map(RnnChoice::Algo).map_err(|_| {
            format!(
                "unknown RNN algorithm '{s}' (expected {} or auto)",
                RnnAlgo::ALL.map(RnnAlgo::name).join(", ")
            )
        })
    }
}

/// The optional GPU paths of one run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuPaths {
    /// ReLU, the residual add and NHWC max pooling on cnnbench's
    /// vectorized NVRTC kernels instead of cuDNN's, and global average
    /// pooling on its gather kernel (`--own-kernels`).
    pub own_kernels: bool,
    /// Batch norm on cnnbench's NVRTC kernels (`bn.cu`) instead of
    /// cuDNN's, in every dtype and layout; with `fuse_bn` they take the
    /// ReLU and the add in every dtype and layout too (`--own-bn`).
    pub own_bn: bool,
    /// With `own_bn` and the add fused: the batch norm reads its output
    /// gradient's two parts itself (a block's output is read by the next
    /// block's first convolution and by its add), so the executor does not
    /// sum them in a pass of their own (`--own-bn=parts`).
    pub own_bn_parts: bool,
    /// Batch norm runs the ReLU after it, and the residual add before that
    /// ReLU, in its own passes (`--fuse-bn`).
    pub fuse_bn: bool,
    /// With `fuse_bn`: the ReLU only, not the add (`--fuse-bn=relu`; with
    /// `own_kernels` the add then takes its ReLU). On the H200 cuDNN's
    /// fused batch norm + add + ReLU took 1.20 ms backward at 256x56x56,
    /// where its unfused batch norm took 0.55.
    pub fuse_bn_relu_only: bool,
    /// One training step captured as a CUDA graph and replayed
    /// (`--cuda-graph`).
    pub cuda_graph: bool,
    /// The convolutions' cuDNN API (`--api`).
    pub conv_api: ConvApi,
    /// The recurrent layers' cuDNN algorithm (`--rnn-algo`).
    pub rnn: RnnChoice,
    /// The convolutions take only the algorithms and engine configurations
    /// cuDNN marks deterministic (`--deterministic`, as PyTorch's
    /// `cudnn.deterministic`): each sums in a fixed order. Two networks that
    /// run the same kernels can still differ where one adds with atomics
    /// (cuDNN documents its legacy weight-gradient algorithms 0 and 3 as
    /// nondeterministic), and a whole step amplifies that rounding. On a
    /// shared H200 two GPU tests that hold one network's step to another's
    /// failed that way (or so it seems: which algorithm ran was not logged)
    /// and passed alone. Separate processes still time their own searches,
    /// so they may choose different algorithms.
    pub deterministic: bool,
}

/// The paths a GPU run has not yet shown wholly correct, each with what is
/// still open, named in the one-line note a run that takes it prints. The
/// other paths have passed `check --device gpu` on an H200, alone in f16
/// NHWC and f32 NCHW (the run of a3cfd5f; the fused batch norms again on
/// 2026-11-27, results/reference/gpu-h200-checks-ab-a43e5a7, after the
/// check's own fix) and together in f16, bf16 and tf32; `--own-bn=parts`
/// with all the others in f16 NHWC and f32 NCHW at 43e48bb
/// (results/reference/gpu-h200-parts-43e48bb); the GPU tests run every
/// test network on each.
const OPEN: &[(&str, &str)] = &[
    (
        "rnn-persist-static",
        "timed by --rnn-algo auto on an H200, never yet checked in a network there",
    ),
    (
        "rnn-auto",
        "where it picks persist-static, that algorithm has not been checked in a network on a GPU",
    ),
    ("rnn-persist-dynamic", "not yet run in a network on a GPU"),
    ("deterministic", "not yet run on a GPU"),
];

/// Whether the path name `name` is what `pattern` (a name, or a prefix
/// ending in `*`) names.
fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == pattern,
    }
}

impl GpuPaths {
    /// The paths taken, by their record names, in a fixed order.
    pub fn names(&self) -> Vec<&'static str> {
        let mut n = Vec::new();
        if self.own_kernels {
            n.push("own-kernels");
        }
        if self.own_bn {
            n.push(if self.own_bn_parts {
                "own-bn-parts"
            } else {
                "own-bn"
            });
        }
        if self.fuse_bn {
            n.push(if self.fuse_bn_relu_only {
                "fuse-bn-relu"
            } else {
                "fuse-bn"
            });
        }
        if self.cuda_graph {
            n.push("cuda-graph");
        }
        match self.conv_api {
            ConvApi::Legacy => {}
            ConvApi::Graph => n.push("api-graph"),
            ConvApi::Auto => n.push("api-auto"),
        }
        match self.rnn {
            RnnChoice::Algo(RnnAlgo::Standard) => {}
            RnnChoice::Algo(RnnAlgo::PersistStatic) => n.push("rnn-persist-static"),
            RnnChoice::Algo(RnnAlgo::PersistDynamic) => n.push("rnn-persist-dynamic"),
            RnnChoice::Algo(RnnAlgo::PersistStaticSmallH) => n.push("rnn-persist-static-small-h"),
            RnnChoice::Auto => n.push("rnn-auto"),
        }
        if self.deterministic {
            n.push("deterministic");
        }
        n
    }

    /// The record's value: the names joined by `+`; `None` on the default
    /// path.
    pub fn record_name(&self) -> Option<String> {
        let n = self.names();
        (!n.is_empty()).then(|| n.join("+"))
    }

    /// The one line a run taking a path with something open prints, or
    /// `None`.
    pub fn unverified_note(&self) -> Option<String> {
        self.unverified_note_for(true)
    }

    /// [`GpuPaths::unverified_note`] for a run whose models have recurrent
    /// layers or not (`--rnn-algo` changes nothing in the latter, so it
    /// leaves nothing open there).
    pub fn unverified_note_for(&self, recurrent: bool) -> Option<String> {
        let paths = match recurrent {
            true => *self,
            false => GpuPaths {
                rnn: RnnChoice::default(),
                ..*self
            },
        };
        let names = paths.names();
        let open: Vec<String> = OPEN
            .iter()
            .filter_map(|(pattern, what)| {
                let n = names.iter().find(|n| matches(pattern, n))?;
                Some(format!("{n} ({what})"))
            })
            .collect();
        (!open.is_empty()).then(|| {
            format!(
                "not wholly verified on a GPU: {}: check its numbers with `cnnbench check --device gpu`",
                open.join(", ")
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_in_a_fixed_order_and_empty_by_default() {
        assert_eq!(GpuPaths::default().names(), Vec::<&str>::new());
        assert_eq!(GpuPaths::default().record_name(), None);
        assert_eq!(GpuPaths::default().unverified_note(), None);
        let all = GpuPaths {
            own_kernels: true,
            own_bn: false,
            own_bn_parts: false,
            fuse_bn: true,
            fuse_bn_relu_only: false,
            cuda_graph: true,
            conv_api: ConvApi::Graph,
            rnn: RnnChoice::Auto,
            deterministic: false,
        };
        assert_eq!(
            all.record_name().as_deref(),
            Some("own-kernels+fuse-bn+cuda-graph+api-graph+rnn-auto")
        );
        let det = GpuPaths {
            deterministic: true,
            ..GpuPaths::default()
        };
        assert_eq!(det.record_name().as_deref(), Some("deterministic"));
        assert!(det.unverified_note().unwrap().contains("deterministic ("));
        // Every path but the recurrent algorithms has been checked; a
        // model without recurrent layers hears of none.
        assert!(all.unverified_note().unwrap().contains("rnn-auto ("));
        assert_eq!(all.unverified_note_for(false), None);
        let dynamic = GpuPaths {
            rnn: RnnChoice::Algo(RnnAlgo::PersistDynamic),
            ..all
        };
        let note = dynamic.unverified_note().unwrap();
        assert!(
            note.starts_with("not wholly verified on a GPU: rnn-persist-dynamic ("),
            "{note}"
        );
        assert!(
            !note.contains("cuda-graph") && !note.contains("own-kernels") && !note.contains('\n'),
            "{note}"
        );
        // Without recurrent layers `--rnn-algo` leaves nothing open.
        assert_eq!(dynamic.unverified_note_for(false), None);
    }

    #[test]
    fn rnn_choices_parse_by_name_and_name_their_path() {
        assert_eq!(RnnChoice::default(), RnnChoice::Algo(RnnAlgo::Standard));
        for a in RnnAlgo::ALL {
            let c = RnnChoice::Algo(a);
            assert_eq!(RnnChoice::parse(c.name()), Ok(c));
            let paths = GpuPaths {
                rnn: c,
                ..GpuPaths::default()
            };
            match a {
                RnnAlgo::Standard => assert_eq!(paths.record_name(), None),
                _ => {
                    let name = format!("rnn-{}", a.name());
                    assert_eq!(paths.record_name(), Some(name.clone()));
                    // The two a network on a GPU has not checked yet.
                    let open = matches!(a, RnnAlgo::PersistStatic | RnnAlgo::PersistDynamic);
                    let note = paths.unverified_note();
                    assert_eq!(note.is_some(), open, "{name}: {note:?}");
                    if let Some(note) = note {
                        assert!(note.contains(&format!("{name} (")), "{note}");
                    }
                }
            }
        }
        assert_eq!(RnnChoice::parse("auto"), Ok(RnnChoice::Auto));
        let e = RnnChoice::parse("fast").unwrap_err();
        assert_eq!(
            e,
            "unknown RNN algorithm 'fast' (expected standard, persist-static, \
             persist-dynamic, persist-static-small-h or auto)"
        );
        assert!(matches("rnn-*", "rnn-auto") && !matches("rnn-*", "api-auto"));
        assert!(matches("own-bn", "own-bn") && !matches("own-bn", "own-bn-plain"));
    }

    #[test]
    fn apis_parse_by_name() {
        for api in [ConvApi::Legacy, ConvApi::Graph, ConvApi::Auto] {
            assert_eq!(ConvApi::parse(api.name()), Ok(api));
        }
        assert!(ConvApi::parse("v8")
            .unwrap_err()
            .contains("legacy, graph or auto"));
    }
}
