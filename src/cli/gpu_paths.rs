//! The switches of the GPU's optional paths, shared by `model` and
//! `check`: each is off by default, runs on the GPU only, and is refused in
//! one line on a run that lands on the CPU.

use anyhow::{bail, Result};
use clap::Args;
use cnnbench_layers::cuda::{ConvApi, GpuPaths, RnnChoice};

#[derive(Args, Debug, Clone, Default)]
pub struct GpuPathArgs {
    /// GPU: every path that a GPU run has shown correct and faster: --own-kernels
    /// --own-bn=parts --fuse-bn --cuda-graph --api auto (ResNet-50 f16 at batch 256 on an
    /// H200: 7,941 img/s, 1.35x PyTorch eager; the default path, cuDNN's own layers: 0.84x);
    /// --cuda-graph is left out where a run refuses it (--per-layer, --gpus, --launcher,
    /// --project-gpus); --rnn-algo auto is not in it (still open where it picks
    /// persist-static) and may be added
    #[arg(long, conflicts_with_all = ["own_kernels", "own_bn", "fuse_bn", "cuda_graph", "api"])]
    pub fastest: bool,
    /// GPU: ReLU, the residual add, NHWC max pooling and global average pooling on cnnbench's
    /// NVRTC kernels instead of cuDNN's, the add taking the ReLU after it, and the sum of a
    /// tensor's gradients where two layers read it on the add's kernel (verified on an H200)
    #[arg(long)]
    pub own_kernels: bool,
    /// GPU: batch norm on cnnbench's NVRTC kernels instead of cuDNN's, in every dtype and
    /// layout; with --fuse-bn they take the ReLU after it and the residual add (the ReLU only
    /// with --fuse-bn=relu) in every dtype and layout too (verified on an H200);
    /// --own-bn=parts: where one takes a block's add, it reads the block output's two gradient
    /// parts itself instead of a separate sum of them (verified on an H200: 1.03x --own-bn)
    #[arg(long, value_name = "WHAT", num_args = 0..=1, require_equals = true,
          default_missing_value = "plain", value_parser = parse_own_bn)]
    pub own_bn: Option<OwnBn>,
    /// GPU: batch norm runs the ReLU after it, and the residual add before that ReLU, in its
    /// own passes (cuDNN's fused BN-Ex kernels, f16 NHWC; other dtypes and NCHW run unfused,
    /// but with --own-bn in every dtype and layout); --fuse-bn=relu fuses the ReLU only (with
    /// --own-kernels the add then takes its ReLU); both verified on an H200
    #[arg(long, value_name = "WHAT", num_args = 0..=1, require_equals = true,
          default_missing_value = "add-relu", value_parser = parse_fuse_bn)]
    pub fuse_bn: Option<FuseBn>,
    /// GPU: capture one training step as a CUDA graph and replay it; the eager step is timed
    /// too (verified on an H200)
    #[arg(long)]
    pub cuda_graph: bool,
    /// GPU: the convolutions' cuDNN API: legacy (FindEx's algorithm) or graph (the backend
    /// API's engine configurations, each timed, the fastest kept) or auto (per layer and
    /// direction, whichever of the two ran faster while planning); each problem's choice is
    /// kept for the run (verified on an H200)
    #[arg(long, value_name = "API", default_value = "legacy", value_parser = parse_api)]
    pub api: ConvApi,
    /// GPU: the recurrent layers' cuDNN algorithm: standard, persist-static, persist-dynamic,
    /// persist-static-small-h, or auto (per layer, the fastest forward + backward of standard,
    /// persist-static and persist-static-small-h, each on batch-major and on time-major
    /// sequences, that cuDNN accepts, timed while planning; PyTorch runs LSTMs of hidden size
    /// 128 and less on persist-static-small-h); persist-static and persist-dynamic (and auto
    /// where it picks persist-static) not yet checked in a network on a GPU
    #[arg(long, value_name = "ALGO", default_value = "standard", value_parser = parse_rnn)]
    pub rnn_algo: RnnChoice,
    /// GPU: the convolutions take only the algorithms and engine configurations cuDNN marks
    /// deterministic (PyTorch's cudnn.deterministic): each sums in a fixed order, and two
    /// networks in one process take the same ones; separate runs still time their searches and
    /// may choose differently; the embedding's gradient still adds with atomics (not yet run on
    /// a GPU)
    #[arg(long)]
    pub deterministic: bool,
}

/// What `--own-bn` asks of the own batch norm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnBn {
    Plain,
    /// It reads a block output's two gradient parts itself.
    Parts,
}

fn parse_own_bn(s: &str) -> Result<OwnBn, String> {
    match s {
        "plain" => Ok(OwnBn::Plain),
        "parts" => Ok(OwnBn::Parts),
        _ => Err(format!(
            "unknown --own-bn '{s}' (plain, the default, or parts)"
        )),
    }
}

/// What `--fuse-bn` lets a batch norm take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FuseBn {
    /// The ReLU after it, and at a block's end the add before that ReLU.
    AddRelu,
    /// The ReLU only.
    Relu,
}

