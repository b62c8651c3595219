//! Test bodies written once and run on every backend (candle's
//! `test_device!`): on the CPU always, and on CUDA for every dtype and
//! layout where a GPU is usable. Without one, the CUDA cases print
//! `skipped: no GPU` and pass, unless `CNNBENCH_GPU=required`.
//!
//! Each body builds an unfused network of the backend under test and
//! compares it layer by layer ([`super::compare`]) with the CPU's naive
//! reference network: every op's output and parameter gradients.

use super::compare::{self, Pair};
use super::cpu::{CpuNet, CpuOptions};
use super::exec::Executor;
use super::gpu::{GpuNet, GpuOptions};
use super::graph::Graph;
use super::tests::{every_op_net, preact_net, residual_net, sequence_net, token_net};
use crate::backend::cuda::device::{compute_capability, supports_dtype};
use crate::backend::cuda::nvrtc::Kernels;
use crate::backend::cuda::{no_gpu_for_test, ConvApi, Gpu, GpuPaths, RnnChoice};
use crate::core::backend::Backend;
use crate::core::{DType, Layout};
use crate::ops::cuda_programs::compile_kernels;
use cnnbench_kernels::conv::reference::rel_l2_error;
use cnnbench_kernels::Isa;

const SEED: u64 = 11;

/// A backend the bodies run on: how to build its network, and how close
/// it must come to the reference.
trait OnBackend {
    type B: Backend;
    fn net(&self, g: &Graph, batch: usize) -> Executor<Self::B>;
    /// A network for a test that holds one network's step to another's:
    /// on the GPU its convolutions take only deterministic algorithms, so
    /// that two such networks sum in the same order however loaded the GPU
    /// is (`--deterministic`; on a shared H200 two networks' conv1 weight
    /// gradients in bf16 came 6.6e-2 apart, alone they passed).
    fn twin_net(&self, g: &Graph, batch: usize) -> Executor<Self::B> {
        self.net(g, batch)
    }
    fn tolerance(&self) -> f64;
    fn name(&self) -> String;
    /// The run's precision (the gradients' loss scale follows it).
    fn dtype(&self) -> DType {
        DType::F32
    }
    fn layout(&self) -> Layout {
        Layout::Nhwc
    }
    /// On the CUDA-graph path: the captured step against the reference's
    /// loss and the eager step's gradients
    /// ([`super::cuda_graph::replayed_against_eager`]); elsewhere nothing.
    fn replayed(&self, _net: &mut Executor<Self::B>, _reference: &CpuNet) -> Vec<Pair> {
        Vec::new()
    }
    /// Whether every residual block's end must run fused (the own batch
    /// norm with `--fuse-bn` takes the add and its ReLU in every dtype
    /// and layout).
    fn fuses_every_block_end(&self) -> bool {
        false
    }
    /// On the CUDA-graph path: `steps` training steps with `update`
    /// through the captured graph, each step's loss; `None` elsewhere.
    fn graph_steps(
        &self,
        _net: &mut Executor<Self::B>,
        _steps: usize,
        _update: Option<(f32, f32)>,
    ) -> Option<Vec<f32>> {
        None
    }
}

struct OnCpu;

impl OnBackend for OnCpu {
    type B = crate::backend::cpu::Cpu;

    fn net(&self, g: &Graph, batch: usize) -> CpuNet {
        let opts = CpuOptions {
            isa: Isa::detect(),
            reference: false,
            seed: SEED,
            fuse_relu: false,
        };
        CpuNet::new(g, batch, opts).expect("a CPU network")
    }

    fn tolerance(&self) -> f64 {
        1e-4
    }

    fn name(&self) -> String {
        "cpu".into()
    }
}

struct OnCuda<'g> {
    gpu: &'g Gpu,
    kernels: &'g Kernels,
    dtype: DType,
    layout: Layout,
    /// The optional GPU paths the network takes.
    paths: GpuPaths,
}

impl<'g> OnBackend for OnCuda<'g> {
    type B = crate::backend::cuda::backend::Cuda<'g>;

    fn fuses_every_block_end(&self) -> bool {
        let p = &self.paths;
        p.own_bn && p.fuse_bn && !p.fuse_bn_relu_only
    }

