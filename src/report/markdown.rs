//! A markdown report from merged runs: the environments, the best
//! algorithm per problem and run, speedups against a baseline, thread
//! scaling, and charts.

use super::charts::{self, Series};
use super::merge::Run;
use super::models::ModelRun;
pub use super::options::{ChartsDir, Options};
use crate::results::store::Unreadable;
use crate::results::Record;
use anyhow::{bail, Result};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write;

/// What a row of the comparison is: problem, direction, dtype, layout.
type Key = (String, String, String, String);

fn key(r: &Record) -> Key {
    (
        unnamed(&r.problem).to_string(),
        r.dir.to_string(),
        r.dtype.to_string(),
        r.layout.clone(),
    )
}

/// A descriptor without its `n"name"`, so that the same problem matches
/// whether or not a run named it.
pub fn unnamed(desc: &str) -> &str {
    desc.find("n\"").map_or(desc, |i| &desc[..i])
}

/// Per label, the best (lowest median) record of every key, in the order
/// keys first appear.
struct Table {
    keys: Vec<Key>,
    /// How to show each key's problem: with a layer name where a run gave one.
    shown: BTreeMap<Key, String>,
    labels: Vec<String>,
    best: BTreeMap<(String, Key), Record>,
}

fn best_per_label(runs: &[Run]) -> Table {
    let mut keys: Vec<Key> = Vec::new();
    let mut labels: Vec<String> = Vec::new();
    let mut best: BTreeMap<(String, Key), Record> = BTreeMap::new();
    let mut shown: BTreeMap<Key, String> = BTreeMap::new();
    // Seen sets beside the ordered lists: `contains` on a list made this
    // quadratic in runs and records.
    let mut seen_labels: HashSet<String> = HashSet::new();
    let mut seen_keys: HashSet<Key> = HashSet::new();
    for run in runs {
        if seen_labels.insert(run.label.clone()) {
            labels.push(run.label.clone());
        }
        for r in &run.file.records {
            let k = key(r);
            if seen_keys.insert(k.clone()) {
                keys.push(k.clone());
            }
            let named = r.problem.len() > k.0.len();
            if named || !shown.contains_key(&k) {
                shown
                    .entry(k.clone())
                    .and_modify(|s| {
                        if named {
                            *s = r.problem.clone()
                        }
                    })
                    .or_insert(r.problem.clone());
            }
            let slot = (run.label.clone(), k);
            if best.get(&slot).is_none_or(|b| r.ms.median < b.ms.median) {
                best.insert(slot, r.clone());
            }
        }
    }
    Table {
        keys,
        shown,
        labels,
        best,
    }
}

