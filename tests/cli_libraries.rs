//! Which cuDNN a run loads, against real cuDNN installs without a GPU:
//! `.ci/run` sets `CNNBENCH_CUDNN_DIRS` to two folders of pip's
//! `nvidia-cudnn-cu13` wheels of different versions (A:B). Elsewhere these
//! tests say they are skipped, unless `CNNBENCH_GPU_LIBS=required`.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

fn cudnn_dirs() -> Option<(PathBuf, PathBuf)> {
    let dirs = std::env::var("CNNBENCH_CUDNN_DIRS")
        .ok()
        .filter(|d| !d.is_empty());
    let parsed = dirs.as_deref().and_then(|d| {
        let mut it = std::env::split_paths(d);
        Some((it.next()?, it.next()?))
    });
    if parsed.is_none() {
        if std::env::var("CNNBENCH_GPU_LIBS").as_deref() == Ok("required") {
            panic!("CNNBENCH_GPU_LIBS=required, but CNNBENCH_CUDNN_DIRS does not name two cuDNN folders");
        }
        eprintln!("skipped: CNNBENCH_CUDNN_DIRS (two cuDNN folders, A:B) is not set");
    }
    parsed
}

fn cnnbench(ld_library_path: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cnnbench"));
    c.env("LD_LIBRARY_PATH", ld_library_path).env(
        "CNNBENCH_RESULTS",
        std::env::temp_dir().join("cnnbench-cli-libraries"),
    );
    c
}

/// `info --format json`'s cuDNN entry: (file, version) or the error.
fn cudnn_entry(info: &serde_json::Value) -> Result<(String, String), String> {
    let libs = info["gpu"]["libraries"].as_array().expect("gpu.libraries");
    let c = libs
        .iter()
        .find(|l| l["name"] == "cuDNN")
        .expect("a cuDNN entry");
    match (c["file"].as_str(), c["version"].as_str()) {
        (Some(f), Some(v)) => Ok((f.to_string(), v.to_string())),
        _ => Err(c["error"].as_str().unwrap_or("").to_string()),
    }
}

fn info(ld_library_path: &str) -> serde_json::Value {
    let out = cnnbench(ld_library_path)
        .args(["info", "--format", "json", "--threads", "1"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A folder laid out as a system install (`/usr/lib/x86_64-linux-gnu`):
/// each `libcudnn*.so.9` as a link to `.so.9.x.y`, and unversioned links.
fn system_layout(pip: &Path, version: &str, into: &Path) {
    for e in std::fs::read_dir(pip).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".so.9") else {
            continue;
        };
        symlink(pip.join(&name), into.join(format!("{stem}.so.{version}"))).unwrap();
        symlink(format!("{stem}.so.{version}"), into.join(&name)).unwrap();
        symlink(&name, into.join(format!("{stem}.so"))).unwrap();
    }
}

#[test]
fn each_folder_first_on_the_path_loads_its_own_cudnn_despite_an_unversioned_decoy() {
    let Some((a, b)) = cudnn_dirs() else { return };
    let (file_a, version_a) = cudnn_entry(&info(&a.display().to_string())).unwrap();
    let (file_b, version_b) = cudnn_entry(&info(&b.display().to_string())).unwrap();
    assert_eq!(Path::new(&file_a).parent(), Some(a.as_path()));
    assert_eq!(Path::new(&file_b).parent(), Some(b.as_path()));
    assert_ne!(
        version_a, version_b,
        "the two folders must hold two cuDNN versions"
    );
    // A decoy: an unversioned libcudnn.so (B's) later on the path. cudarc's
    // own loader tried that name first and took it.
    let decoy = tempfile::tempdir().unwrap();
    symlink(b.join("libcudnn.so.9"), decoy.path().join("libcudnn.so")).unwrap();
    let path = format!("{}:{}", a.display(), decoy.path().display());
    assert_eq!(
        cudnn_entry(&info(&path)).unwrap(),
        (file_a.clone(), version_a.clone())
    );

    // compare: each run loads exactly its folder's cuDNN, pip's layout or a
    // system layout, with the decoy on the parent's path.
    let system = tempfile::tempdir().unwrap();
    system_layout(&b, &version_b, system.path());
    let out = cnnbench(&decoy.path().display().to_string())
        .args(["compare", "--quiet", "--format", "json", "--cudnn"])
        .arg(&a)
        .arg("--cudnn")
        .arg(system.path())
        .args(["--", "info", "--threads", "1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let cudnn = |run: &Path| {
        rows.iter()
            .find(|r| r["run"] == run.display().to_string() && r["library"] == "cuDNN")
            .map(|r| {
                (
                    r["file"].as_str().unwrap().to_string(),
                    r["version"].as_str().unwrap().to_string(),
                )
            })
            .unwrap()
    };
    assert_eq!(cudnn(&a), (file_a, version_a));
    let (file, version) = cudnn(system.path());
    assert_eq!(Path::new(&file), system.path().join("libcudnn.so.9"));
    assert_eq!(version, version_b);
}

#[test]
fn a_mixed_install_is_refused_in_one_line_naming_both_versions() {
    let Some((a, b)) = cudnn_dirs() else { return };
    let (_, version_a) = cudnn_entry(&info(&a.display().to_string())).unwrap();
    let (_, version_b) = cudnn_entry(&info(&b.display().to_string())).unwrap();
    // A's libcudnn.so.9 and graph library beside B's other sub-libraries
    // (libcudnn.so.9 forwards even cudnnGetVersion to the graph library,
    // so the graph library's version is the install's).
    let mixed = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(&b).unwrap() {
        let name = e.unwrap().file_name();
        let from = match name.to_string_lossy().as_ref() {
            "libcudnn.so.9" | "libcudnn_graph.so.9" => &a,
            n if n.starts_with("libcudnn") => &b,
            _ => continue,
        };
        symlink(from.join(&name), mixed.path().join(&name)).unwrap();
    }
    let path = mixed.path().display().to_string();
    let e = cudnn_entry(&info(&path)).unwrap_err();
    assert!(e.starts_with("mixed cuDNN install"), "{e}");
    assert!(
        e.contains(&version_a) && e.contains(&version_b) && !e.contains('\n'),
        "{e}"
    );
    // A GPU subcommand ends in one line too (here without a driver).
    let out = cnnbench(&path)
        .args(["conv", "mb1ic8ih8oc8kh3ph1", "--device", "gpu", "--no-save"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}