    fn net(&self, g: &Graph, batch: usize) -> GpuNet<'g> {
        let opts = GpuOptions {
            dtype: self.dtype,
            layout: self.layout,
            seed: SEED,
            workspace_limit: 256 << 20,
            per_layer: false,
            paths: self.paths,
        };
        GpuNet::new(self.gpu, self.kernels, g, batch, opts).expect("a GPU network")
    }

    fn twin_net(&self, g: &Graph, batch: usize) -> GpuNet<'g> {
        let on = OnCuda {
            paths: GpuPaths {
                deterministic: true,
                ..self.paths
            },
            ..*self
        };
        on.net(g, batch)
    }

    fn tolerance(&self) -> f64 {
        match self.dtype {
            DType::F32 => 1e-3,
            DType::Tf32 | DType::F16 => 1e-2,
            DType::Bf16 => 5e-2,
        }
    }

    fn name(&self) -> String {
        match self.paths.record_name() {
            Some(p) => format!("cuda {} {} {p}", self.dtype, self.layout),
            None => format!("cuda {} {}", self.dtype, self.layout),
        }
    }

    fn dtype(&self) -> DType {
        self.dtype
    }

    fn layout(&self) -> Layout {
        self.layout
    }

    fn replayed(&self, net: &mut GpuNet<'g>, reference: &CpuNet) -> Vec<Pair> {
        if !self.paths.cuda_graph {
            return Vec::new();
        }
        super::cuda_graph::replayed_against_eager(net, reference)
            .unwrap_or_else(|e| panic!("{}: the captured step: {e}", self.name()))
    }

    fn graph_steps(
        &self,
        net: &mut GpuNet<'g>,
        steps: usize,
        update: Option<(f32, f32)>,
    ) -> Option<Vec<f32>> {
        if !self.paths.cuda_graph {
            return None;
        }
        let mut slot = None;
        let losses = (0..steps)
            .map(|_| {
                let ms = net.graph_step(&mut slot, update)?;
                assert!(ms > 0.0 && ms.is_finite(), "{}: {ms} ms", self.name());
                net.loss()
            })
            .collect::<crate::core::error::Result<Vec<f32>>>()
            .unwrap_or_else(|e| panic!("{}: graph steps: {e}", self.name()));
        Some(losses)
    }
}

/// The default path, each optional GPU path alone, and all of them: every
/// test body runs on each.
fn paths_tested() -> Vec<GpuPaths> {
    let on = GpuPaths::default();
    [
        on,
        GpuPaths {
            own_kernels: true,
            ..on
        },
        GpuPaths {
            fuse_bn: true,
            ..on
        },
        GpuPaths {
            cuda_graph: true,
            ..on
        },
        GpuPaths {
            conv_api: ConvApi::Graph,
            ..on
        },
        GpuPaths {
            conv_api: ConvApi::Auto,
            ..on
        },
        // Batch norm on the own kernels, plain and taking its ReLU and add
        // (in every dtype and layout).
        GpuPaths { own_bn: true, ..on },
        GpuPaths {
            own_bn: true,
            fuse_bn: true,
            ..on
        },
        // ... reading a block output's two gradient parts itself.
        GpuPaths {
            own_bn: true,
            own_bn_parts: true,
            fuse_bn: true,
            ..on
        },
        // Each recurrent layer on the fastest of cuDNN's algorithms and
        // layouts (alone, so that a persistent kernel's failure is its
        // own).
        GpuPaths {
            rnn: RnnChoice::Auto,
            ..on
        },
        // The batch norms take their ReLUs only, the adds theirs.
        GpuPaths {
            own_kernels: true,
            fuse_bn: true,
            fuse_bn_relu_only: true,
            ..on
        },
    ]
    .into_iter()
    // All of them, on each API that picks engines (auto's choice depends
    // on timing).
    .chain([ConvApi::Graph, ConvApi::Auto].map(|conv_api| GpuPaths {
        own_kernels: true,
        own_bn: false,
        own_bn_parts: false,
        fuse_bn: true,
        fuse_bn_relu_only: false,
        cuda_graph: true,
        conv_api,
        rnn: RnnChoice::Auto,
        deterministic: false,
    }))
    .collect()
}

