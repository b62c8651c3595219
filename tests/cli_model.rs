//! `cnnbench model` and `cnnbench check` as users and other tools see them:
//! the layer tables, the JSON contract of model runs, the numerics check,
//! and one-line errors.

use serde_json::Value;
use std::collections::BTreeSet;
use std::process::{Command, Output};

fn cnnbench(args: &[&str]) -> Output {
    let store = std::env::temp_dir().join(format!("cnnbench-model-tests-{}", std::process::id()));
    Command::new(env!("CARGO_BIN_EXE_cnnbench"))
        .env("CNNBENCH_RESULTS", store)
        .args(args)
        .output()
        .expect("running cnnbench")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The reference implementations' parameter counts (torchvision, BVLC
/// Caffe, fb.resnet.torch, Keras's `model.summary()` for its examples).
const PARAMS: [(&str, u64); 17] = [
    ("alexnet", 60_965_224),
    ("googlenet", 6_624_904),
    ("inception-v3", 23_834_568),
    ("vgg16", 138_357_544),
    ("vgg19", 143_667_240),
    ("resnet18", 11_689_512),
    ("resnet34", 21_797_672),
    ("resnet50", 25_557_032),
    ("resnet101", 44_549_160),
    ("resnet152", 60_192_808),
    ("resnet200", 64_672_808),
    ("mnist-mlp", 669_706),
    ("mnist-cnn", 1_199_882),
    ("cifar10-cnn", 1_250_858),
    ("imdb-fasttext", 1_000_051),
    ("imdb-bilstm", 2_658_945),
    ("lstm-text", 102_585),
];

#[test]
fn describe_counts_every_models_parameters_exactly() {
    let o = cnnbench(&["model", "all", "--describe", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let models = doc.as_array().unwrap();
    assert_eq!(models.len(), PARAMS.len());
    for (m, (name, params)) in models.iter().zip(PARAMS) {
        assert_eq!(m["model"], name);
        assert_eq!(m["params"].as_u64(), Some(params), "{name}");
        let layers = m["layers"].as_array().unwrap();
        let sum: u64 = layers.iter().map(|l| l["params"].as_u64().unwrap()).sum();
        assert_eq!(sum, params, "{name}: layer params add up");
        for l in layers {
            for key in ["name", "kind", "output", "params", "macs"] {
                assert!(!l[key].is_null(), "{name}: {key}");
            }
            assert_eq!(l["desc"].is_string(), l["kind"] == "conv", "{name}: desc");
        }
    }
}

#[test]
fn benchdnn_descriptors_reproduce_resnet50s_convolutions() {
    let o = cnnbench(&["model", "resnet50", "--describe", "--format", "benchdnn"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(lines.len(), 53, "ResNet-50 has 53 convolutions");
    assert!(lines[0].ends_with("n\"resnet50:conv1\""), "{}", lines[0]);
    // The distinct shapes are the 23 of the builtin list (batch 16).
    let shape = |l: &str| l.split("n\"").next().unwrap().to_string();
    let ours: BTreeSet<String> = lines.iter().map(|l| shape(l)).collect();
    let builtin = include_str!("../src/problem/lists/resnet50.txt");
    let want: BTreeSet<String> = builtin
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(shape)
        .collect();
    assert_eq!(ours, want);
    // And they run: the file feeds `conv --from`.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("alexnet.txt");
    let o = cnnbench(&[
        "model",
        "alexnet",
        "--describe",
        "--format",
        "benchdnn",
        "--batch",
        "1",
    ]);
    std::fs::write(&f, stdout(&o)).unwrap();
    let o = cnnbench(&[
        "conv",
        "--from",
        f.to_str().unwrap(),
        "--dir",
        "fwd",
        "--iters",
        "1",
        "--warmup",
        "0",
        "--format",
        "csv",
        "--no-save",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o).lines().count(),
        1 + 5,
        "header and AlexNet's 5 convolutions"
    );
}

#[test]
fn a_model_run_honours_the_json_contract_and_is_stored() {
    let store = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_cnnbench"))
        .env("CNNBENCH_RESULTS", store.path())
        .args([
            "model",
            "resnet18",
            "--batch",
            "1",
            "--iters",
            "2",
            "--warmup",
            "0",
            "--per-layer",
            "--update",
            "sgd",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let r = &doc["records"][0];
    assert_eq!(r["model"], "resnet18");
    assert_eq!(r["batch"], 1);
    assert_eq!(
        (
            r["device"].as_str(),
            r["dtype"].as_str(),
            r["layout"].as_str()
        ),
        (Some("cpu"), Some("f32"), Some("nhwc"))
    );
    assert_eq!(r["params"], 11_689_512);
    for key in ["forward_ms", "backward_ms", "update_ms", "total_ms"] {
        for stat in ["min", "median", "max", "mean", "stddev"] {
            assert!(r[key][stat].as_f64().is_some(), "{key}.{stat}");
        }
    }
    assert_eq!(r["runs"], 2);
    assert!(r["images_per_sec"].as_f64().unwrap() > 0.0);
    assert!(r["loss"].as_f64().unwrap().is_finite());
    let mem = &r["memory"];
    assert!(mem["params"].as_u64().unwrap() >= 3 * 4 * 11_689_512);
    assert!(mem["activations"].as_u64().unwrap() > 0);
    let layers = r["layers"].as_array().unwrap();
    assert_eq!(layers[0]["name"], "conv1");
    assert_eq!(layers[0]["output"], "64x112x112");
    // The stem's ReLU runs inside its batch norm, and each block's add
    // with its ReLU inside the batch norm before it, and says so.
    assert_eq!(r["fused"], "relu,add+relu");
    assert_eq!(layers[2]["name"], "relu");
    assert_eq!(layers[2]["kernels"], "fused into bn1");
    assert!(layers[2]["forward_ms"].as_f64().unwrap() < 0.01);
    let share: f64 = layers.iter().map(|l| l["percent"].as_f64().unwrap()).sum();
    assert!(
        (50.0..=101.0).contains(&share),
        "layers cover the step: {share}%"
    );
    // The store keeps the same record.
    let files: Vec<_> = std::fs::read_dir(store.path()).unwrap().collect();
    assert_eq!(files.len(), 1);
    let path = files[0].as_ref().unwrap().path();
    assert!(path.to_str().unwrap().contains("-model-"));
    let kept: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(kept["subcommand"], "model");
    assert_eq!(kept["complete"], true);
    assert_eq!(kept["records"][0]["params"], 11_689_512);
    // And `report` shows it.
    let rep = cnnbench(&["report", store.path().to_str().unwrap()]);
    assert_eq!(rep.status.code(), Some(0), "{}", stderr(&rep));
    let md = stdout(&rep);
    assert!(md.contains("## Models"), "{md}");
    let row = md
        .lines()
        .find(|l| l.starts_with("| resnet18 | 1 |"))
        .unwrap();
    assert!(
        row.contains("| cpu | f32 | nhwc |") && row.contains("fused: relu"),
        "{row}"
    );
}

#[test]
fn out_of_memory_is_a_row_and_the_run_goes_on() {
    let o = cnnbench(&[
        "model",
        "vgg19",
        "alexnet",
        "--batch",
        "1000000",
        "--format",
        "csv",
        "--no-save",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let rows: Vec<String> = stdout(&o).lines().skip(1).map(String::from).collect();
    assert_eq!(rows.len(), 2);
    // gpus, input, then gpu_paths and eager_total_ms, empty on the CPU.
    assert!(
        rows.iter().all(|r| r.ends_with(",OOM,1,synthetic,,")),
        "{rows:?}"
    );
}

#[test]
fn check_passes_alexnet_and_prints_a_table() {
    let o = cnnbench(&["check", "--model", "alexnet", "--batch", "1"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("layer outputs") && out.contains("worst of 16 gradients"),
        "{out}"
    );
    assert!(!out.contains("FAIL"), "{out}");
}

#[test]
fn bad_model_input_is_one_line_and_exit_2() {
    for args in [
        vec!["model", "resnet51"],
        vec!["model", "resnet50", "--batch", "0"],
        vec!["model", "resnet50", "--format", "benchdnn"],
        vec!["model", "resnet50", "--dtype", "f16"],
        vec!["model", "resnet50", "--device", "gpu"],
        vec!["check", "--model", "lenet"],
        vec!["check", "--device", "gpu"],
        // A captured step cannot be timed per layer nor exchange gradients.
        vec![
            "model",
            "mnist-mlp",
            "--device",
            "gpu",
            "--cuda-graph",
            "--per-layer",
        ],
        vec!["model", "mnist-mlp", "--cuda-graph", "--gpus", "2"],
        vec![
            "model",
            "imdb-bilstm",
            "--device",
            "gpu",
            "--layout",
            "nchw",
        ],
        vec![
            "check",
            "--model",
            "lstm-text",
            "--device",
            "gpu",
            "--layout",
            "nchw",
        ],
    ] {
        let o = cnnbench(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn the_keras_models_pass_check_and_train_with_a_per_layer_table() {
    let models = [
        "mnist-mlp",
        "mnist-cnn",
        "cifar10-cnn",
        "imdb-fasttext",
        "imdb-bilstm",
        "lstm-text",
    ];
    let mut args = vec!["check", "--batch", "2"];
    for m in models {
        args.extend(["--model", m]);
    }
    let o = cnnbench(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(!out.contains("FAIL"), "{out}");
    assert!(out.contains("bidirectional_1"), "{out}");
    let mut args = vec!["model"];
    args.extend(models);
    args.extend([
        "--batch",
        "2",
        "--iters",
        "2",
        "--warmup",
        "0",
        "--per-layer",
    ]);
    args.extend(["--format", "json"]);
    let o = cnnbench(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let records = doc["records"].as_array().unwrap();
    assert_eq!(records.len(), models.len());
    for (r, name) in records.iter().zip(models) {
        assert_eq!(r["model"], name);
        assert_eq!(r["status"], "ok", "{name}");
        assert!(r["loss"].as_f64().is_some_and(f64::is_finite), "{name}");
        assert!(!r["layers"].as_array().unwrap().is_empty(), "{name}");
    }
    let kinds = |r: &Value| -> Vec<String> {
        let layers = r["layers"].as_array().unwrap();
        layers
            .iter()
            .map(|l| l["kind"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(kinds(&records[4])[..2], ["embedding", "lstm"]);
    assert_eq!(kinds(&records[3]).last().unwrap(), "sigmoid-bce");
}

#[test]
fn a_text_model_refuses_image_folders_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let o = cnnbench(&[
        "model",
        "imdb-bilstm",
        "--data",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// `model --isa` (or `CNNBENCH_ISA`) picks the CPU path's kernels, as
/// conv's and rnn's: the record names it; a bad one is one line.
#[test]
fn isa_picks_the_cpu_kernels_and_a_bad_one_is_refused_in_one_line() {
    let o = cnnbench(&[
        "model",
        "lstm-text",
        "--device",
        "cpu",
        "--batch",
        "2",
        "--isa",
        "scalar",
        "--warmup",
        "1",
        "--iters",
        "2",
        "--min-time",
        "0",
        "--format",
        "json",
        "--no-save",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: Value = serde_json::from_str(&stdout(&o)).expect("JSON");
    assert_eq!(doc["environment"]["isa"], "scalar", "{doc}");
    let o = cnnbench(&["model", "mnist-mlp", "--isa", "sse9", "--device", "cpu"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("unknown ISA 'sse9'"), "{err}");
}
