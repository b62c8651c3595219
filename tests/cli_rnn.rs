//! `cnnbench rnn` as users see it: every cell and direction timed and
//! checked on the CPU, the DeepBench list read, dumps in PyTorch's layout,
//! and bad descriptors refused in one line.

use serde_json::Value;
use std::process::{Command, Output};

fn cnnbench(args: &[&str]) -> Output {
    let store = std::env::temp_dir().join(format!("cnnbench-rnn-tests-{}", std::process::id()));
    Command::new(env!("CARGO_BIN_EXE_cnnbench"))
        .env("CNNBENCH_RESULTS", store)
        .args(args)
        .output()
        .expect("running cnnbench")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Fails unless `o` exited 2 with one line on stderr that holds `has`.
fn one_line(o: &Output, has: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains(has), "wanted '{has}' in: {err}");
}

fn records(o: &Output) -> Vec<Value> {
    assert!(o.status.success(), "{}", stderr(o));
    let doc: Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    doc["records"].as_array().expect("a records array").to_vec()
}

#[test]
fn every_cell_and_direction_passes_its_check_in_all_three_passes() {
    for cell in ["rnn-relu", "rnn-tanh", "lstm", "gru"] {
        for direction in [
            "left2right",
            "right2left",
            "bidirectional-concat",
            "bidirectional-sum",
        ] {
            let o = cnnbench(&[
                "rnn",
                "l2t3mb2sic6slc4",
                "--cell",
                cell,
                "--direction",
                direction,
                "--check",
                "--device",
                "cpu",
                "--iters",
                "2",
                "--warmup",
                "1",
                "--format",
                "json",
                "--no-save",
                "--quiet",
            ]);
            let recs = records(&o);
            let dirs: Vec<&str> = recs.iter().filter_map(|r| r["dir"].as_str()).collect();
            assert_eq!(
                dirs,
                ["fwd", "bwd-data", "bwd-weights"],
                "{cell} {direction}"
            );
            for r in &recs {
                assert_eq!(r["check"]["passed"], true, "{cell} {direction}: {r}");
                assert!(r["gflops"].as_f64().unwrap_or(0.0) > 0.0, "{r}");
            }
        }
    }
}

#[test]
fn a_backward_pass_alone_runs_what_it_reads_first() {
    let o = cnnbench(&[
        "rnn",
        "l1t4mb3sic5",
        "--cell",
        "gru",
        "--dir",
        "bwd-weights",
        "--check",
        "--device",
        "cpu",
        "--iters",
        "2",
        "--format",
        "json",
        "--no-save",
        "--quiet",
    ]);
    let recs = records(&o);
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["check"]["passed"], true, "{}", recs[0]);
}

#[test]
fn dumps_name_pytorch_parameters_and_every_output() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let o = cnnbench(&[
        "rnn",
        "l2t3mb2sic4_ntiny",
        "--cell",
        "lstm",
        "--direction",
        "bidirectional-concat",
        "--device",
        "cpu",
        "--iters",
        "1",
        "--dump",
        dir.path().to_str().expect("UTF-8"),
        "--no-save",
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("problem.json")).expect("problem.json"),
    )
    .expect("JSON");
    let names: Vec<&str> = doc["files"]
        .as_array()
        .expect("files")
        .iter()
        .filter_map(|f| f["name"].as_str())
        .collect();
    for want in [
        "x",
        "hx",
        "cx",
        "weight_ih_l0",
        "weight_hh_l1_reverse",
        "bias_ih_l1",
        "y",
        "hy",
        "cy",
        "dx",
        "dhx",
        "dcx",
        "grad_weight_ih_l1_reverse",
        "grad_bias_hh_l0",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
        assert!(
            dir.path().join(format!("{want}.npy")).exists(),
            "{want}.npy"
        );
    }
    // The second layer reads both directions' outputs: 2h = 8 features.
    let w = doc["files"]
        .as_array()
        .expect("files")
        .iter()
        .find(|f| f["name"] == "weight_ih_l1")
        .expect("weight_ih_l1");
    assert_eq!(w["shape"], serde_json::json!([16, 8]));
}

#[test]
fn bad_descriptors_and_options_are_one_line() {
    for (args, has) in [
        (vec!["rnn", "l1t2mb2"], "sic"),
        (vec!["rnn", "l1t2mb2sic4dic8"], "projection"),
        (vec!["rnn", "l1t0mb2sic4"], "t"),
        (vec!["rnn", "l1t2mb2sic4xyz"], "l1t2mb2sic4xyz"),
        (
            vec!["rnn", "l1t2mb2sic4", "--dir", "bwd-filter"],
            "bwd-weights",
        ),
        (
            vec!["rnn", "l1t2mb2sic4", "--dtype", "f16", "--device", "cpu"],
            "f32",
        ),
        (vec!["rnn"], "no problem"),
        (
            vec!["rnn", "l1t1000000mb1000000sic1000000", "--device", "cpu"],
            "l1t1000000mb1000000sic1000000",
        ),
    ] {
        let mut a = args.clone();
        a.extend(["--no-save", "--quiet"]);
        one_line(&cnnbench(&a), has);
    }
}

#[test]
fn the_deepbench_list_loads() {
    // Only its first problem runs (one pass, one timed run): the list is
    // read whole and checked before anything is timed.
    let dir = tempfile::tempdir().expect("a temp dir");
    let list = dir.path().join("one.txt");
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/problem/lists/deepbench_rnn_training.txt"
    ))
    .expect("the list");
    let first = text
        .lines()
        .find(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .expect("a problem");
    assert!(first.contains("--cell="), "{first}");
    std::fs::write(&list, format!("{first}\n")).expect("write");
    let o = cnnbench(&[
        "rnn",
        "--from",
        list.to_str().expect("UTF-8"),
        "--dir",
        "fwd",
        "--device",
        "cpu",
        "--iters",
        "1",
        "--warmup",
        "0",
        "--format",
        "json",
        "--no-save",
        "--quiet",
    ]);
    assert_eq!(records(&o).len(), 1);
}

#[test]
fn isa_picks_the_kernels_and_a_bad_one_is_refused_in_one_line() {
    // The scalar kernels run everywhere: checked, and named in the
    // kernel column and the environment.
    let o = cnnbench(&[
        "rnn",
        "l1t3mb2sic6",
        "--isa",
        "scalar",
        "--check",
        "--device",
        "cpu",
        "--dir",
        "fwd",
        "--iters",
        "2",
        "--format",
        "json",
        "--no-save",
    ]);
    let recs = records(&o);
    let doc: Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    assert_eq!(recs.len(), 1);
    let kernel = recs[0]["kernel"].as_str().unwrap_or_default();
    assert!(kernel.contains("gates(scalar)"), "{kernel}");
    assert_eq!(recs[0]["check"]["passed"], Value::Bool(true), "{}", recs[0]);
    assert_eq!(
        doc["environment"]["isa"], "scalar",
        "{}",
        doc["environment"]
    );
    one_line(
        &cnnbench(&["rnn", "l1t3mb2sic6", "--isa", "sse9", "--device", "cpu"]),
        "unknown ISA 'sse9'",
    );
}
