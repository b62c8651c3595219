//! `cnnbench data` and `model --data` as users see them: a synthetic tree
//! written, the loader timed alone, one image dumped, a model trained on
//! files, bad files skipped and counted, and bad trees refused in one line.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn cnnbench(args: &[&str]) -> Output {
    let store = std::env::temp_dir().join(format!("cnnbench-data-tests-{}", std::process::id()));
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

/// Fails unless `o` exited 2 with one line on stderr that holds `has`.
fn one_line(o: &Output, has: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains(has), "wanted '{has}' in: {err}");
}

/// A small synthetic tree: `images` JPEGs of 64x48 over `classes` folders.
fn synth(dir: &Path, images: usize, classes: usize) {
    let o = cnnbench(&[
        "data",
        "synth",
        dir.to_str().expect("a UTF-8 temp path"),
        "--images",
        &images.to_string(),
        "--classes",
        &classes.to_string(),
        "--width",
        "64",
        "--height",
        "48",
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(&format!("wrote {images} JPEGs")),
        "{}",
        stdout(&o)
    );
}

fn json(o: &Output) -> Value {
    assert!(o.status.success(), "{}", stderr(o));
    serde_json::from_slice(&o.stdout).expect("JSON on stdout")
}

#[test]
fn synth_bench_and_dump_work_on_a_small_tree() {
    let tmp = tempfile::tempdir().expect("a temp dir");
    let tree = tmp.path().join("tree");
    synth(&tree, 12, 3);
    let classes: Vec<_> = std::fs::read_dir(&tree).expect("the tree").collect();
    assert_eq!(classes.len(), 3);

    let path = tree.to_str().expect("UTF-8");
    let run = json(&cnnbench(&[
        "data",
        "bench",
        path,
        "--loader-threads",
        "1,2",
        "--batch",
        "4",
        "--images",
        "8",
        "--size",
        "32",
        "--format",
        "json",
        "--quiet",
        "--no-save",
    ]));
    let recs = run["records"].as_array().expect("records");
    assert_eq!(recs.len(), 2);
    for (r, threads) in recs.iter().zip([1, 2]) {
        assert_eq!(r["loader_threads"], threads);
        assert_eq!(r["images"], 8);
        assert_eq!(r["images_in_tree"], 12);
        assert!(r["images_per_sec"].as_f64().expect("a rate") > 0.0);
        assert!(r["decode_ms"].as_f64().expect("ms") > 0.0);
        assert_eq!(r["skipped"], 0);
    }

    let npy = tmp.path().join("x.npy");
    let o = cnnbench(&[
        "data",
        "dump",
        path,
        "--index",
        "5",
        "--size",
        "32",
        "--out",
        npy.to_str().expect("UTF-8"),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).trim_end().ends_with(".jpg"), "{}", stdout(&o));
    let bytes = std::fs::read(&npy).expect("the .npy");
    assert!(bytes.starts_with(b"\x93NUMPY"));
    // The header, then 32x32x3 f32s.
    assert!(bytes.len() >= 32 * 32 * 3 * 4);
    let o = cnnbench(&[
        "data",
        "dump",
        path,
        "--index",
        "12",
        "--out",
        npy.to_str().expect("UTF-8"),
    ]);
    one_line(&o, "--index 12");
}

#[test]
fn a_model_trains_on_files_and_says_so() {
    let tmp = tempfile::tempdir().expect("a temp dir");
    let tree = tmp.path().join("tree");
    synth(&tree, 6, 2);
    // One file that is no image: skipped, counted and named.
    std::fs::write(tree.join("class_000").join("broken.jpg"), b"not a jpeg").expect("write");
    let path = tree.to_str().expect("UTF-8");
    let o = cnnbench(&[
        "model",
        "resnet18",
        "--batch",
        "2",
        "--iters",
        "3",
        "--data",
        path,
        "--loader-threads",
        "1",
        "--format",
        "json",
        "--quiet",
        "--no-save",
    ]);
    let run = json(&o);
    let r = &run["records"][0];
    assert_eq!(r["status"], "ok");
    assert_eq!(r["input"]["source"], "folder");
    let f = &r["input"]["folder"];
    assert_eq!(f["images"], 7);
    assert_eq!(f["classes"], 2);
    assert_eq!(f["transform"], "train");
    assert_eq!(f["loader_threads"], 1);
    assert!(f["loader_images_per_sec"].as_f64().expect("a rate") > 0.0);
    assert!(f["wait_ms"]["median"].as_f64().expect("ms") >= 0.0);
    assert!(f["skipped"].as_u64().expect("a count") >= 1);
    assert!(r["loss"].as_f64().expect("a loss").is_finite());
    assert!(stderr(&o).contains("broken.jpg"), "{}", stderr(&o));

    // Synthetic stays the default, and says so.
    let run = json(&cnnbench(&[
        "model",
        "resnet18",
        "--batch",
        "1",
        "--iters",
        "1",
        "--format",
        "json",
        "--quiet",
        "--no-save",
    ]));
    assert_eq!(run["records"][0]["input"]["source"], "synthetic");
}

#[test]
fn bad_trees_and_options_are_one_line() {
    let tmp = tempfile::tempdir().expect("a temp dir");
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    let e = empty.to_str().expect("UTF-8");
    one_line(&cnnbench(&["model", "resnet18", "--data", e]), "class");
    one_line(&cnnbench(&["data", "bench", e]), "class");
    let flat = tmp.path().join("flat");
    std::fs::create_dir(&flat).expect("mkdir");
    std::fs::write(flat.join("a.jpg"), b"x").expect("write");
    one_line(
        &cnnbench(&["data", "bench", flat.to_str().expect("UTF-8")]),
        "class",
    );
    one_line(
        &cnnbench(&["model", "resnet18", "--data", "/nonexistent/tree"]),
        "/nonexistent/tree",
    );
    one_line(
        &cnnbench(&["model", "resnet18", "--prefetch", "3"]),
        "--data DIR",
    );
    one_line(
        &cnnbench(&["model", "resnet18", "--transform", "eval"]),
        "--data DIR",
    );
    one_line(
        &cnnbench(&["model", "resnet18", "--data", e, "--prefetch", "0"]),
        "--prefetch",
    );
    one_line(
        &cnnbench(&["data", "bench", e, "--loader-threads", "1,x"]),
        "--loader-threads",
    );
    let used = tmp.path().join("used");
    std::fs::create_dir(&used).expect("mkdir");
    std::fs::write(used.join("keep.txt"), b"mine").expect("write");
    one_line(
        &cnnbench(&[
            "data",
            "synth",
            used.to_str().expect("UTF-8"),
            "--images",
            "2",
            "--classes",
            "2",
        ]),
        "used",
    );
    assert_eq!(std::fs::read(used.join("keep.txt")).expect("kept"), b"mine");
    one_line(
        &cnnbench(&["data", "synth", e, "--images", "0"]),
        "--images",
    );
    one_line(
        &cnnbench(&["data", "synth", e, "--images", "4", "--classes", "5"]),
        "--classes",
    );
}

#[test]
fn a_tree_of_only_broken_files_is_an_error_not_a_hang() {
    let tmp = tempfile::tempdir().expect("a temp dir");
    let tree = tmp.path().join("tree");
    std::fs::create_dir_all(tree.join("a")).expect("mkdir");
    for k in 0..3 {
        std::fs::write(
            tree.join("a").join(format!("{k}.jpg")),
            b"\xff\xd8\xff broken",
        )
        .expect("w");
    }
    let o = cnnbench(&[
        "data",
        "bench",
        tree.to_str().expect("UTF-8"),
        "--batch",
        "2",
        "--images",
        "2",
        "--quiet",
        "--no-save",
    ]);
    one_line(&o, "0.jpg");
}
