//! Property tests of the results readers: the store's run files
//! (`store::load`, `store::load_runs`, `store::document_of`) and peers' CSV files
//! (`report::merge::read_peer_csv`). Whatever is on disk, each returns Ok
//! or an error that says something; none panics.
//!
//! Random bytes seldom get past the JSON or CSV syntax, so most cases
//! start from a real file, as cnnbench writes it, and damage it: cut
//! short (a killed writer), bytes flipped or inserted, numbers swapped
//! for huge, negative, non-finite or mistyped ones.

use super::environment::BuildInfo;
use super::price::Price;
use super::record::CSV_HEADER;
use super::roofline::{Bound, LayerRoofline, PassRoofline, RooflineBasis};
use super::store::{self, RunFile, FORMAT_VERSION};
use super::{
    Check, DataParallel, Device, Dir, Environment, FolderInput, Input, InputSource, LayerTime,
    MemoryBytes, ModelRecord, Record, Skipped,
};
use crate::bench::Stats;
use crate::proptest_support::{check_error, config};
use crate::report::merge::read_peer_csv;
use cnnbench_layers::cuda::{DeviceInfo, Peak};
use cnnbench_layers::DType;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::TestCaseError;
use std::io::Write;
use std::ops::Range;
use std::path::Path;

/// Statistics in binary fractions of the median: serde_json's default
/// float parser may read a decimal back one ULP off, and
/// `undamaged_files_load` compares exactly.
fn stats(median: f64) -> Stats {
    Stats {
        min: median * 0.75,
        median,
        max: median * 1.5,
        mean: median * 1.125,
        stddev: median / 16.0,
    }
}

/// An environment with every optional part present (GPU, label, price),
/// and a non-ASCII CPU name, so that a cut can split a character.
fn environment() -> Environment {
    Environment {
        host: "vm-1".into(),
        os: "linux x86_64".into(),
        cpu: "Xeon® Platinum 8480+".into(),
        cores: 2,
        threads: 2,
        isa: "avx512".into(),
        isa_detected: "avx512".into(),
        peak_gflops: Some(344.3),
        timer: "cuda events".into(),
        gpu: Some(DeviceInfo {
            name: "NVIDIA H100 80GB HBM3".into(),
            compute_capability: "9.0".into(),
            sms: 132,
            memory_bytes: 85_029_158_912,
            clock_mhz: 1980,
            memory_clock_mhz: 2619,
            memory_bus_bits: 5120,
            l2_bytes: 52_428_800,
            driver_cuda: "13.0".into(),
            cudnn_cudart: "13.0".into(),
            cudnn: "9.10.2".into(),
            cublas: "13.0.0".into(),
            peaks: vec![Peak {
                dtype: "f16".into(),
                tflops: 989.4,
                source: "device properties".into(),
            }],
            libraries: vec![cnnbench_layers::cuda::loader::LibraryInfo {
                name: "cuDNN".into(),
                soname: "libcudnn.so.9".into(),
                file: Some("/usr/lib/x86_64-linux-gnu/libcudnn.so.9".into()),
                version: Some("9.10.2".into()),
                error: None,
            }],
        }),
        cnnbench: BuildInfo {
            version: "0.1.0".into(),
            git: "b88e3c12c1cf".into(),
            profile: "release".into(),
            target_features: "+avx2,+fma".into(),
        },
        command: "cnnbench conv --from builtin:resnet50".into(),
        timestamp: "2026-11-20T10:00:00Z".into(),
        label: Some("tuned".into()),
        price: Some(Price {
            usd_per_hour: 3.06,
            instance: Some("p5.48xlarge".into()),
            source: "list price".into(),
            date: "2026-11".into(),
        }),
    }
}