/// The label a selector picks: an exact label, `key=value` as it appears
/// in labels (`threads=1`), or a unique part of a label.
pub fn select(labels: &[String], selector: &str) -> Result<String> {
    if let Some(l) = labels.iter().find(|l| *l == selector) {
        return Ok(l.clone());
    }
    let hits: Vec<&String> = labels.iter().filter(|l| l.contains(selector)).collect();
    match hits.as_slice() {
        [one] => Ok((*one).clone()),
        [] => bail!(
            "--baseline '{selector}' matches no run (runs: {})",
            labels.join(", ")
        ),
        many => bail!(
            "--baseline '{selector}' matches several runs ({}); be more specific",
            many.iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Geometric mean of positive values.
pub fn geomean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp())
}

/// Speedup and parallel efficiency of (threads, time) points against the
/// fewest threads: speedup = t(min) / t(n), efficiency = speedup / (n / min).
pub fn scaling(points: &[(usize, f64)]) -> Vec<(usize, f64, f64)> {
    let mut p = points.to_vec();
    p.sort_by_key(|&(n, _)| n);
    let Some(&(n0, t0)) = p.first() else {
        return vec![];
    };
    p.iter()
        .map(|&(n, t)| {
            let s = t0 / t;
            (n, s, s / (n as f64 / n0 as f64))
        })
        .collect()
}

/// The report: the layer sections over `runs` (conv and gemm), then the
/// model sections over `models` (either may be empty), then with
/// `--published` the published tables beside them.
pub fn render(
    runs: &[Run],
    models: &[ModelRun],
    unreadable: &[Unreadable],
    opts: &Options,
) -> Result<String> {
    let mut md = String::new();
    writeln!(md, "# cnnbench report\n")?;
    if !runs.is_empty() {
        layer_sections(&mut md, runs, opts)?;
    }
    // Parsed only when asked for, and kept apart from everything measured.
    let published = if opts.published {
        Some(super::published::load()?)
    } else {
        None
    };
    if !models.is_empty() {
        super::models::render(&mut md, models, opts)?;
        super::comparisons::render(&mut md, models, published.as_ref())?;
    }
    if let Some(p) = &published {
        super::published::render(&mut md, models, p)?;
    }
    not_read(&mut md, unreadable)?;
    Ok(md)
}

/// `text` as a markdown code span, fenced with one more backtick than its
/// longest run of backticks, so a path with backticks cannot break it.
fn code_span(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    let pad = if text.starts_with('`') || text.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{text}{pad}{fence}")
}

/// The inputs left out because they could not be read, so that a report
/// never silently covers less than it was given.
fn not_read(md: &mut String, unreadable: &[Unreadable]) -> Result<()> {
    if unreadable.is_empty() {
        return Ok(());
    }
    writeln!(md, "## Not read\n")?;
    writeln!(
        md,
        "{} of the inputs could not be read and are not in this report:\n",
        unreadable.len()
    )?;
    for u in unreadable {
        writeln!(
            md,
            "- {}: {}",
            code_span(&u.path.display().to_string()),
            u.why.replace(['\n', '\r'], " ")
        )?;
    }
    writeln!(md)?;
    Ok(())
}

fn layer_sections(md: &mut String, runs: &[Run], opts: &Options) -> Result<()> {
    let md = &mut *md;
    let t = best_per_label(runs);
    writeln!(
        md,
        "{} runs, {} records, {} problems. Times are the median of each record's timed runs; where a run timed several algorithms, the fastest is shown.\n",
        runs.len(),
        runs.iter().map(|r| r.file.records.len()).sum::<usize>(),
        t.keys.len()
    )?;
    environments(md, runs)?;
    problems(md, &t, opts)?;
    if t.labels.len() > 1 {
        speedups(md, &t, opts)?;
    }
    thread_scaling(md, runs, &t, opts)?;
    costs(md, runs, opts)?;
    Ok(())
}

/// Images per second of one timed call: the batch over the median time.
fn images_per_sec(r: &Record) -> Option<f64> {
    let mb = if r.dir == crate::results::Dir::Gemm {
        return None;
    } else {
        crate::problem::ConvProblem::parse(&r.problem)
            .ok()?
            .shape
            .mb
    };
    Some(mb as f64 / (r.ms.median * 1e-3))
}

/// For priced runs: what each timed layer-direction costs per million
/// images, and alone over a full training run.
fn costs(md: &mut String, runs: &[Run], opts: &Options) -> Result<()> {
    let priced: Vec<(&Run, super::cost::Price)> = runs
        .iter()
        .filter_map(|r| {
            r.file
                .environment
                .price
                .clone()
                .or(opts.price.clone())
                .map(|p| (r, p))
        })
        .collect();
    if priced.is_empty() {
        return Ok(());
    }
    writeln!(
        md,
        "## Cost
"
    )?;
    writeln!(
        md,
        "Per layer and direction, on its own: images per second at the problem's batch, dollars per million images, and the hours and dollars it alone would take over {} epochs of {} images.
",
        opts.epochs, opts.dataset_images
    )?;
    writeln!(
        md,
        "| run | price | problem | dir | images/s | $ / 1M images | hours | $ |"
    )?;
    writeln!(md, "|---|---|---|---|---:|---:|---:|---:|")?;
    for (run, price) in priced {
        let what = match (&price.instance, price.date.is_empty()) {
            (Some(i), false) => format!("${:.3}/h ({i}, {})", price.usd_per_hour, price.date),
            (Some(i), true) => format!("${:.3}/h ({i})", price.usd_per_hour),
            (None, _) => format!("${:.3}/h", price.usd_per_hour),
        };
        for r in &run.file.records {
            let Some(ips) = images_per_sec(r) else {
                continue;
            };
            let (hours, usd) =
                super::cost::training(ips, price.usd_per_hour, opts.epochs, opts.dataset_images);
            writeln!(
                md,
                "| {} | {} | `{}` | {} | {:.1} | {:.4} | {:.2} | {:.2} |",
                run.label,
                what,
                r.problem,
                r.dir,
                ips,
                super::cost::usd_per_million_images(ips, price.usd_per_hour),
                hours,
                usd
            )?;
        }
    }
    writeln!(md)?;
    Ok(())
}

fn environments(md: &mut String, runs: &[Run]) -> Result<()> {
    writeln!(md, "## Runs\n")?;
    writeln!(
        md,
        "| label | device | threads | isa | libraries | cnnbench | when | file |"
    )?;
    writeln!(md, "|---|---|---:|---|---|---|---|---|")?;
    for r in runs {
        let e = &r.file.environment;
        let (device, libs) = match (&r.peer, &e.gpu) {
            (Some(p), _) => (format!("peer ({p})"), String::new()),
            (None, Some(g)) => (
                g.name.clone(),
                format!("cuDNN {}, cuBLAS {}", g.cudnn, g.cublas),
            ),
            (None, None) => (e.cpu.clone(), String::new()),
        };
        let file = r
            .path
            .file_name()
            .map_or(String::new(), |f| f.to_string_lossy().into_owned());
        let incomplete = if r.file.complete {
            ""
        } else {
            " (stopped early)"
        };
        writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | `{}`{} |",
            r.label,
            device,
            if r.peer.is_some() {
                String::new()
            } else {
                e.threads.to_string()
            },
            e.isa,
            libs,
            e.cnnbench.git,
            e.timestamp,
            file,
            incomplete
        )?;
    }
    writeln!(md)?;
    Ok(())
}

