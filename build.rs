//! Stamps build metadata into the binary, so every result says exactly
//! which code produced it.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let rev = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    let rev = if dirty { format!("{rev}-dirty") } else { rev };
    println!("cargo:rustc-env=CNNBENCH_GIT={rev}");
    println!(
        "cargo:rustc-env=CNNBENCH_PROFILE={}",
        std::env::var("PROFILE").unwrap_or_default()
    );
    println!(
        "cargo:rustc-env=CNNBENCH_TARGET_FEATURES={}",
        std::env::var("CARGO_CFG_TARGET_FEATURE").unwrap_or_default()
    );
    // Stamp again when HEAD, the index or a ref moves. The git directory
    // comes from git itself: in a worktree `.git` is a file, and watching
    // `.git/HEAD` there watched nothing, so the stamp went stale.
    let mut dirs: Vec<String> = [
        ["rev-parse", "--git-dir"],
        ["rev-parse", "--git-common-dir"],
    ]
    .iter()
    .filter_map(|a| git(a))
    .collect();
    dirs.dedup();
    for dir in dirs {
        for file in ["HEAD", "index", "refs", "packed-refs"] {
            let path = std::path::Path::new(&dir).join(file);
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