/// Runs `body` on every dtype, layout and optional path of the GPU, or
/// says why not.
fn on_every_gpu_config(body: impl Fn(&OnCuda)) {
    let gpu = match Gpu::open() {
        Ok(g) => g,
        Err(why) => {
            no_gpu_for_test(&why);
            return;
        }
    };
    let cc = compute_capability(&gpu.info.compute_capability);
    let kernels = compile_kernels(&gpu.ctx, cc).expect("the CUDA kernels compile");
    for dtype in DType::ALL {
        if !supports_dtype(&gpu.info.compute_capability, dtype) {
            continue;
        }
        for layout in [Layout::Nhwc, Layout::Nchw] {
            for paths in paths_tested() {
                body(&OnCuda {
                    gpu: &gpu,
                    kernels: &kernels,
                    dtype,
                    layout,
                    paths,
                });
            }
        }
    }
}

/// Generates `$name::cpu` and `$name::cuda` from one generic body.
macro_rules! on_every_backend {
    ($name:ident) => {
        mod $name {
            #[test]
            fn cpu() {
                super::$name(&super::OnCpu);
            }

            #[test]
            fn cuda() {
                super::on_every_gpu_config(|b| super::$name(b));
            }
        }
    };
}

/// The reference network after one forward and backward pass.
fn reference(g: &Graph, batch: usize) -> CpuNet {
    let opts = CpuOptions {
        isa: Isa::detect(),
        reference: true,
        seed: SEED,
        fuse_relu: false,
    };
    let mut r = CpuNet::new(g, batch, opts).expect("the reference network");
    r.forward().expect("reference forward");
    r.backward().expect("reference backward");
    r
}

fn assert_close(on: &str, pairs: &[Pair], tol: f64) {
    for p in pairs {
        assert_eq!(p.got.len(), p.want.len(), "{on}: {}", p.tensor);
        let err = rel_l2_error(&p.got, &p.want);
        assert!(
            err <= tol,
            "{on}: {} off by {err:.2e} (> {tol:.0e})",
            p.tensor
        );
    }
}

/// Every layer of `g` on the backend against the reference.
fn matches_the_reference<T: OnBackend>(t: &T, g: &Graph, batch: usize) {
    let mut want = reference(g, batch);
    let mut net = t.net(g, batch);
    let outputs = compare::outputs(&mut net, &want).expect("forward");
    assert_close(&t.name(), &outputs, t.tolerance());
    let d = t.dtype();
    let scale = |parts: &[&[f32]]| compare::loss_scale(d, parts);
    let grads = compare::gradients(&mut net, &mut want, scale).expect("backward");
    assert!(!grads.is_empty());
    assert_close(&t.name(), &grads, t.tolerance());
    // On the CUDA-graph path, the same step replayed from its graph.
    assert_close(&t.name(), &t.replayed(&mut net, &want), t.tolerance());
}

fn every_op_matches_the_reference<T: OnBackend>(t: &T) {
    matches_the_reference(t, &every_op_net(), 2);
}

fn preactivation_blocks_match_the_reference<T: OnBackend>(t: &T) {
    matches_the_reference(t, &preact_net(), 2);
}

/// ResNet's blocks: with `--fuse-bn` (cuDNN's batch norm: f16 NHWC; the
/// own one, `--own-bn`: every dtype and layout, which the test holds it
/// to) every block end runs as one fused batch norm, add and ReLU, the
/// ReLU's two-part gradient summed before it.
fn residual_blocks_match_the_reference<T: OnBackend>(t: &T) {
    let g = residual_net();
    matches_the_reference(t, &g, 2);
    if t.fuses_every_block_end() {
        let net = t.net(&g, 2);
        assert!(net.fused_adds() > 0, "{}: no block end fused", t.name());
    }
}

/// Recurrent layers run in NHWC only (a sequence's features innermost).
fn sequence_ops_match_the_reference<T: OnBackend>(t: &T) {
    if t.layout() == Layout::Nchw {
        return;
    }
    matches_the_reference(t, &token_net(), 3);
    matches_the_reference(t, &sequence_net(), 3);
}

