//! Property tests over every subcommand's numeric options: any value, the
//! boundaries and overflow included (0, the caps and one past them,
//! u32::MAX, u64::MAX, 2^64, huge digit strings, negatives, floats), goes
//! through clap and the option's own checks with no panic, and ends in
//! success or one line of error. The checks are driven directly, never a
//! whole run.

use super::{clap_line, thread_count, Cli, Command, TimingArgs};
use crate::proptest_support::{check_error, config};
use clap::Parser;
use proptest::prelude::*;

/// A number as a user might type it: the edges, then anything.
fn number() -> impl Strategy<Value = String> {
    let edges = [
        "0",
        "1",
        "2",
        "7",
        "8",
        "64",
        "65",
        "1024",
        "1025",
        "4096",
        "4097",
        "8192",
        "8193",
        "1000000",
        "1000001",
        "10000000",
        "10000001",
        "2147483648",
        "4294967295",
        "4294967296",
        "9223372036854775807",
        "18446744073709551615",
        "18446744073709551616",
        "99999999999999999999999999999999",
        "-1",
        "1e400",
        "nan",
        "inf",
        "0.5",
        "",
        " 1",
        "0x10",
        "max",
    ];
    prop_oneof![
        proptest::sample::select(edges.to_vec()).prop_map(String::from),
        any::<u64>().prop_map(|n| n.to_string()),
        (0u32..64).prop_map(|k| (1u128 << k).to_string()),
        "[0-9]{1,40}",
    ]
}

/// Each subcommand's command line before its numeric option, and the
/// options that take a number (or a list of them).
const OPTIONS: &[(&[&str], &[&str])] = &[
    (
        &["conv", "mb1ic4ih8oc4kh3"],
        &[
            "--threads",
            "--batch",
            "--warmup",
            "--iters",
            "--min-time",
            "--seed",
            "--workspace-limit",
            "--price-per-hour",
        ],
    ),
    (
        &["gemm", "8x8x8"],
        &["--threads", "--warmup", "--iters", "--min-time", "--seed"],
    ),
    (
        &["rnn", "l1t2mb1sic4"],
        &["--threads", "--warmup", "--iters", "--min-time", "--seed"],
    ),
    (
        &["model", "resnet18"],
        &[
            "--batch",
            "--threads",
            "--warmup",
            "--iters",
            "--min-time",
            "--seed",
            "--gpus",
            "--workspace-limit",
            "--project-gpus",
            "--loader-threads",
            "--prefetch",
        ],
    ),
    (
        &["check", "--model", "alexnet"],
        &["--batch", "--threads", "--seed"],
    ),
    (&["info"], &["--threads"]),
    (
        &["allreduce"],
        &[
            "--sizes",
            "--gpus",
            "--warmup",
            "--iters",
            "--min-time",
            "--seed",
        ],
    ),
    (
        &["data", "synth", "d"],
        &["--images", "--classes", "--quality", "--seed"],
    ),
    (
        &["data", "bench", "d"],
        &[
            "--loader-threads",
            "--batch",
            "--size",
            "--images",
            "--warmup",
            "--prefetch",
            "--seed",
        ],
    ),
    (
        &["data", "dump", "d", "--out", "x.npy"],
        &["--index", "--size", "--seed"],
    ),
    (
        &["report", "r.json"],
        &["--epochs", "--dataset-images", "--price-per-hour"],
    ),
];

/// The checks a run makes of its numbers before anything runs, for the
/// options this test reaches: the timing policy and thread counts every
/// measuring subcommand shares, and `data`'s counts.
fn checked(cli: &Cli, argv: &[String]) -> anyhow::Result<()> {
    if let Command::Data(a) = &cli.command {
        return super::data::check_counts(a);
    }
    // The shared options, parsed again on their own (the subcommands'
    // fields are theirs).
    #[derive(Parser)]
    struct Shared {
        #[command(flatten)]
        timing: TimingArgs,
        #[arg(long)]
        threads: Option<usize>,
    }
    let mut shared = vec!["shared".to_string()];
    for w in argv.windows(2) {
        if ["--warmup", "--iters", "--min-time", "--seed", "--threads"].contains(&w[0].as_str()) {
            shared.extend(w.iter().cloned());
        }
    }
    if let Ok(s) = Shared::try_parse_from(&shared) {
        s.timing.policy()?;
        if s.threads.is_some() {
            thread_count(s.threads)?;
        }
    }
    Ok(())
}