fn problems(md: &mut String, t: &Table, opts: &Options) -> Result<()> {
    writeln!(md, "## Best time per problem\n")?;
    writeln!(
        md,
        "| # | problem | dir | dtype | layout | run | algorithm | median ms | GFLOP/s | % peak |"
    )?;
    writeln!(md, "|---:|---|---|---|---|---|---|---:|---:|---:|")?;
    // Per key, the labels that ran it in label order, from one pass over
    // the table: asking every label about every key was quadratic.
    let order: HashMap<&str, usize> = t
        .labels
        .iter()
        .enumerate()
        .map(|(i, l)| (l.as_str(), i))
        .collect();
    let mut by_key: HashMap<&Key, Vec<(usize, &String, &Record)>> = HashMap::new();
    for ((l, k), r) in &t.best {
        by_key.entry(k).or_default().push((
            order.get(l.as_str()).copied().unwrap_or(usize::MAX),
            l,
            r,
        ));
    }
    for ran in by_key.values_mut() {
        ran.sort_by_key(|(i, _, _)| *i);
    }
    for (i, k) in t.keys.iter().enumerate() {
        for &(_, l, r) in by_key.get(k).into_iter().flatten() {
            writeln!(
                md,
                "| {} | `{}` | {} | {} | {} | {} | {} | {:.3} | {:.1} | {} |",
                i + 1,
                t.shown.get(k).unwrap_or(&k.0),
                k.1,
                k.2,
                k.3,
                l,
                r.algo,
                r.ms.median,
                r.gflops,
                r.peak_fraction
                    .map_or("-".into(), |f| format!("{:.1}", f * 100.0))
            )?;
        }
    }
    writeln!(md)?;
    if let Some(c) = &opts.charts {
        let series: Vec<Series> = t
            .labels
            .iter()
            .map(|l| {
                let v = t
                    .keys
                    .iter()
                    .map(|k| t.best.get(&(l.clone(), k.clone())).map(|r| r.gflops))
                    .collect();
                (l.clone(), v)
            })
            .collect();
        let name = "gflops.svg";
        charts::grouped_bars(
            &c.dir.join(name),
            "GFLOP/s per problem (best algorithm)",
            "GFLOP/s",
            t.keys.len(),
            &series,
        )?;
        writeln!(md, "![GFLOP/s per problem]({}{name})\n", c.link_prefix)?;
    }
    Ok(())
}