/// A `conv` run file with a record (every optional field set) and a
/// skipped algorithm.
fn layer_run() -> RunFile {
    RunFile {
        format_version: FORMAT_VERSION,
        subcommand: "conv".into(),
        environment: environment(),
        records: vec![Record {
            problem: "mb16ic64ih56oc64oh56kh3ph1n\"résumé\"".into(),
            dir: Dir::BwdFilter,
            device: Device::Gpu,
            dtype: DType::F16,
            layout: "nhwc".into(),
            algo: "implicit_gemm".into(),
            ms: stats(0.25),
            runs: 20,
            gflops: 4100.5,
            peak_fraction: Some(0.41),
            check: Some(Check {
                rel_err: 1.5e-4,
                passed: true,
            }),
            kernel: "sm90_xmma".into(),
            bias: true,
            workspace_bytes: 1 << 20,
            cudnn_find_ms: Some(0.24),
        }],
        skipped: vec![Skipped {
            problem: "mb16ic64ih56oc64oh56kh3ph1".into(),
            dir: Dir::Fwd,
            device: Device::Gpu,
            dtype: DType::F16,
            layout: "nhwc".into(),
            algo: "fft".into(),
            status: "over workspace limit".into(),
            workspace_bytes: Some(1 << 33),
        }],
        complete: false,
    }
}

/// A `model` run file with every optional field set.
fn model_run() -> RunFile<ModelRecord> {
    RunFile {
        format_version: FORMAT_VERSION,
        subcommand: "model".into(),
        environment: environment(),
        records: vec![ModelRecord {
            model: "resnet50".into(),
            batch: 16,
            device: Device::Cpu,
            dtype: DType::Bf16,
            layout: "nchw".into(),
            params: 25_557_032,
            macs: 4_089_184_256,
            status: "ok".into(),
            forward_ms: Some(stats(120.0)),
            backward_ms: Some(stats(240.0)),
            update_ms: Some(stats(3.0)),
            total_ms: Some(stats(363.0)),
            images_per_sec: Some(44.1),
            gflops: Some(540.7),
            runs: 10,
            loss: Some(6.9),
            memory: Some(MemoryBytes {
                params: 306_684_384,
                activations: 2_000_000_000,
                workspace: 12_345,
                total: 2_306_696_729,
            }),
            fused: Some("relu".into()),
            gpu_paths: Some("own-kernels+cuda-graph".into()),
            eager_total_ms: Some(stats(450.0)),
            layers: vec![LayerTime {
                name: "conv1".into(),
                kind: "conv".into(),
                output: "64x112x112".into(),
                forward_ms: 9.5,
                backward_ms: 19.0,
                percent: 7.85,
                kernels: "fwd direct, bwd-data gemm".into(),
                roofline: Some(LayerRoofline {
                    forward: PassRoofline {
                        bytes: 1_234_567_890,
                        flops: 11_800_000_000,
                        gbs: Some(129.9),
                        gflops: Some(1242.1),
                        bound: Some(Bound::Compute),
                        percent: Some(44.2),
                    },
                    backward: PassRoofline::timed(7, 0, 0.0),
                }),
            }],
            roofline: Some(RooflineBasis {
                bandwidth_gbs: 4100.5,
                bandwidth_from: "device-to-device copy".into(),
                bandwidth_nominal_gbs: Some(4814.0),
                peak_gflops: 989_000.0,
                peak_from: "datasheet".into(),
                peak_label: "f16".into(),
                element_bytes: 2,
            }),
            data_parallel: Some(DataParallel {
                gpus: 8,
                launcher: "torchrun".into(),
                nccl: "2.32.3".into(),
                buckets: 5,
                gradient_bytes: 102_228_128,
                exposed_comm_ms: stats(1.5),
                rank_step_ms: vec![363.0; 8],
                images_per_sec_per_gpu: 44.1,
                single_gpu_step_ms: 360.0,
                speedup: 7.93,
                efficiency: 0.991,
            }),
            projection: None,
            input: Input {
                source: InputSource::Folder,
                folder: Some(FolderInput {
                    path: "/data/imagenet/train".into(),
                    images: 1_281_167,
                    classes: 1000,
                    skipped: 2,
                    transform: "train".into(),
                    decoder: "zune-jpeg 0.5".into(),
                    loader_threads: 8,
                    prefetch: 2,
                    loader_images_per_sec: 1234.5,
                    wait_ms: stats(0.5),
                    input_bound: false,
                }),
            },
        }],
        skipped: Vec::new(),
        complete: true,
    }
}

