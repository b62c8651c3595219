//! Runs of cnnbench in child processes, for sweeps (one child per
//! configuration) and `compare` (one per library folder or variant). Each
//! child is an ordinary run: it saves its own file in the results store,
//! and reports back through a JSON `--out` file.

use crate::results::store::RunFile;
use anyhow::{bail, Context, Result};
use std::process::Command;

/// How a child ended.
pub enum ChildRun {
    /// Finished (exit 0, or 1 when a check failed): its output.
    Done { file: RunFile, checks_failed: bool },
    /// Stopped by Ctrl-C (exit 130): what it finished.
    Interrupted(RunFile),
}

/// Runs `cnnbench ARGS --format json --out TMP --quiet` with `env` added,
/// and reads back its output. A child's one-line error becomes this
/// process's error.
pub fn run(args: &[String], env: &[(String, String)]) -> Result<ChildRun> {
    let exe = std::env::current_exe().context("finding the cnnbench executable")?;
    let tmp = tempfile::Builder::new()
        .prefix("cnnbench-child-")
        .suffix(".json")
        .tempfile()
        .context("creating a temporary file")?;
    let out = Command::new(exe)
        .args(without_output_options(args))
        .args(["--format", "json", "--quiet", "--out"])
        .arg(tmp.path())
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output()
        .context("starting a cnnbench child process")?;
    let read = || -> Result<RunFile> {
        let text = std::fs::read_to_string(tmp.path()).context("reading a child's output")?;
        serde_json::from_str(&text).context("parsing a child's output")
    };
    match out.status.code() {
        Some(0) => Ok(ChildRun::Done {
            file: read()?,
            checks_failed: false,
        }),
        Some(1) => Ok(ChildRun::Done {
            file: read()?,
            checks_failed: true,
        }),
        Some(130) => Ok(ChildRun::Interrupted(read().unwrap_or_default())),
        code => {
            let err = String::from_utf8_lossy(&out.stderr);
            let line = err
                .lines()
                .find(|l| l.starts_with("cnnbench: error: "))
                .map(|l| l.trim_start_matches("cnnbench: error: ").to_string())
                .unwrap_or_else(|| err.lines().last().unwrap_or("").to_string());
            bail!(
                "{} (child `cnnbench {}` exited with {})",
                line,
                args.join(" "),
                code.map_or("a signal".to_string(), |c| c.to_string())
            )
        }
    }
}

/// `args` without the options the parent sets for every child (`--format`,
/// `--out`, `--quiet`): the child reports through a JSON file.
fn without_output_options(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--format" || a == "--out" {
            i += 2;
            continue;
        }
        if !(a.starts_with("--format=") || a.starts_with("--out=") || a == "--quiet" || a == "-q") {
            out.push(args[i].clone());
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_parent_owns_the_output_options() {
        let args: Vec<String> = "conv x --format csv --out f.csv -q --iters 2 --format=md"
            .split(' ')
            .map(String::from)
            .collect();
        assert_eq!(
            super::without_output_options(&args),
            ["conv", "x", "--iters", "2"]
        );
    }
}