/// No panic; an error is one line that says something.
fn one_line(argv: &[String]) -> Result<(), TestCaseError> {
    match Cli::try_parse_from(argv) {
        Err(e) => {
            use clap::error::ErrorKind;
            if !matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let line = clap_line(&e);
                prop_assert!(
                    !line.trim().is_empty() && !line.contains('\n'),
                    "{argv:?}: {line:?}"
                );
            }
        }
        Ok(cli) => {
            if let Err(e) = checked(&cli, argv) {
                check_error(&e)?;
                let msg = format!("{e:#}");
                prop_assert!(!msg.contains('\n'), "{argv:?}: {msg:?}");
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(400))]

    /// Every numeric option of every subcommand, one at a time.
    #[test]
    fn every_numeric_option_is_one_line_or_taken(
        which in 0..OPTIONS.len(),
        pick in any::<prop::sample::Index>(),
        value in number(),
    ) {
        let (base, options) = OPTIONS[which];
        let option = options[pick.index(options.len())];
        let mut argv: Vec<String> = std::iter::once("cnnbench").chain(base.iter().copied()).map(String::from).collect();
        argv.push(option.to_string());
        argv.push(value.clone());
        one_line(&argv)?;
        // The same value as `--option=value`, and in a comma list.
        argv.truncate(argv.len() - 2);
        argv.push(format!("{option}={value},{value}"));
        one_line(&argv)?;
    }

    /// The shared checks on their own: the timing policy's caps and the
    /// thread count, for any numbers at all.
    #[test]
    fn timing_and_threads_never_panic(
        warmup in proptest::option::of(any::<usize>()),
        iters in proptest::option::of(any::<usize>()),
        min_time in proptest::option::of(any::<f64>()),
        threads in proptest::option::of(any::<usize>()),
    ) {
        let t = TimingArgs { warmup, iters, min_time, seed: 1 };
        if let Err(e) = t.policy() {
            check_error(&e)?;
        }
        if let Err(e) = thread_count(threads) {
            check_error(&e)?;
        }
    }
}

#[test]
fn data_counts_past_their_caps_are_refused() {
    let err = |args: &[&str]| {
        let argv: Vec<&str> = std::iter::once("cnnbench")
            .chain(args.iter().copied())
            .collect();
        let Ok(cli) = Cli::try_parse_from(argv) else {
            panic!("{args:?} did not parse")
        };
        let Command::Data(a) = &cli.command else {
            panic!("not data")
        };
        super::data::check_counts(a).err().map(|e| format!("{e:#}"))
    };
    let bench = |o: &str, v: &str| err(&["data", "bench", "d", o, v]);
    assert_eq!(
        bench("--images", "18446744073709551615").as_deref(),
        Some("--images 18446744073709551615: expected 1 to 10000000")
    );
    assert!(bench("--images", "0").is_some());
    assert!(bench("--images", "10000000").is_none());
    assert_eq!(
        bench("--warmup", "1000000000").as_deref(),
        Some("--warmup 1000000000: expected 0 to 1000000 batches")
    );
    assert!(bench("--warmup", "1000000").is_none());
    let many = vec!["1"; 65].join(",");
    assert!(bench("--loader-threads", &many)
        .unwrap()
        .contains("at most 64"));
    assert!(err(&["data", "synth", "d", "--images", "10000001"]).is_some());
    assert!(err(&["data", "dump", "d", "--out", "x", "--size", "4097"]).is_some());
}
