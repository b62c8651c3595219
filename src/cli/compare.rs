//! `cnnbench compare`: the same benchmark once per cuDNN installation (or
//! per environment variant), each in a child process, side by side.

use super::children::{self, ChildRun};
use crate::driver::compare::{
    libraries_side_by_side, library_warnings, models_side_by_side, side_by_side, InfoFile,
    ModelFile,
};
use crate::note::note;
use crate::output::compare::SideBySide;
use crate::output::{self, Format, COMPARE_FORMATS};
use crate::results::store::RunFile;
use anyhow::{bail, Result};
use clap::Args;
use cnnbench_layers::cuda::DeviceInfo;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
#[command(after_help = "Examples:\n  \
    cnnbench compare --cudnn /opt/cudnn-9.1/lib --cudnn /opt/cudnn-9.10/lib -- conv --from builtin:resnet50 --dtype f16\n  \
    cnnbench compare --cudnn /opt/cudnn-9.1/lib --cudnn /usr/lib/x86_64-linux-gnu -- model resnet50 --device gpu --dtype f16\n  \
    cnnbench compare --cudnn /opt/cudnn-9.1/lib --cudnn /usr/lib/x86_64-linux-gnu -- info\n  \
    cnnbench compare --variant 1t:CNNBENCH_THREADS=1 --variant 2t:CNNBENCH_THREADS=2 -- conv mb16ic64ih56oc64oh56kh3ph1")]
pub struct CompareArgs {
    /// A folder holding a cuDNN (libcudnn.so.9); it goes first on LD_LIBRARY_PATH for one run
    #[arg(long, value_name = "DIR")]
    cudnn: Vec<PathBuf>,
    /// NAME:ENV=VALUE[,ENV=VALUE...]: one run with these environment variables (CNNBENCH_THREADS,
    /// CNNBENCH_ISA, or anything else)
    #[arg(long, value_name = "NAME:ENV=VALUE")]
    variant: Vec<String>,
    #[arg(long, short)]
    quiet: bool,
    #[arg(long, default_value = "table", value_parser = output::parser(COMPARE_FORMATS))]
    format: Format,
    /// The subcommand each run is: conv, gemm, model (its arguments after it), or info
    #[arg(last = true, required = true, value_name = "ARGS")]
    benchmark: Vec<String>,
}

/// One run of the comparison: its name and environment.
#[derive(Debug, PartialEq)]
pub struct Variant {
    pub name: String,
    pub env: Vec<(String, String)>,
}

pub fn parse_variant(s: &str) -> Result<Variant> {
    let Some((name, rest)) = s.split_once(':') else {
        bail!("bad --variant '{s}' (expected NAME:ENV=VALUE, e.g. 1t:CNNBENCH_THREADS=1)");
    };
    let mut env = Vec::new();
    for kv in rest.split(',') {
        match kv.split_once('=') {
            Some((k, v)) if !k.is_empty() => env.push((k.to_string(), v.to_string())),
            _ => bail!("bad --variant '{s}': '{kv}' is not ENV=VALUE"),
        }
    }
    if name.is_empty() {
        bail!("bad --variant '{s}': the name is empty");
    }
    Ok(Variant {
        name: name.to_string(),
        env,
    })
}

/// A `--cudnn` folder must exist and hold a cuDNN library: refused in one
/// line before any run otherwise (a wrong folder would silently time the
/// cuDNN already on the library path).
fn check_cudnn_folder(dir: &std::path::Path) -> Result<()> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| anyhow::anyhow!("--cudnn '{}': {e}", dir.display()))?;
    let has = entries
        .filter_map(|e| e.ok())
        .any(|e| e.file_name().to_string_lossy().starts_with("libcudnn.so"));
    if !has {
        bail!(
            "--cudnn '{}' holds no cuDNN (no libcudnn.so*)",
            dir.display()
        );
    }
    Ok(())
}

/// The runs report to `compare` through a file of its own: an `--out`
/// among their arguments would be dropped, so it is refused (the table
/// goes to stdout; redirect it).
fn check_children_args(args: &[String]) -> Result<()> {
    if let Some(a) = args
        .iter()
        .find(|a| *a == "--out" || a.starts_with("--out="))
    {
        bail!(
            "compare: '{}' after `--`: each run reports to compare itself; write the side-by-side table with a redirect (> FILE)",
            a.escape_debug()
        );
    }
    Ok(())
}