/// A file's text as `Store::save` writes it.
fn saved<R: serde::Serialize>(file: &RunFile<R>) -> String {
    serde_json::to_string_pretty(file).expect("serialise") + "\n"
}

/// A peer CSV in every column cnnbench knows, as `scripts/peers/*` print,
/// the second row with a quoted problem holding quotes and a comma.
fn peer_csv_text() -> String {
    format!(
        "{}\n{}\n{}\n",
        CSV_HEADER.join(","),
        "mb2ic8ih9oc16oh7kh3,fwd,cuda,f32,nhwc,pytorch-2.15.0,1,1.5,2,1.5,0.1,10,3.2,0.5,1e-6,true,\
         aten:cudnn,true,4096,0.75",
        "\"mb2ic8ih9oc16oh7kh3n\"\"a,b\"\"\",bwd-data,cpu,bf16,nchw,pytorch-2.15.0,\
         1,1.5,2,1.5,0.1,10,3.2,,,,aten:mkldnn,false,,",
    )
}

/// JSON values and junk to put where a number (or true/false/null) was:
/// past every integer width, negative, non-finite (as JSON cannot say
/// it), mistyped, malformed.
const AWKWARD: [&str; 36] = [
    "0",
    "-0",
    "-1",
    "0.5",
    "-0.5",
    "2",
    "99",
    "1e308",
    "-1e308",
    "1e999",
    "-1e999",
    "1e-999",
    "4294967295",
    "4294967296",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775809",
    "123456789012345678901234567890",
    "NaN",
    "nan",
    "\"NaN\"",
    "Infinity",
    "-Infinity",
    "\"inf\"",
    "null",
    "true",
    "\"\"",
    "\"1\"",
    "[]",
    "{}",
    "0x10",
    "01",
    "1.",
    ".5",
    "1e",
];

/// One way a file gets damaged.
#[derive(Clone, Debug)]
enum Damage {
    /// Cut short at a point, as by a writer killed mid-write.
    Truncate(Index),
    /// Bytes XORed with a non-zero mask.
    Flip(Vec<(Index, u8)>),
    /// Bytes inserted at a point.
    Insert(Index, Vec<u8>),
    /// Scalars (numbers, true, false, null) replaced with [`AWKWARD`]
    /// values.
    Scalars(Vec<(Index, Index)>),
}

/// Damage of each kind, scalar swaps the most (they reach the typed
/// fields behind the syntax).
fn damage() -> impl Strategy<Value = Damage> {
    // Mostly ASCII in, ASCII out: a high bit ends every case at "not
    // UTF-8", which says nothing about the parsers behind it.
    let mask = prop_oneof![3 => 1u8..=0x7f, 1 => 0x80u8..=0xff];
    let byte = prop_oneof![3 => 0x20u8..=0x7e, 1 => any::<u8>()];
    prop_oneof![
        1 => any::<Index>().prop_map(Damage::Truncate),
        1 => prop::collection::vec((any::<Index>(), mask), 1..4).prop_map(Damage::Flip),
        1 => (any::<Index>(), prop::collection::vec(byte, 1..8))
            .prop_map(|(at, b)| Damage::Insert(at, b)),
        3 => prop::collection::vec((any::<Index>(), any::<Index>()), 1..4)
            .prop_map(Damage::Scalars),
    ]
}

/// The byte ranges of the scalars outside strings: numbers and bare words.
fn scalars(text: &[u8]) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let (mut i, mut in_string, mut escaped) = (0, false, false);
    while i < text.len() {
        let b = text[i];
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else if b == b'"' {
            in_string = true;
        } else if b == b'-' || b.is_ascii_alphanumeric() {
            let start = i;
            while i < text.len() && (text[i].is_ascii_alphanumeric() || b"+-.".contains(&text[i])) {
                i += 1;
            }
            out.push(start..i);
            continue;
        }
        i += 1;
    }
    out
}