on_every_backend!(every_op_matches_the_reference);
on_every_backend!(sequence_ops_match_the_reference);
on_every_backend!(preactivation_blocks_match_the_reference);
on_every_backend!(residual_blocks_match_the_reference);

/// Records what a data-parallel step's gradient exchange hears.
#[derive(Default)]
struct ListeningHook {
    nodes: Vec<usize>,
    finished: usize,
}

impl super::exec::GradientHook for ListeningHook {
    fn after_backward(&mut self, node: usize) -> crate::core::error::Result<()> {
        self.nodes.push(node);
        Ok(())
    }

    fn finish(&mut self) -> crate::core::error::Result<()> {
        self.finished += 1;
        Ok(())
    }
}

/// The hook of a data-parallel step hears of every node once, in backward
/// order, and is finished once per step; the step it rides on computes
/// what a plain step does (to the backend's tolerance: the CPU may pick
/// another convolution algorithm in each network's first step).
fn a_hooked_step_hears_every_node_and_changes_nothing<T: OnBackend>(t: &T) {
    let g = every_op_net();
    let (mut plain, mut hooked) = (t.twin_net(&g, 2), t.twin_net(&g, 2));
    let mut hook = ListeningHook::default();
    let sgd = Some((0.01, 0.9));
    for _ in 0..2 {
        plain.step(sgd).expect("a plain step");
        let ms = hooked
            .step_hooked(sgd, Some(&mut hook))
            .expect("a hooked step");
        assert!(ms.exchange >= 0.0 && ms.exchange.is_finite());
    }
    let n = g.nodes.len();
    let once: Vec<usize> = (1..n).rev().collect();
    assert_eq!(hook.nodes, [once.clone(), once].concat(), "{}", t.name());
    assert_eq!(hook.finished, 2);
    let mut pairs = Vec::new();
    for i in 1..n {
        let want = plain.layer_grads(i).expect("gradients");
        for ((tensor, got), (_, want)) in hooked
            .layer_grads(i)
            .expect("gradients")
            .into_iter()
            .zip(want)
        {
            pairs.push(Pair { tensor, got, want });
        }
    }
    assert!(!pairs.is_empty());
    assert_close(&t.name(), &pairs, t.tolerance());
}

on_every_backend!(a_hooked_step_hears_every_node_and_changes_nothing);

/// On the CUDA-graph path: training steps with the SGD update replayed
/// from one captured graph train as eager steps do (each step's loss, and
/// the last step's gradients, which read the weights every earlier update
/// wrote, and the masks of a new seed each step); elsewhere nothing runs.
fn graph_steps_train_as_eager_steps<T: OnBackend>(t: &T) {
    let g = every_op_net();
    let (mut eager, mut graphed) = (t.twin_net(&g, 2), t.twin_net(&g, 2));
    let sgd = Some((0.01, 0.9));
    let Some(replayed) = t.graph_steps(&mut graphed, 3, sgd) else {
        return;
    };
    let mut losses = Vec::new();
    for _ in 0..3 {
        eager.step(sgd).expect("an eager step");
        losses.push(eager.loss().expect("loss"));
    }
    let mut pairs = vec![Pair {
        tensor: "losses".into(),
        got: replayed,
        want: losses,
    }];
    for i in 1..g.nodes.len() {
        let want = eager.layer_grads(i).expect("gradients");
        for ((tensor, got), (_, want)) in graphed
            .layer_grads(i)
            .expect("gradients")
            .into_iter()
            .zip(want)
        {
            pairs.push(Pair { tensor, got, want });
        }
    }
    assert_close(&t.name(), &pairs, t.tolerance());
}

on_every_backend!(graph_steps_train_as_eager_steps);