/// A variant that puts `dir` first on the library path.
pub fn cudnn_variant(dir: &std::path::Path, old_path: Option<&str>) -> Variant {
    let path = match old_path.filter(|p| !p.is_empty()) {
        Some(old) => format!("{}:{old}", dir.display()),
        None => dir.display().to_string(),
    };
    Variant {
        name: dir.display().to_string(),
        env: vec![("LD_LIBRARY_PATH".into(), path)],
    }
}

/// What the runs are, by subcommand: each is read and laid out its own way.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `conv`, `gemm`: one row per problem and direction.
    Records,
    /// `model`: one row per run and model (seed 004's form: GPU | cuDNN |
    /// forward | backward | total).
    Models,
    /// `info`: one row per run and library (file and version).
    Info,
}

pub fn run(args: CompareArgs) -> Result<ExitCode> {
    let kind = match args.benchmark.first().map(String::as_str) {
        Some("conv" | "gemm") => Kind::Records,
        Some("model") => Kind::Models,
        Some("info") => Kind::Info,
        _ => bail!(
            "compare runs conv, gemm, model or info: put `-- conv ...`, `-- gemm ...`, `-- model ...` or `-- info` last"
        ),
    };
    crate::signals::install()?;
    for d in &args.cudnn {
        check_cudnn_folder(d)?;
    }
    let old = std::env::var("LD_LIBRARY_PATH").ok();
    let mut variants: Vec<Variant> = args
        .cudnn
        .iter()
        .map(|d| cudnn_variant(d, old.as_deref()))
        .collect();
    for v in &args.variant {
        variants.push(parse_variant(v)?);
    }
    check_children_args(&args.benchmark)?;
    // A name is a row or column heading: a newline in it would split the
    // table.
    if let Some(v) = variants
        .iter()
        .find(|v| v.name.chars().any(char::is_control))
    {
        bail!(
            "the run named '{}' has a control character in its name: name it in plain text",
            v.name.escape_debug()
        );
    }
    let mut names = std::collections::HashSet::new();
    if let Some(v) = variants.iter().find(|v| !names.insert(v.name.as_str())) {
        bail!(
            "two runs are named '{}': each --cudnn folder and --variant needs its own name",
            v.name
        );
    }
    if variants.len() < 2 {
        bail!("compare needs at least two runs (--cudnn DIR or --variant NAME:ENV=VALUE, twice or more)");
    }
    let (table, libraries, stopped): (SideBySide, Vec<NamedLibraries>, Option<Stopped>) = match kind
    {
        Kind::Records => {
            let (runs, stopped) = run_all::<RunFile>(&args, &variants, children::Output::File)?;
            let libs = runs
                .iter()
                .map(|(n, f)| (n.clone(), f.environment.gpu.clone()))
                .collect();
            (side_by_side(&runs), libs, stopped)
        }
        Kind::Models => {
            let (runs, stopped) = run_all::<ModelFile>(&args, &variants, children::Output::File)?;
            let libs = runs
                .iter()
                .map(|(n, f)| (n.clone(), f.environment.gpu.clone()))
                .collect();
            (models_side_by_side(&runs), libs, stopped)
        }
        Kind::Info => {
            let (runs, stopped) = run_all::<InfoFile>(&args, &variants, children::Output::Stdout)?;
            let libs = runs
                .iter()
                .map(|(n, f)| (n.clone(), Some(f.gpu.as_device_info())))
                .collect();
            (libraries_side_by_side(&runs), libs, stopped)
        }
    };
    let folders: Vec<(String, PathBuf)> = args
        .cudnn
        .iter()
        .map(|d| (d.display().to_string(), d.clone()))
        .collect();
    for w in library_warnings(&libraries, !args.cudnn.is_empty(), &folders) {
        note!("cnnbench: warning: {w}");
    }
    crate::output::print(&table.render(args.format)?)?;
    if let Some(stop) = stopped {
        note!("cnnbench: {}", stop.kept(&variants));
        return Ok(crate::signals::exit_code());
    }
    Ok(ExitCode::SUCCESS)
}

/// Where a stop signal left a comparison: the variants that ran to the
/// end, and the one it stopped (if one was running).
struct Stopped {
    finished: usize,
    cut: Option<String>,
}