/// `bytes` after `damage`, each in turn.
fn damaged(mut bytes: Vec<u8>, damage: &[Damage]) -> Vec<u8> {
    for d in damage {
        let len = bytes.len();
        match d {
            Damage::Truncate(at) => bytes.truncate(at.index(len + 1)),
            Damage::Flip(flips) if len > 0 => {
                for (at, mask) in flips {
                    bytes[at.index(len)] ^= mask;
                }
            }
            Damage::Flip(_) => {}
            Damage::Insert(at, b) => {
                let at = at.index(len + 1);
                bytes.splice(at..at, b.iter().copied());
            }
            Damage::Scalars(swaps) => {
                let spans = scalars(&bytes);
                if spans.is_empty() {
                    continue;
                }
                let mut picks: Vec<(Range<usize>, &str)> = swaps
                    .iter()
                    .map(|(which, what)| {
                        (
                            spans[which.index(spans.len())].clone(),
                            AWKWARD[what.index(AWKWARD.len())],
                        )
                    })
                    .collect();
                // Back to front, so earlier ranges stay valid; one swap per scalar.
                picks.sort_by_key(|(r, _)| std::cmp::Reverse(r.start));
                picks.dedup_by_key(|(r, _)| r.start);
                for (r, v) in picks {
                    bytes.splice(r, v.bytes());
                }
            }
        }
    }
    bytes
}

/// `bytes` in a temporary file, for readers that take a path.
fn on_disk(bytes: &[u8], suffix: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::Builder::new()
        .suffix(suffix)
        .tempfile()
        .expect("temp file");
    f.write_all(bytes).expect("write temp file");
    f
}

/// Both loaders, for both record types, on the file at `path`: no panic,
/// errors say something, and nothing newer than this version loads.
fn check_run_file(path: &Path) -> Result<(), TestCaseError> {
    match store::load::<Record>(path) {
        Ok(f) => prop_assert!(f.format_version <= FORMAT_VERSION),
        Err(e) => check_error(&e)?,
    }
    match store::load::<ModelRecord>(path) {
        Ok(f) => prop_assert!(f.format_version <= FORMAT_VERSION),
        Err(e) => check_error(&e)?,
    }
    if let Err(e) = store::document_of(path) {
        check_error(&e)?;
    }
    if let Err(e) = store::load_runs::<Record>(path) {
        check_error(&e)?;
    }
    Ok(())
}

/// The peer CSV reader on the file at `path`.
fn check_peer_csv(path: &Path) -> Result<(), TestCaseError> {
    if let Err(e) = read_peer_csv(path) {
        check_error(&e)?;
    }
    Ok(())
}

/// Any bytes: random, JSON's alphabet, or CSV's.
fn arbitrary_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..256),
        "[\\[\\]{}\":,0-9a-z .eE+\\-\n]{0,80}".prop_map(String::into_bytes),
        "[a-z_0-9,\"\r\n.\\-]{0,80}".prop_map(String::into_bytes),
    ]
}

/// One CSV cell: a plausible value for its column, or something awkward.
fn csv_cell(column: &'static str) -> impl Strategy<Value = String> {
    let plausible = match column {
        "dir" => vec!["fwd", "bwd-data", "bwd-filter", "gemm"],
        "device" => vec!["cpu", "gpu", "cuda"],
        "dtype" => vec!["f32", "fp16", "bf16", "tf32"],
        "check_passed" | "bias" => vec!["true", "false"],
        "problem" | "layout" | "algo" | "kernel" => vec!["mb2ic8ih9oc16oh7kh3", "nhwc", "x"],
        _ => vec!["1", "1.5", "0", "10", "3.2e2"],
    };
    prop_oneof![
        24 => prop::sample::select(plausible).prop_map(String::from),
        1 => prop::sample::select(vec![
            "", "NaN", "nan", "inf", "-inf", "-1", "-0", "1e999", "-1e999",
            "18446744073709551616", "1e20", "\"a,b\"", "\"unterminated", "\"\"", "tpu",
            "FWD", "\u{feff}fwd", "é", "\0",
        ])
        .prop_map(String::from),
        1 => "[^,\"\r\n]{0,6}",
    ]
}