/// A batch set from outside (a real-data step's images and labels) is
/// what the network computes on, on every backend as in the reference;
/// labels change the loss; a staged batch leaves the step's input alone
/// until it is taken; a batch of the wrong size or a label past the
/// classes is refused.
fn a_set_batch_is_what_the_step_computes_on<T: OnBackend>(t: &T) {
    let g = every_op_net();
    let batch = 2;
    let images: Vec<f32> = (0..batch * g.nodes[0].out.len())
        .map(|k| ((k * 7919) % 251) as f32 / 125.0 - 1.0)
        .collect();
    let classes = g.classes() as u32;
    let labels = [classes - 1, 0];
    let mut want = CpuNet::new(
        &g,
        batch,
        CpuOptions {
            isa: Isa::detect(),
            reference: true,
            seed: SEED,
            fuse_relu: false,
        },
    )
    .expect("the reference network");
    want.set_batch(&images, &labels).expect("reference batch");
    want.forward().expect("reference forward");
    let mut net = t.net(&g, batch);
    net.set_batch(&images, &labels).expect("a batch");
    net.forward().expect("forward");
    let (got, expect) = (net.loss().expect("loss"), want.loss().expect("loss"));
    assert!(
        ((got - expect) / expect).abs() < 1e-2,
        "{}: loss {got} against the reference's {expect}",
        t.name()
    );
    net.set_batch(&images, &[0, classes - 1])
        .expect("other labels");
    net.forward().expect("forward");
    let other = net.loss().expect("loss");
    assert_ne!(other, got, "{}: labels ignored", t.name());
    // A staged batch waits (its copy overlapping the step) until taken.
    let next: Vec<f32> = images.iter().map(|v| 0.5 - v).collect();
    net.stage_batch(&next, &labels).expect("staged");
    net.forward().expect("forward");
    assert_eq!(
        net.loss().expect("loss"),
        other,
        "{}: staging changed the step's input",
        t.name()
    );
    net.take_batch().expect("taken");
    net.forward().expect("forward");
    assert_ne!(net.loss().expect("loss"), other, "{}: not taken", t.name());
    assert!(net.take_batch().is_err(), "taken twice");
    assert!(net.set_batch(&images[1..], &labels).is_err());
    assert!(net.set_batch(&images, &labels[..1]).is_err());
    let past = net.set_batch(&images, &[classes, 0]).unwrap_err();
    assert!(past.to_string().contains("not below"), "{past}");
}

on_every_backend!(a_set_batch_is_what_the_step_computes_on);

/// On a GPU with NCCL: a data-parallel step over a world of one (the
/// gradients all-reduced in their buckets on the communication stream)
/// trains exactly as a plain step does.
#[test]
fn a_world_of_one_trains_as_one_gpu() {
    use super::data_parallel::GradExchange;
    use crate::backend::cuda::nccl::{self, Comm};
    if let Some(why) = nccl::missing() {
        no_gpu_for_test(&why);
        return;
    }
    on_every_gpu_config(|b| {
        let g = every_op_net();
        let (mut plain, mut dp) = (b.twin_net(&g, 2), b.twin_net(&g, 2));
        let comm = Comm::init_all(&[0])
            .expect("a communicator")
            .pop()
            .expect("one");
        let mut exchange = GradExchange::new(&dp, comm).expect("the exchange");
        assert!(exchange.buckets() >= 1);
        let sgd = Some((0.01, 0.9));
        for _ in 0..2 {
            plain.step(sgd).expect("a plain step");
            let ms = dp
                .step_hooked(sgd, Some(&mut exchange))
                .expect("a data-parallel step");
            assert!(ms.exchange >= 0.0);
        }
        let mut pairs = Vec::new();
        for i in 1..g.nodes.len() {
            let want = plain.layer_grads(i).expect("gradients");
            for ((tensor, got), (_, want)) in
                dp.layer_grads(i).expect("gradients").into_iter().zip(want)
            {
                pairs.push(Pair { tensor, got, want });
            }
        }
        assert_close(&b.name(), &pairs, b.tolerance());
    });
}

