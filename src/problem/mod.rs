//! Step one of the pipeline: what to run. Convolution and RNN
//! descriptors, batch files and the built-in problem lists, and GEMM sizes.

mod builtin;
mod desc;
mod fields;
pub mod gemm;
#[cfg(test)]
mod proptests;
pub mod rnn;

pub use desc::ConvProblem;

use anyhow::{bail, Context, Result};

/// Reads problems from `builtin:NAME` or a benchdnn-style batch file: one
/// descriptor per line, `#` starts a comment, blank lines are skipped.
pub fn load_batch(source: &str) -> Result<Vec<ConvProblem>> {
    read_batch(source, builtin::CONV, ConvProblem::parse)
}

/// The convolution reader without the file and BOM handling, which the
/// property tests drive directly.
#[cfg(test)]
fn parse_lines(text: &str, origin: &str) -> Result<Vec<ConvProblem>> {
    parse_lines_with(text, origin, ConvProblem::parse)
}

/// What `load_batch` and `rnn::load_rnn_batch` share: `source` is
/// `builtin:NAME`, looked up in `lists` (each kind of problem has its own,
/// so a list of convolutions is never read as RNNs), or a file path; each
/// problem line goes through `parse`.
fn read_batch<T>(
    source: &str,
    lists: &[(&str, &'static str)],
    parse: impl FnMut(&str) -> Result<T>,
) -> Result<Vec<T>> {
    if let Some(name) = source.strip_prefix("builtin:") {
        let Some(list) = builtin::lookup(lists, name) else {
            bail!(
                "unknown built-in list '{name}' (known: {})",
                builtin::names(lists).join(", ")
            );
        };
        return parse_lines_with(list, &format!("builtin:{name}"), parse);
    }
    // Capped while read: `--from /dev/zero` ends in one line, not in the
    // OOM killer.
    let text = crate::bounded_read::read_text(
        std::path::Path::new(source),
        crate::bounded_read::DESCRIPTOR_LIST_BYTES,
        "a descriptor list",
    )
    .with_context(|| format!("cannot read '{source}'"))?;
    // A UTF-8 byte order mark, as some editors write, is not part of the
    // first problem.
    parse_lines_with(
        text.strip_prefix('\u{feff}').unwrap_or(&text),
        source,
        parse,
    )
}

/// Splits batch text into problem lines (`#` to the end of a line is a
/// comment; blank lines are skipped) and parses each, naming
/// `origin:line` in an error so that it can be found in the file.
fn parse_lines_with<T>(
    text: &str,
    origin: &str,
    mut parse: impl FnMut(&str) -> Result<T>,
) -> Result<Vec<T>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let p = parse(line).with_context(|| format!("{origin}:{}", i + 1))?;
        out.push(p);
    }
    if out.is_empty() {
        bail!("{origin} holds no problems");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resnet50_has_23_distinct_convolutions() {
        let list = load_batch("builtin:resnet50").unwrap();
        assert_eq!(list.len(), 23);
        let mut shapes: Vec<_> = list.iter().map(|p| p.shape).collect();
        shapes.sort_by_key(|s| format!("{s:?}"));
        shapes.dedup();
        assert_eq!(shapes.len(), 23, "duplicates in the list");
        assert!(list.iter().all(|p| p.shape.mb == 16 && p.name.is_some()));
        // 7 of them are 3x3, one is the 7x7 stem, the rest 1x1.
        assert_eq!(list.iter().filter(|p| p.shape.kh == 3).count(), 7);
        assert_eq!(list.iter().filter(|p| p.shape.kh == 7).count(), 1);
        // Forward work of the distinct layers: 62.97 GFLOP at batch 16
        // (the whole network, with its repeated blocks, is ~8.2 GFLOP/image).
        let gflop: f64 = list.iter().map(|p| p.shape.flops() as f64).sum::<f64>() / 1e9;
        assert!((gflop - 62.966).abs() < 0.01, "{gflop}");
    }

    #[test]
    fn batch_file_comments_and_errors_carry_line_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("convs.txt");
        std::fs::write(
            &f,
            "# a comment\n\nmb1ic4ih8oc4kh3 # trailing\nic4ih8oc4kh3xx\n",
        )
        .unwrap();
        let e = format!("{:#}", load_batch(f.to_str().unwrap()).unwrap_err());
        assert!(e.contains("convs.txt:4"), "{e}");
        std::fs::write(&f, "# only comments\n").unwrap();
        assert!(
            format!("{:#}", load_batch(f.to_str().unwrap()).unwrap_err()).contains("no problems")
        );
        assert!(
            format!("{:#}", load_batch("builtin:nope").unwrap_err()).contains("unknown built-in")
        );
    }
}