/// Peer CSVs: cnnbench's columns (each likely, in any order, the needed
/// ones almost always), sometimes an unknown one, then rows of cells,
/// now and then one short or long; LF or CRLF, sometimes after a BOM.
fn peer_csv() -> impl Strategy<Value = String> {
    const NEEDED: [&str; 3] = ["problem", "dir", "ms_median"];
    let dice = prop::collection::vec(0u8..100, CSV_HEADER.len());
    let columns = (dice, prop::bool::weighted(0.2)).prop_flat_map(|(dice, unknown)| {
        let mut cols: Vec<&'static str> = CSV_HEADER
            .iter()
            .zip(dice)
            .filter(|(c, d)| *d < if NEEDED.contains(c) { 97 } else { 80 })
            .map(|(c, _)| *c)
            .collect();
        if unknown {
            cols.push("unknown");
        }
        Just(cols).prop_shuffle()
    });
    columns.prop_flat_map(|cols| {
        let row = cols.iter().map(|c| csv_cell(c).boxed()).collect::<Vec<_>>();
        // Now and then a row one cell short (-1) or long (1).
        let ragged = prop_oneof![20 => Just(0i8), 1 => Just(-1i8), 1 => Just(1i8)];
        let rows = prop::collection::vec((row, ragged), 0..5);
        (
            Just(cols),
            rows,
            prop::sample::select(vec!["\n", "\r\n"]),
            prop::option::weighted(0.1, Just("\u{feff}")),
        )
            .prop_map(|(cols, rows, eol, bom)| {
                let mut text = format!("{}{}{eol}", bom.unwrap_or(""), cols.join(","));
                for (mut cells, ragged) in rows {
                    match ragged {
                        -1 => {
                            cells.pop();
                        }
                        1 => cells.push("extra".into()),
                        _ => {}
                    }
                    text += &cells.join(",");
                    text += eol;
                }
                text
            })
    })
}

proptest! {
    #![proptest_config(config(1000))]

    /// Any bytes as a run file.
    #[test]
    fn run_file_arbitrary_bytes(bytes in arbitrary_bytes()) {
        let f = on_disk(&bytes, ".json");
        check_run_file(f.path())?;
    }

    /// A real `conv` run file, damaged.
    #[test]
    fn run_file_damaged_layer_run(damage in prop::collection::vec(damage(), 1..4)) {
        let f = on_disk(&damaged(saved(&layer_run()).into_bytes(), &damage), ".json");
        check_run_file(f.path())?;
    }

    /// A real `model` run file, damaged.
    #[test]
    fn run_file_damaged_model_run(damage in prop::collection::vec(damage(), 1..4)) {
        let f = on_disk(&damaged(saved(&model_run()).into_bytes(), &damage), ".json");
        check_run_file(f.path())?;
    }

    /// Any bytes as a peer CSV.
    #[test]
    fn peer_csv_arbitrary_bytes(bytes in arbitrary_bytes()) {
        let f = on_disk(&bytes, ".csv");
        check_peer_csv(f.path())?;
    }

    /// Peer CSVs from cnnbench's columns with plausible and awkward cells.
    #[test]
    fn peer_csv_structured(text in peer_csv()) {
        let f = on_disk(text.as_bytes(), ".csv");
        check_peer_csv(f.path())?;
    }

    /// A real peer CSV, damaged.
    #[test]
    fn peer_csv_damaged(damage in prop::collection::vec(damage(), 1..4)) {
        let f = on_disk(&damaged(peer_csv_text().into_bytes(), &damage), ".csv");
        check_peer_csv(f.path())?;
    }
}