fn speedups(md: &mut String, t: &Table, opts: &Options) -> Result<()> {
    let base = match &opts.baseline {
        Some(sel) => select(&t.labels, sel)?,
        None => t.labels[0].clone(),
    };
    writeln!(md, "## Speedup over `{base}`\n")?;
    writeln!(
        md,
        "Baseline median time over each run's, on the problems both ran.\n"
    )?;
    writeln!(md, "| run | problems | geometric mean | min | max |")?;
    writeln!(md, "|---|---:|---:|---:|---:|")?;
    let mut bars: Vec<Series> = Vec::new();
    // Each label's problems and the baseline's, from one pass over the
    // table (each label asked about every problem was quadratic).
    let mut of_label: HashMap<&str, Vec<(&Key, &Record)>> = HashMap::new();
    for ((l, k), r) in &t.best {
        of_label.entry(l.as_str()).or_default().push((k, r));
    }
    let baseline: HashMap<&Key, &Record> = of_label
        .get(base.as_str())
        .into_iter()
        .flatten()
        .copied()
        .collect();
    let key_order: HashMap<&Key, usize> = t.keys.iter().enumerate().map(|(i, k)| (k, i)).collect();
    for l in t.labels.iter().filter(|l| **l != base) {
        let mut ran: Vec<(&Key, &Record)> = of_label.get(l.as_str()).cloned().unwrap_or_default();
        ran.sort_by_key(|(k, _)| key_order.get(k).copied().unwrap_or(usize::MAX));
        let s: Vec<f64> = ran
            .iter()
            .filter_map(|(k, o)| {
                let b = baseline.get(k)?;
                Some(b.ms.median / o.ms.median)
            })
            .collect();
        let Some(g) = geomean(&s) else { continue };
        let (lo, hi) = s
            .iter()
            .fold((f64::INFINITY, 0f64), |(a, b), &x| (a.min(x), b.max(x)));
        writeln!(md, "| {l} | {} | {g:.3} | {lo:.3} | {hi:.3} |", s.len())?;
        bars.push((l.clone(), vec![Some(g)]));
    }
    writeln!(md)?;
    if let (Some(c), false) = (&opts.charts, bars.is_empty()) {
        let name = "speedup.svg";
        charts::grouped_bars(
            &c.dir.join(name),
            &format!("Speedup over {base} (geometric mean)"),
            "speedup",
            1,
            &bars,
        )?;
        writeln!(md, "![speedup]({}{name})\n", c.link_prefix)?;
    }
    Ok(())
}

