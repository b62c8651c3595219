//! Runs of cnnbench in child processes, for sweeps (one child per
//! configuration) and `compare` (one per library folder or variant). Each
//! child is an ordinary run: it saves its own file in the results store,
//! and reports back through a JSON `--out` file.

use crate::results::store::RunFile;
use crate::signals;
use anyhow::{bail, Context, Result};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus};
use std::time::Duration;

/// How a child ended.
pub enum ChildRun<T = RunFile> {
    /// Finished (exit 0, or 1 when a check failed): its output.
    Done { file: T, checks_failed: bool },
    /// Stopped by a stop signal (exit 130, 143 or 129): what it finished.
    Interrupted(T),
}

/// Where a child's JSON comes from: a results file it writes (`--out`,
/// for the subcommands that write records), or its standard output
/// (`info`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Output {
    File,
    Stdout,
}

/// Runs `cnnbench ARGS --format json --out TMP --quiet` with `env` added,
/// and reads back its output. A child's one-line error becomes this
/// process's error.
pub fn run(args: &[String], env: &[(String, String)]) -> Result<ChildRun> {
    run_as(args, env, Output::File)
}

/// [`run`], with the child's JSON read from `output` and parsed as `T`.
pub fn run_as<T: serde::de::DeserializeOwned + Default>(
    args: &[String],
    env: &[(String, String)],
    output: Output,
) -> Result<ChildRun<T>> {
    let exe = std::env::current_exe().context("finding the cnnbench executable")?;
    let tmp = tempfile::Builder::new()
        .prefix("cnnbench-child-")
        .suffix(".json")
        .tempfile()
        .context("creating a temporary file")?;
    let mut command = Command::new(exe);
    command.args(without_output_options(args));
    let stdout = match output {
        Output::File => {
            command
                .args(["--format", "json", "--quiet", "--out"])
                .arg(tmp.path());
            std::process::Stdio::null()
        }
        Output::Stdout => {
            command.args(["--format", "json"]);
            std::process::Stdio::from(
                tmp.reopen()
                    .context("opening a temporary file for a child's output")?,
            )
        }
    };
    let mut child = command
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(std::process::Stdio::null())
        .stdout(stdout)
        .stderr(std::process::Stdio::piped())
        // Its own process group: a terminal's Ctrl-C or hangup reaches the
        // parent alone, which passes it on once (two signals would end the
        // child at once instead of letting it finish its record).
        .process_group(0)
        .spawn()
        .context("starting a cnnbench child process")?;
    // From its start to its end, a second stop signal goes straight to the
    // child from the handler (so no child outlives this process).
    let running = signals::ChildRunning::new(child.id());
    // Read stderr beside the wait, so a chatty child never blocks on a
    // full pipe.
    let mut pipe = child.stderr.take();
    let reader = std::thread::Builder::new().spawn(move || {
        let mut bytes = Vec::new();
        if let Some(p) = pipe.as_mut() {
            let _ = std::io::Read::read_to_end(p, &mut bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    });
    // Out of threads (RLIMIT_NPROC): the child goes, and the reason is
    // one line.
    let reader = match reader {
        Ok(r) => r,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            drop(running);
            bail!("cannot start a thread to read a child run's messages: {e}");
        }
    };
    let status = wait_forwarding_signals(&mut child, running)?;
    let stderr = reader.join().unwrap_or_default();
    let read = || -> Result<T> {
        let text = std::fs::read_to_string(tmp.path()).context("reading a child's output")?;
        serde_json::from_str(&text).context("parsing a child's output")
    };
    match status.code() {
        Some(0) => Ok(ChildRun::Done {
            file: read()?,
            checks_failed: false,
        }),
        Some(1) => Ok(ChildRun::Done {
            file: read()?,
            checks_failed: true,
        }),
        Some(c) if signals::is_stop_status(c) => {
            Ok(ChildRun::Interrupted(read().unwrap_or_default()))
        }
        // Killed by the signal itself (before its handlers were in place).
        None if status
            .signal()
            .is_some_and(|s| signals::STOP_SIGNALS.contains(&s)) =>
        {
            Ok(ChildRun::Interrupted(read().unwrap_or_default()))
        }
        code => {
            let line = stderr
                .lines()
                .find(|l| l.starts_with("cnnbench: error: "))
                .map(|l| l.trim_start_matches("cnnbench: error: ").to_string())
                .unwrap_or_else(|| stderr.lines().last().unwrap_or("").to_string());
            bail!(
                "{} (child `cnnbench {}` exited with {})",
                line,
                args.join(" "),
                code.map_or("a signal".to_string(), |c| c.to_string())
            )
        }
    }
}

/// Waits for `child`, passing the first stop signal the parent receives on
/// to it, once (the signal handler passes a second one on at once).
fn wait_forwarding_signals(
    child: &mut Child,
    running: signals::ChildRunning,
) -> Result<ExitStatus> {
    let mut sent = false;
    loop {
        if let Some(st) = child.try_wait().context("waiting for a cnnbench child")? {
            // Reaped: its pid may be reused, so no signal goes to it now.
            drop(running);
            return Ok(st);
        }
        if let (Some(sig), false) = (signals::received(), sent) {
            signals::send(child.id(), sig);
            sent = true;
        }
        std::thread::sleep(Duration::from_millis(20));
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
