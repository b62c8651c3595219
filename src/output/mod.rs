//! Every output format and renderer in one place: the one [`Format`] enum
//! (each subcommand accepts the formats it can render, and its `--help`
//! lists exactly those), aligned tables for people ([`table`]), JSON and
//! CSV for machines ([`writers`]), and the sink every layer subcommand
//! writes its records through ([`sink`]).

pub mod allreduce;
pub mod check;
pub mod compare;
pub mod data;
pub mod info;
pub mod model;
pub mod sink;
pub mod sweep;
pub mod table;
pub mod writers;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use std::io::Write;

/// What [`print`] returns when stdout's reader has gone (`| head`, or a
/// terminal hung up): `main` ends quietly, with exit code 141 (128 +
/// SIGPIPE, what a shell reports for a program SIGPIPE killed) or, after a
/// stop signal, that signal's code, instead of an error line.
#[derive(Debug)]
pub struct ClosedStdout;

impl std::fmt::Display for ClosedStdout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stdout was closed")
    }
}

impl std::error::Error for ClosedStdout {}

/// Writes `s` to stdout: every result goes through here, so that a closed
/// pipe ends the run quietly ([`ClosedStdout`]) and any other write error
/// (a full disk) is one error line, never a panic.
pub fn print(s: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(s.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(ClosedStdout.into()),
        // A hung-up terminal (after SIGHUP) fails writes with EIO.
        Err(e) if crate::signals::stopped() && e.raw_os_error() == Some(libc::EIO) => {
            Err(ClosedStdout.into())
        }
        Err(e) => Err(anyhow::anyhow!("writing to stdout: {e}")),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Csv,
    Json,
    Md,
    Benchdnn,
}

impl Format {
    pub const ALL: [Format; 5] = [
        Format::Table,
        Format::Csv,
        Format::Json,
        Format::Md,
        Format::Benchdnn,
    ];

    /// The name `--format` takes.
    pub fn name(self) -> &'static str {
        match self {
            Format::Table => "table",
            Format::Csv => "csv",
            Format::Json => "json",
            Format::Md => "md",
            Format::Benchdnn => "benchdnn",
        }
    }

    pub fn from_name(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// What a subcommand's `--format` accepts, each with what it means there.
pub type Accepted = &'static [(Format, &'static str)];

/// The formats of layer records (`conv`, `gemm`).
pub const RECORD_FORMATS: Accepted = &[
    (Format::Table, "Aligned text for people"),
    (Format::Csv, "One row per record, fixed header"),
    (Format::Json, "{\"environment\": ..., \"records\": [...]}"),
    (Format::Md, "A markdown table"),
];

/// The formats of `model`.
pub const MODEL_FORMATS: Accepted = &[
    (Format::Table, "Aligned text for people"),
    (
        Format::Csv,
        "One row per model (the columns scripts/peers/pytorch_model.py prints)",
    ),
    (
        Format::Json,
        "{\"environment\": ..., \"records\": [...]}; with --describe, the layer table",
    ),
    (Format::Md, "A markdown table"),
    (
        Format::Benchdnn,
        "With --describe: one benchdnn descriptor per convolution layer",
    ),
];

/// The formats of `compare`'s side-by-side table.
pub const COMPARE_FORMATS: Accepted = &[
    (Format::Table, "Aligned text for people"),
    (Format::Csv, "One row per problem, direction and precision"),
    (
        Format::Json,
        "An array of those rows, keyed by the column heads; times and ratios as numbers",
    ),
    (Format::Md, "A markdown table"),
];

/// The formats of `check` and `info`.
pub const TABLE_OR_JSON: Accepted = &[
    (Format::Table, "Aligned text for people"),
    (Format::Json, "The same as one JSON document"),
];

/// A `--format` parser accepting exactly `accepted`: anything else is
/// clap's one-line error naming the possible values (exit 2).
pub fn parser(accepted: Accepted) -> impl TypedValueParser<Value = Format> {
    PossibleValuesParser::new(
        accepted
            .iter()
            .map(|&(f, help)| PossibleValue::new(f.name()).help(help)),
    )
    .map(|name: String| Format::from_name(&name).unwrap_or(Format::Table))
}

/// `name` as one of `accepted`, or a one-line error naming them.
pub fn parse(name: &str, accepted: Accepted) -> anyhow::Result<Format> {
    accepted
        .iter()
        .map(|&(f, _)| f)
        .find(|f| f.name() == name)
        .ok_or_else(|| {
            let names: Vec<&str> = accepted.iter().map(|(f, _)| f.name()).collect();
            anyhow::anyhow!(
                "--format: invalid value '{name}' [possible values: {}]",
                names.join(", ")
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_subsets_refuse_the_rest() {
        for f in Format::ALL {
            assert_eq!(Format::from_name(f.name()), Some(f));
        }
        assert_eq!(parse("md", RECORD_FORMATS).unwrap(), Format::Md);
        let e = parse("benchdnn", RECORD_FORMATS).unwrap_err().to_string();
        assert_eq!(
            e,
            "--format: invalid value 'benchdnn' [possible values: table, csv, json, md]"
        );
    }
}