/// Runs of cnnbench on the CPU that differ only in threads (same host,
/// CPU, ISA and build), over the problems all of them ran.
fn thread_scaling(md: &mut String, runs: &[Run], t: &Table, opts: &Options) -> Result<()> {
    let mut groups: BTreeMap<(String, String, String, String), Vec<&Run>> = BTreeMap::new();
    for r in runs
        .iter()
        .filter(|r| r.peer.is_none() && r.file.environment.gpu.is_none())
    {
        let e = &r.file.environment;
        groups
            .entry((
                e.host.clone(),
                e.cpu.clone(),
                e.isa.clone(),
                e.cnnbench.git.clone(),
            ))
            .or_default()
            .push(r);
    }
    // Each label's best times, from one pass over the table (a pass per
    // group of runs was quadratic in runs).
    let mut best_of_label: HashMap<&str, Vec<(&Key, f64)>> = HashMap::new();
    for ((label, k), r) in &t.best {
        best_of_label
            .entry(label.as_str())
            .or_default()
            .push((k, r.ms.median));
    }
    for ((host, cpu, isa, _), group) in groups {
        let mut threads: Vec<usize> = group.iter().map(|r| r.file.environment.threads).collect();
        threads.sort_unstable();
        threads.dedup();
        if threads.len() < 2 {
            continue;
        }
        // Total of the best medians over the problems every thread count
        // ran. The best of every (threads, problem), from one pass over
        // the table (looking each up per label and problem was quadratic).
        let mut threads_of: HashMap<&str, Vec<usize>> = HashMap::new();
        for r in &group {
            let ns = threads_of.entry(r.label.as_str()).or_default();
            if !ns.contains(&r.file.environment.threads) {
                ns.push(r.file.environment.threads);
            }
        }
        let mut best: HashMap<(usize, &Key), f64> = HashMap::new();
        for (label, ns) in &threads_of {
            for &(k, ms) in best_of_label.get(label).into_iter().flatten() {
                for &n in ns {
                    let m = best.entry((n, k)).or_insert(ms);
                    *m = m.min(ms);
                }
            }
        }
        let best_ms = |n: usize, k: &Key| best.get(&(n, k)).copied();
        let common: Vec<&Key> = t
            .keys
            .iter()
            .filter(|k| threads.iter().all(|&n| best_ms(n, k).is_some()))
            .collect();
        if common.is_empty() {
            continue;
        }
        let points: Vec<(usize, f64)> = threads
            .iter()
            .map(|&n| (n, common.iter().filter_map(|k| best_ms(n, k)).sum()))
            .collect();
        writeln!(md, "## Thread scaling on {host} ({cpu}, {isa})\n")?;
        writeln!(
            md,
            "Sum of the best median times over the {} problems every thread count ran.\n",
            common.len()
        )?;
        writeln!(md, "| threads | total ms | speedup | efficiency |")?;
        writeln!(md, "|---:|---:|---:|---:|")?;
        let rows = scaling(&points);
        for ((n, s, eff), (_, ms)) in rows.iter().zip(&points) {
            writeln!(md, "| {n} | {ms:.3} | {s:.2} | {:.0}% |", eff * 100.0)?;
        }
        writeln!(md)?;
        if let Some(c) = &opts.charts {
            let name = format!(
                "scaling-{}.svg",
                host.replace(|ch: char| !ch.is_ascii_alphanumeric(), "_")
            );
            let n0 = rows[0].0 as f64;
            charts::lines(
                &c.dir.join(&name),
                &format!("Thread scaling on {host}"),
                "threads",
                "speedup",
                &[
                    (
                        "measured".into(),
                        rows.iter().map(|&(n, s, _)| (n as f64, s)).collect(),
                    ),
                    (
                        "ideal".into(),
                        rows.iter()
                            .map(|&(n, _, _)| (n as f64, n as f64 / n0))
                            .collect(),
                    ),
                ],
            )?;
            writeln!(md, "![thread scaling]({}{name})\n", c.link_prefix)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_spans_survive_backticks() {
        assert_eq!(code_span("a/b.json"), "`a/b.json`");
        assert_eq!(code_span("a`b``c"), "```a`b``c```");
        assert_eq!(code_span("`x"), "`` `x ``");
    }

    #[test]
    fn speedup_and_efficiency_arithmetic() {
        assert!((geomean(&[2.0, 8.0]).unwrap() - 4.0).abs() < 1e-12);
        assert_eq!(geomean(&[]), None);
        let s = scaling(&[(4, 30.0), (1, 100.0), (2, 55.0)]);
        assert_eq!(s[0], (1, 1.0, 1.0));
        assert!((s[1].1 - 100.0 / 55.0).abs() < 1e-12);
        assert!((s[2].2 - (100.0 / 30.0) / 4.0).abs() < 1e-12);
    }

    #[test]
    fn names_do_not_split_problems() {
        assert_eq!(
            unnamed("mb16ic64ih56oc64oh56kh1n\"resnet50:layer1.0.conv1\""),
            "mb16ic64ih56oc64oh56kh1"
        );
        assert_eq!(
            unnamed("mb16ic64ih56oc64oh56kh1"),
            "mb16ic64ih56oc64oh56kh1"
        );
    }

    #[test]
    fn baseline_selectors() {
        let labels: Vec<String> = ["threads=1", "threads=2", "peer:pytorch-2.15.0"]
            .map(String::from)
            .to_vec();
        assert_eq!(select(&labels, "threads=1").unwrap(), "threads=1");
        assert_eq!(select(&labels, "pytorch").unwrap(), "peer:pytorch-2.15.0");
        assert!(select(&labels, "threads")
            .unwrap_err()
            .to_string()
            .contains("several"));
        assert!(select(&labels, "gpu")
            .unwrap_err()
            .to_string()
            .contains("matches no run"));
    }
}