/// On a GPU with NCCL: all-reduces over every GPU here (one rank each; one
/// on the machines lent so far) at every size class, in f32, f16 and bf16,
/// in and out of place, as the mean, the sum and the largest, with every
/// element read back and an out-of-place output set to NaN first. 4097
/// f32, 8193 f16/bf16, 2^24 + 1 and 2^24 + 3 are sizes whose last elements
/// NCCL 2.19 to 2.29.3 left unwritten in a one-rank mean out of place
/// (`cnnbench allreduce` found 2^24 + 1 on an H200 with NCCL 2.28.9; see
/// `nccl::raw_op`).
#[test]
fn all_reduces_are_exact_at_every_size_class() {
    use crate::backend::cuda::nccl::{self, Comm, Elem, Reduce};
    use crate::backend::cuda::DeviceBuffer;
    if let Some(why) = nccl::missing() {
        no_gpu_for_test(&why);
        return;
    }
    let ranks = match Gpu::count() {
        Ok(0) => {
            no_gpu_for_test("no device");
            return;
        }
        Ok(n) => n.min(8),
        Err(why) => {
            no_gpu_for_test(&why);
            return;
        }
    };
    let gpus: Vec<Gpu> = (0..ranks)
        .map(|d| Gpu::open_ordinal(d).expect("a GPU"))
        .collect();
    let ordinals: Vec<i32> = (0..ranks as i32).collect();
    let comms = Comm::init_all(&ordinals).expect("communicators");
    let mut sizes: Vec<usize> = (1..=33).collect();
    sizes.extend([4095, 4096, 4097, 8191, 8192, 8193, 131_073, 3_097_600]);
    sizes.extend([(1 << 24) - 1, 1 << 24, (1 << 24) + 1, (1 << 24) + 3]);
    let n = ranks as f32;
    let types = [
        (DType::F32, Elem::F32),
        (DType::F16, Elem::F16),
        (DType::Bf16, Elem::Bf16),
    ];
    for (dtype, elem) in types {
        for &count in &sizes {
            // Rank r sends r + 1.
            let sent: Vec<Vec<u8>> = (0..ranks)
                .map(|r| dtype.encode(&vec![(r + 1) as f32; count]))
                .collect();
            for op in [Reduce::Avg, Reduce::Sum, Reduce::Max] {
                let want = match op {
                    Reduce::Avg => (n + 1.0) / 2.0,
                    Reduce::Sum => n * (n + 1.0) / 2.0,
                    Reduce::Max => n,
                };
                let tol = want * if dtype == DType::F32 { 1e-6 } else { 1e-2 };
                for in_place in [true, false] {
                    let case = format!("{count} {dtype} {op:?} in place {in_place}, n {ranks}");
                    let mut bufs = Vec::new();
                    for (g, bytes) in gpus.iter().zip(&sent) {
                        let send = DeviceBuffer::from_bytes(&g.stream, bytes).expect("upload");
                        let recv = (!in_place).then(|| {
                            let mut b = DeviceBuffer::alloc(&g.stream, bytes.len()).expect("alloc");
                            b.fill_bytes(0xFF).expect("NaN");
                            b
                        });
                        bufs.push((send, recv));
                    }
                    nccl::group_start().expect("group start");
                    for ((c, g), (send, recv)) in comms.iter().zip(&gpus).zip(&bufs) {
                        let dst = recv.as_ref().unwrap_or(send).as_void();
                        // SAFETY: both buffers hold `count` elements and
                        // are read back (which waits) before they drop.
                        unsafe { c.all_reduce(send.as_void(), dst, count, elem, op, &g.stream) }
                            .expect("ncclAllReduce");
                    }
                    nccl::group_end().expect("group end");
                    // Elements equal to the result's bytes pass at once;
                    // others are decoded and held to the tolerance.
                    let exact = dtype.encode(&[want]);
                    for (rank, (send, recv)) in bufs.iter().enumerate() {
                        let got = recv.as_ref().unwrap_or(send).download().expect("download");
                        assert_eq!(got.len(), count * exact.len(), "{case}");
                        let wrong = got.chunks_exact(exact.len()).position(|e| {
                            e != exact && {
                                let v = dtype.decode(e)[0];
                                v.is_nan() || (v - want).abs() > tol
                            }
                        });
                        if let Some(i) = wrong {
                            let v = dtype.decode(&got[i * exact.len()..][..exact.len()])[0];
                            panic!("{case}: rank {rank}'s element {i} is {v}, not {want}");
                        }
                    }
                }
            }
        }
    }
}