fn parse_fuse_bn(s: &str) -> Result<FuseBn, String> {
    match s {
        "add-relu" => Ok(FuseBn::AddRelu),
        "relu" => Ok(FuseBn::Relu),
        _ => Err(format!(
            "unknown --fuse-bn '{s}' (add-relu, the default, or relu)"
        )),
    }
}

fn parse_api(s: &str) -> Result<ConvApi, String> {
    ConvApi::parse(s)
}

fn parse_rnn(s: &str) -> Result<RnnChoice, String> {
    RnnChoice::parse(s)
}

impl GpuPathArgs {
    /// The paths asked for; refused when any is asked for and the run is on
    /// the CPU (`cpu_why`: why it is, when not asked for).
    pub fn paths(&self, on_gpu: bool, cpu_why: Option<&str>) -> Result<GpuPaths> {
        self.paths_where(on_gpu, cpu_why, true)
    }

    /// [`GpuPathArgs::paths`] of a run that takes a captured step or not
    /// (`graph`): `--fastest` stands for its flags, without `--cuda-graph`
    /// where the run refuses one.
    pub fn paths_where(
        &self,
        on_gpu: bool,
        cpu_why: Option<&str>,
        graph: bool,
    ) -> Result<GpuPaths> {
        if self.fastest && !on_gpu {
            match cpu_why {
                Some(why) => bail!("--fastest: GPU only: {why}"),
                None => bail!("--fastest: GPU only: add --device gpu"),
            }
        }
        let fast = self.fastest;
        let paths = GpuPaths {
            own_kernels: self.own_kernels || fast,
            own_bn: self.own_bn.is_some() || fast,
            own_bn_parts: self.own_bn == Some(OwnBn::Parts) || fast,
            fuse_bn: self.fuse_bn.is_some() || fast,
            fuse_bn_relu_only: self.fuse_bn == Some(FuseBn::Relu),
            cuda_graph: self.cuda_graph || (fast && graph),
            conv_api: if fast { ConvApi::Auto } else { self.api },
            rnn: self.rnn_algo,
            deterministic: self.deterministic,
        };
        if paths.own_bn_parts && (!paths.fuse_bn || paths.fuse_bn_relu_only) {
            bail!("--own-bn=parts reads the gradient parts where a batch norm took the block's add: add --fuse-bn");
        }
        if on_gpu || paths == GpuPaths::default() {
            return Ok(paths);
        }
        let flags: Vec<String> = paths
            .names()
            .iter()
            .map(|n| match *n {
                "api-graph" => "--api graph".to_string(),
                "api-auto" => "--api auto".to_string(),
                "fuse-bn-relu" => "--fuse-bn=relu".to_string(),
                "own-bn-parts" => "--own-bn=parts".to_string(),
                n if n.starts_with("rnn-") => format!("--rnn-algo {}", &n[4..]),
                n => format!("--{n}"),
            })
            .collect();
        match cpu_why {
            Some(why) => bail!("{}: GPU only: {why}", flags.join(" ")),
            None => bail!("{}: GPU only: add --device gpu", flags.join(" ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `--fastest` stands for (checked and timed on an H200 at
    /// 43e48bb, results/reference/gpu-h200-parts-43e48bb).
    const FASTEST: &str = "--own-kernels --own-bn=parts --fuse-bn --cuda-graph --api auto";

    #[test]
    fn fastest_is_the_verified_paths_and_refused_on_the_cpu() {
        use clap::Parser;
        #[derive(Parser)]
        struct T {
            #[command(flatten)]
            p: GpuPathArgs,
        }
        let fast = T::try_parse_from(["t", "--fastest"]).unwrap().p;
        let e = fast.paths(false, None).unwrap_err().to_string();
        assert_eq!(e, "--fastest: GPU only: add --device gpu");
        let e = fast.paths(false, Some("no NVIDIA driver")).unwrap_err();
        assert_eq!(e.to_string(), "--fastest: GPU only: no NVIDIA driver");
        let spelled = T::try_parse_from(std::iter::once("t").chain(FASTEST.split(' ')))
            .unwrap()
            .p
            .paths(true, None)
            .unwrap();
        let p = fast.paths(true, None).unwrap();
        assert_eq!(p, spelled);
        assert_eq!(p.unverified_note(), None);
        assert_eq!(
            p.record_name().as_deref(),
            Some("own-kernels+own-bn-parts+fuse-bn+cuda-graph+api-auto")
        );
        // Where a captured step is refused, the rest.
        let p = fast.paths_where(true, None, false).unwrap();
        assert_eq!(
            p,
            GpuPaths {
                cuda_graph: false,
                ..spelled
            }
        );
        // With what it does not stand for; not with what it does.
        let t = T::try_parse_from(["t", "--fastest", "--rnn-algo", "auto", "--deterministic"]);
        assert!(t.is_ok());
        for twice in [
            "--own-kernels",
            "--cuda-graph",
            "--api=graph",
            "--fuse-bn",
            "--own-bn",
        ] {
            assert!(
                T::try_parse_from(["t", "--fastest", twice]).is_err(),
                "{twice}"
            );
        }
    }

    #[test]
    fn fuse_bn_takes_an_optional_what() {
        use clap::Parser;
        #[derive(Parser)]
        struct T {
            #[command(flatten)]
            p: GpuPathArgs,
            model: Option<String>,
        }
        let t = T::try_parse_from(["t", "--fuse-bn", "resnet50"]).unwrap();
        assert_eq!(t.p.fuse_bn, Some(FuseBn::AddRelu));
        assert_eq!(t.model.as_deref(), Some("resnet50"));
        let t = T::try_parse_from(["t", "--fuse-bn=relu"]).unwrap();
        let p = t.p.paths(true, None).unwrap();
        assert!(p.fuse_bn && p.fuse_bn_relu_only);
        assert_eq!(p.names(), ["fuse-bn-relu"]);
        assert_eq!(
            t.p.paths(false, None).unwrap_err().to_string(),
            "--fuse-bn=relu: GPU only: add --device gpu"
        );
        assert!(T::try_parse_from(["t", "--fuse-bn=add"]).is_err());
        let t = T::try_parse_from(["t", "--own-bn", "--fuse-bn"]).unwrap();
        let p = t.p.paths(true, None).unwrap();
        assert!(p.own_bn && p.fuse_bn && !p.fuse_bn_relu_only);
        assert_eq!(p.record_name().as_deref(), Some("own-bn+fuse-bn"));
        assert_eq!(
            t.p.paths(false, None).unwrap_err().to_string(),
            "--own-bn --fuse-bn: GPU only: add --device gpu"
        );
        let t = T::try_parse_from(["t", "--own-bn=parts", "--fuse-bn"]).unwrap();
        let p = t.p.paths(true, None).unwrap();
        assert!(p.own_bn && p.own_bn_parts);
        assert_eq!(p.record_name().as_deref(), Some("own-bn-parts+fuse-bn"));
        // Checked on an H200 at 43e48bb.
        assert_eq!(p.unverified_note(), None);
        assert_eq!(
            t.p.paths(false, None).unwrap_err().to_string(),
            "--own-bn=parts --fuse-bn: GPU only: add --device gpu"
        );
        assert!(T::try_parse_from(["t", "--own-bn=sum"]).is_err());
        for alone in [
            &["t", "--own-bn=parts"][..],
            &["t", "--own-bn=parts", "--fuse-bn=relu"],
        ] {
            let t = T::try_parse_from(alone).unwrap();
            let e = t.p.paths(true, None).unwrap_err().to_string();
            assert!(e.ends_with("add --fuse-bn"), "{e}");
        }
    }

    #[test]
    fn paths_on_the_cpu_are_refused_in_one_line() {
        let none = GpuPathArgs::default();
        assert_eq!(none.paths(false, None).unwrap(), GpuPaths::default());
        let graph = GpuPathArgs {
            cuda_graph: true,
            api: ConvApi::Graph,
            ..GpuPathArgs::default()
        };
        assert!(graph.paths(true, None).unwrap().cuda_graph);
        let e = graph.paths(false, None).unwrap_err().to_string();
        assert_eq!(e, "--cuda-graph --api graph: GPU only: add --device gpu");
        let e = graph
            .paths(false, Some("no NVIDIA driver"))
            .unwrap_err()
            .to_string();
        assert_eq!(e, "--cuda-graph --api graph: GPU only: no NVIDIA driver");
        assert!(!e.contains('\n'));
        let det = GpuPathArgs {
            deterministic: true,
            ..GpuPathArgs::default()
        };
        let p = det.paths(true, None).unwrap();
        assert!(p.deterministic);
        assert_eq!(p.record_name().as_deref(), Some("deterministic"));
        let e = det.paths(false, None).unwrap_err().to_string();
        assert_eq!(e, "--deterministic: GPU only: add --device gpu");
    }

    #[test]
    fn rnn_algo_names_an_algorithm_or_auto() {
        use clap::Parser;
        #[derive(Parser)]
        struct T {
            #[command(flatten)]
            p: GpuPathArgs,
        }
        let t = T::try_parse_from(["t"]).unwrap();
        assert_eq!(t.p.paths(false, None).unwrap(), GpuPaths::default());
        let t = T::try_parse_from(["t", "--rnn-algo", "auto"]).unwrap();
        assert_eq!(t.p.paths(true, None).unwrap().rnn, RnnChoice::Auto);
        assert_eq!(
            t.p.paths(false, None).unwrap_err().to_string(),
            "--rnn-algo auto: GPU only: add --device gpu"
        );
        let t = T::try_parse_from(["t", "--rnn-algo", "persist-static-small-h", "--cuda-graph"])
            .unwrap();
        assert_eq!(
            t.p.paths(false, None).unwrap_err().to_string(),
            "--cuda-graph --rnn-algo persist-static-small-h: GPU only: add --device gpu"
        );
        let e = T::try_parse_from(["t", "--rnn-algo", "fast"])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("unknown RNN algorithm 'fast'"), "{e}");
    }
}