impl Stopped {
    /// The line that says what was kept: `stopped by SIGTERM; kept 1 of 3
    /// runs whole (a), b stopped early with its finished records; not run:
    /// c. They are in the table above (and in the results store, unless
    /// --no-save)`.
    fn kept(&self, variants: &[Variant]) -> String {
        let names = |vs: &[Variant]| {
            vs.iter()
                .map(|v| v.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let whole = &variants[..self.finished.min(variants.len())];
        let ran = self.finished + usize::from(self.cut.is_some());
        let rest = &variants[ran.min(variants.len())..];
        let mut line = format!(
            "{}; kept {} of {} runs whole",
            crate::signals::stopped_by(),
            whole.len(),
            variants.len()
        );
        if !whole.is_empty() {
            line += &format!(" ({})", names(whole));
        }
        if let Some(cut) = &self.cut {
            line += &format!(", {cut} stopped early with its finished records");
        }
        if !rest.is_empty() {
            line += &format!("; not run: {}", names(rest));
        }
        line + ". They are in the table above (and in the results store, unless --no-save)"
    }
}

/// A run's name and the GPU libraries it loaded.
type NamedLibraries = (String, Option<DeviceInfo>);

/// The runs that finished, each with its name, and where a signal stopped
/// them, if one did.
type Finished<T> = (Vec<(String, T)>, Option<Stopped>);

/// Runs every variant in turn (each a child process); stops at the first
/// signal, keeping what finished (and saying where it stopped).
fn run_all<T: serde::de::DeserializeOwned + Default>(
    args: &CompareArgs,
    variants: &[Variant],
    output: children::Output,
) -> Result<Finished<T>> {
    let bar = super::progress::bar(variants.len() as u64, args.quiet);
    let mut runs = Vec::new();
    let mut stopped = None;
    for v in variants {
        if crate::signals::stopped() {
            stopped = Some(Stopped {
                finished: runs.len(),
                cut: None,
            });
            break;
        }
        bar.set_message(v.name.clone());
        let mut env = v.env.clone();
        env.push(("CNNBENCH_LABEL".into(), v.name.clone()));
        match children::run_as::<T>(&args.benchmark, &env, output)? {
            ChildRun::Done { file, .. } => runs.push((v.name.clone(), file)),
            ChildRun::Interrupted(file) => {
                stopped = Some(Stopped {
                    finished: runs.len(),
                    cut: Some(v.name.clone()),
                });
                runs.push((v.name.clone(), file));
                break;
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    // A signal after the last child finished: everything was kept.
    if stopped.is_none() && crate::signals::stopped() {
        stopped = Some(Stopped {
            finished: runs.len(),
            cut: None,
        });
    }
    Ok((runs, stopped))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_parse() {
        let v = parse_variant("1t:CNNBENCH_THREADS=1,CNNBENCH_ISA=avx2").unwrap();
        assert_eq!(v.name, "1t");
        assert_eq!(v.env[1], ("CNNBENCH_ISA".into(), "avx2".into()));
        assert!(parse_variant("nocolon").is_err());
        assert!(parse_variant("x:NOVALUE").is_err());
        let c = cudnn_variant(std::path::Path::new("/opt/cudnn"), Some("/usr/lib"));
        assert_eq!(c.env[0].1, "/opt/cudnn:/usr/lib");
    }

    #[test]
    fn a_stopped_comparison_says_what_it_kept() {
        let vs: Vec<Variant> = ["a:X=1", "b:X=2", "c:X=3"]
            .iter()
            .map(|v| parse_variant(v).unwrap())
            .collect();
        let cut = Stopped {
            finished: 1,
            cut: Some("b".into()),
        };
        assert_eq!(
            cut.kept(&vs),
            "interrupted; kept 1 of 3 runs whole (a), b stopped early with its finished \
             records; not run: c. They are in the table above (and in the results store, \
             unless --no-save)"
        );
        let first = Stopped {
            finished: 0,
            cut: Some("a".into()),
        };
        assert!(first
            .kept(&vs)
            .starts_with("interrupted; kept 0 of 3 runs whole, a stopped early"));
        let after = Stopped {
            finished: 3,
            cut: None,
        };
        assert!(after
            .kept(&vs)
            .contains("kept 3 of 3 runs whole (a, b, c). They"));
    }
}
