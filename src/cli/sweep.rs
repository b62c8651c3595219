//! Sweeps: comma lists in `--batch`, `--threads`, `--dtype`, `--layout`
//! and `--isa` run every combination, each as its own child run (its own
//! file in the results store), and print them together.

use super::children::{self, ChildRun};
use crate::note::note;
use crate::output::sweep::render;
use crate::output::Format;
use crate::results::atomic::{rewritable, write_atomic};
use crate::results::store::RunFile;
use anyhow::Result;
use std::process::ExitCode;

/// The options a sweep may vary, as given on the command line.
pub const SWEPT: [&str; 5] = ["--batch", "--threads", "--dtype", "--layout", "--isa"];

/// `(option, values)` for each swept option given with a comma list.
pub fn lists(args: &[String]) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let (name, value) = match a.split_once('=') {
            Some((n, v)) if SWEPT.contains(&n) => (n.to_string(), Some(v.to_string())),
            _ if SWEPT.contains(&a.as_str()) => (a.clone(), args.get(i + 1).cloned()),
            _ => {
                i += 1;
                continue;
            }
        };
        if let Some(v) = value.filter(|v| v.contains(',')) {
            out.push((name, v.split(',').map(|s| s.trim().to_string()).collect()));
        }
        i += 1;
    }
    out
}

/// Every combination of the lists, as the arguments of one child: the
/// swept options replaced by single values.
pub fn combinations(
    args: &[String],
    lists: &[(String, Vec<String>)],
) -> Vec<(String, Vec<String>)> {
    let mut combos: Vec<Vec<(String, String)>> = vec![vec![]];
    for (name, values) in lists {
        combos = combos
            .into_iter()
            .flat_map(|c| {
                values.iter().map(move |v| {
                    let mut c = c.clone();
                    c.push((name.clone(), v.clone()));
                    c
                })
            })
            .collect();
    }
    combos
        .into_iter()
        .map(|combo| {
            let mut out = Vec::new();
            let mut i = 0;
            while i < args.len() {
                let a = &args[i];
                let name = a.split_once('=').map_or(a.as_str(), |(n, _)| n);
                if let Some((_, v)) = combo.iter().find(|(n, _)| n == name) {
                    out.push(format!("{name}={v}"));
                    i += if a.contains('=') { 1 } else { 2 };
                    continue;
                }
                out.push(a.clone());
                i += 1;
            }
            let label = combo
                .iter()
                .map(|(n, v)| format!("{}={v}", n.trim_start_matches("--")))
                .collect::<Vec<_>>()
                .join(" ");
            (label, out)
        })
        .collect()
}

/// Every item of every list, and every child's whole command line, checked
/// before the first child starts: a bad item is named, and no run is
/// wasted on the configurations before it.
fn check_up_front(lists: &[(String, Vec<String>)], combos: &[(String, Vec<String>)]) -> Result<()> {
    for (name, values) in lists {
        for v in values {
            super::check_option_value(name, v)
                .map_err(|e| anyhow::anyhow!("{name} item '{v}' of '{}': {e}", values.join(",")))?;
        }
    }
    for (label, child) in combos {
        let argv = std::iter::once("cnnbench".to_string()).chain(child.iter().cloned());
        if let Err(e) = <super::Cli as clap::Parser>::try_parse_from(argv) {
            anyhow::bail!("{} ({label})", super::clap_line(&e));
        }
    }
    Ok(())
}

/// Runs the sweep and prints every configuration's records.
pub fn run(
    args: &[String],
    format: Format,
    out: Option<&std::path::Path>,
    quiet: bool,
    interrupted: &std::sync::atomic::AtomicBool,
) -> Result<ExitCode> {
    let lists = lists(args);
    let combos = combinations(args, &lists);
    check_up_front(&lists, &combos)?;
    let bar = super::progress::bar(combos.len() as u64, quiet);
    let mut done: Vec<(String, RunFile)> = Vec::new();
    let mut failed = false;
    let mut stopped = false;
    for (label, child_args) in &combos {
        if interrupted.load(std::sync::atomic::Ordering::Relaxed) {
            stopped = true;
            break;
        }
        bar.set_message(label.clone());
        match children::run(child_args, &[("CNNBENCH_LABEL".into(), label.clone())])? {
            ChildRun::Done {
                file,
                checks_failed,
            } => {
                failed |= checks_failed;
                done.push((label.clone(), file));
            }
            ChildRun::Interrupted(file) => {
                done.push((label.clone(), file));
                stopped = true;
                break;
            }
        }
        // `--out` holds every finished configuration, as a single run's
        // holds every finished record.
        if let Some(path) = out.filter(|p| rewritable(p)) {
            write_atomic(path, &render(&done, format, false)?)?;
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let rendered = render(&done, format, !stopped)?;
    match out {
        Some(path) => {
            write_atomic(path, &rendered)?;
            note!(
                "cnnbench: wrote {} configurations to {}",
                done.len(),
                path.display()
            );
        }
        None => crate::output::print(&rendered)?,
    }
    if stopped {
        note!(
            "cnnbench: {}; kept {} finished configurations and the records of the one stopped",
            crate::signals::stopped_by(),
            done.iter().filter(|(_, f)| f.complete).count()
        );
        return Ok(crate::signals::exit_code());
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn lists_expand_into_every_combination() {
        let args = v("conv mb2ic8ih9oc16kh3 --threads 1,2 --dtype=f32,f16 --iters 3");
        let l = lists(&args);
        assert_eq!(l.len(), 2);
        let c = combinations(&args, &l);
        assert_eq!(c.len(), 4);
        assert_eq!(c[0].0, "threads=1 dtype=f32");
        assert_eq!(
            c[0].1,
            v("conv mb2ic8ih9oc16kh3 --threads=1 --dtype=f32 --iters 3")
        );
        assert_eq!(
            c[3].1,
            v("conv mb2ic8ih9oc16kh3 --threads=2 --dtype=f16 --iters 3")
        );
        assert!(lists(&v("conv x --threads 2 --algo all")).is_empty());
    }
}