/// The undamaged files the damage starts from load back as written, so
/// the cases above begin from valid input.
#[test]
fn undamaged_files_load() {
    let f = on_disk(saved(&layer_run()).as_bytes(), ".json");
    assert_eq!(store::load::<Record>(f.path()).unwrap(), layer_run());
    assert_eq!(
        store::document_of(f.path()).unwrap(),
        store::Document::Run { model: false }
    );
    let f = on_disk(saved(&model_run()).as_bytes(), ".json");
    assert_eq!(store::load::<ModelRecord>(f.path()).unwrap(), model_run());
    let f = on_disk(peer_csv_text().as_bytes(), ".csv");
    let (run, peer) = read_peer_csv(f.path()).unwrap();
    assert_eq!((run.records.len(), peer.as_str()), (2, "pytorch-2.15.0"));
    assert_eq!(run.records[1].problem, "mb2ic8ih9oc16oh7kh3n\"a,b\"");
    let find: Vec<_> = run.records.iter().map(|r| r.cudnn_find_ms).collect();
    assert_eq!(find, [Some(0.75), None]);
}

/// Links a user may give that project finitely (`GBps:us`).
fn links() -> impl Strategy<Value = String> {
    (1e-3f64..1e6, 1e-3f64..1e6).prop_map(|(bw, us)| format!("{bw}:{us}"))
}

proptest! {
    #![proptest_config(config(48))]

    /// Every record cnnbench writes, `report` reads (issue 31: a projection
    /// over `1e-308:1e308` was written with `null` and `inf`, and `report`
    /// refused cnnbench's own file). The model record carries a projection
    /// made by the projection's own code over links the CLI accepts (it
    /// refuses, up front, those that would not project finitely).
    #[test]
    fn every_record_written_is_read_by_report(
        links in links(),
        gpus in prop::sample::select(vec![2usize, 8, 64, 1024]),
        (f, b, u) in (1e-3f64..1e4, 1e-3f64..1e4, 0.0f64..1e2),
        median in 1e-4f64..1e4,
    ) {
        use crate::dist::{interconnect, project};
        let topology = project::Topology {
            gpus,
            gpus_per_node: 8,
            links: interconnect::parse_pair(&links).expect("links"),
        };
        let mut model = model_run();
        if project::finite_links(&topology).is_ok() {
            let measured = project::Measured {
                batch: 16,
                forward_ms: f,
                backward_ms: b,
                update_ms: u,
                node_backward_ms: vec![0.0, b / 2.0, b / 2.0],
                grads: (1..3)
                    .map(|node| cnnbench_layers::net::buckets::GradParam {
                        node,
                        index: 0,
                        bytes: 4 << 20,
                    })
                    .collect(),
            };
            let row = project::project(&measured, &topology).expect("a finite projection");
            model.records[0].projection = Some(super::ProjectionSet {
                assumptions: project::assumptions(&topology.links, 8),
                interconnect: topology.links.clone(),
                gpus_per_node: 8,
                rows: vec![row],
            });
        }
        let mut layer = layer_run();
        layer.records[0].ms = stats(median);
        let mut gemm = layer_run();
        gemm.subcommand = "gemm".into();
        gemm.records[0].problem = "m64n64k64".into();
        gemm.records[0].dir = Dir::Gemm;
        let dir = tempfile::tempdir().expect("tmp");
        for (name, text) in [
            ("model.json", saved(&model)),
            ("conv.json", saved(&layer)),
            ("gemm.json", saved(&gemm)),
        ] {
            std::fs::write(dir.path().join(name), text).expect("write");
        }
        let inputs = crate::report::merge::split(&[dir.path().to_path_buf()]).expect("split");
        let mut unreadable = inputs.unreadable;
        let runs = crate::report::merge::load_files(inputs.layers, &mut unreadable);
        let models = crate::report::models::load_files(inputs.models, &mut unreadable);
        prop_assert!(unreadable.is_empty(), "{unreadable:?}");
        prop_assert_eq!(runs.len(), 2);
        prop_assert_eq!(&models[0].records, &model.records);
        let opts = crate::report::options::Options {
            baseline: None,
            charts: None,
            price: None,
            epochs: 1,
            dataset_images: 1,
            published: false,
        };
        crate::report::markdown::render(&runs, &models, &unreadable, &opts).expect("a report");
    }
}
