//! `conv --api`: legacy is the default and leaves CPU runs as they were;
//! graph is GPU only, refused in one line (exit 2) on a run that lands on
//! the CPU; an unknown API is refused by name. `--norm-conv` too is GPU
//! only, as are `--fastest` and `--deterministic`.

use std::process::{Command, Output};

fn cnnbench(args: &[&str]) -> Output {
    let store = std::env::temp_dir().join(format!("cnnbench-tests-api-{}", std::process::id()));
    Command::new(env!("CARGO_BIN_EXE_cnnbench"))
        .env("CNNBENCH_RESULTS", store)
        .args(args)
        .output()
        .expect("running cnnbench")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Exit 2 with one stderr line that says `has`.
fn one_line(o: &Output, has: &str) {
    assert_eq!(o.status.code(), Some(2), "{}", stderr(o));
    let err = stderr(o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(has), "{err}");
}

const P: &str = "mb2ic8ih8oc8oh8kh3ph1";

#[test]
fn graph_is_refused_on_the_cpu_and_unknown_apis_by_name() {
    one_line(
        &cnnbench(&["conv", P, "--api", "graph", "--device", "cpu"]),
        "--api graph: GPU only: add --device gpu",
    );
    one_line(
        &cnnbench(&["conv", P, "--api", "v8"]),
        "unknown cuDNN API 'v8' (legacy, graph or auto)",
    );
    // auto chooses per layer, so it belongs to model and check.
    one_line(
        &cnnbench(&["conv", P, "--api", "auto"]),
        "auto picks per layer in model and check",
    );
    one_line(
        &cnnbench(&["model", "mnist-mlp", "--api", "auto", "--device", "cpu"]),
        "--api auto: GPU only: add --device gpu",
    );
}

/// `--norm-conv` (NormConv's fused graphs) is GPU only: one line on a
/// run asked for on the CPU.
#[test]
fn norm_conv_is_refused_on_the_cpu() {
    one_line(
        &cnnbench(&["conv", P, "--norm-conv", "--device", "cpu"]),
        "--norm-conv: GPU only: add --device gpu",
    );
}

#[test]
fn legacy_is_the_default_and_runs_on_the_cpu() {
    let args = [
        "conv", P, "--device", "cpu", "--dir", "fwd", "--iters", "1", "--warmup", "0",
    ];
    let plain = cnnbench(&args);
    assert!(plain.status.success(), "{}", stderr(&plain));
    let mut with = args.to_vec();
    with.extend(["--api", "legacy"]);
    let legacy = cnnbench(&with);
    assert!(legacy.status.success(), "{}", stderr(&legacy));
}

/// `--fastest` and `--deterministic` (model and check) are GPU only too,
/// and `--fastest` does not take a flag it stands for.
#[test]
fn fastest_and_deterministic_are_refused_on_the_cpu() {
    for cmd in [
        &["model", "mnist-mlp"][..],
        &["check", "--model", "mnist-mlp"],
    ] {
        for flag in ["--fastest", "--deterministic"] {
            let args = [cmd, &[flag, "--device", "cpu"]].concat();
            one_line(
                &cnnbench(&args),
                &format!("{flag}: GPU only: add --device gpu"),
            );
        }
    }
    let o = cnnbench(&["model", "mnist-mlp", "--fastest", "--api", "graph"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("'--fastest' cannot be used with '--api"),
        "{}",
        stderr(&o)
    );
}
