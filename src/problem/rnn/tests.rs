use super::desc::MAX_DIM;
use super::line::parse_line;
use super::*;
use crate::proptest_support::config;
use clap::ValueEnum;
use proptest::prelude::*;

const L2R: Direction = Direction::Left2Right;

fn parse(s: &str) -> RnnProblem {
    RnnProblem::parse(s, Cell::Lstm, L2R).unwrap_or_else(|e| panic!("{s}: {e:#}"))
}

fn err(s: &str) -> String {
    format!("{:#}", RnnProblem::parse(s, Cell::Lstm, L2R).expect_err(s))
}

fn line_err(s: &str) -> String {
    format!("{:#}", parse_line(s, Cell::Lstm, L2R).expect_err(s))
}

#[test]
fn defaults_follow_benchdnn() {
    let p = parse("sic4");
    assert_eq!(
        (p.layers, p.t, p.mb, p.sic, p.slc, p.dhc, p.dic),
        (1, 1, 2, 4, 4, 4, 4)
    );
    assert_eq!((p.cell, p.direction, p.name), (Cell::Lstm, L2R, None));
    // dic defaults to dhc, and dhc to sic.
    let p = parse("l1t25mb16sic512");
    assert_eq!((p.t, p.mb, p.slc, p.dhc, p.dic), (25, 16, 512, 512, 512));
}

#[test]
fn every_key_and_both_name_forms() {
    let p = parse(r#"l3_t5_mb7_sic8_slc6_dhc8_dic8_n"all keys: here""#);
    assert_eq!(
        (p.layers, p.t, p.mb, p.sic, p.slc, p.dhc, p.dic),
        (3, 5, 7, 8, 6, 8, 8)
    );
    assert_eq!(p.name.as_deref(), Some("all keys: here"));
    // Keys in any order, leading zeros, underscores anywhere.
    let q = parse("_dic8dhc8slc6sic8mb07t5l3__");
    assert_eq!((q.layers, q.t, q.mb, q.slc), (3, 5, 7, 6));
    // benchdnn's unquoted name runs to the end.
    let n = parse("l1t2mb2sic4_ndeepbench-gru-h4:x");
    assert_eq!(n.name.as_deref(), Some("deepbench-gru-h4:x"));
}

#[test]
fn cells_and_directions() {
    assert_eq!(Cell::ALL.map(Cell::gates), [1, 1, 4, 3]);
    assert_eq!(Direction::ALL.map(Direction::directions), [1, 1, 2, 2]);
    assert_eq!(Direction::ALL.map(|d| d.output_channels(5)), [5, 5, 10, 5]);
    for c in Cell::ALL {
        assert_eq!(Cell::from_str(c.name(), false), Ok(c));
    }
    for d in Direction::ALL {
        assert_eq!(Direction::from_str(d.name(), false), Ok(d));
    }
    assert_eq!(
        Direction::from_str("concat", false),
        Ok(Direction::BidirectionalConcat)
    );
}

#[test]
fn canonical_round_trips() {
    for s in [
        "l1t25mb16sic512",
        "l2t3mb2sic6slc4",
        r#"l4t1mb1sic3slc1000n"a name with spaces""#,
        "l1t1mb2sic4nplain",
    ] {
        for cell in Cell::ALL {
            for direction in Direction::ALL {
                let p = RnnProblem::parse(s, cell, direction).unwrap();
                let again = RnnProblem::parse(&p.to_string(), cell, direction).unwrap();
                assert_eq!(p, again, "{s} -> {p}");
            }
        }
    }
    assert_eq!(parse("sic4").to_string(), "l1t1mb2sic4");
    assert_eq!(
        parse("t5_sic4_slc3_dhc4_dic4_nx").to_string(),
        r#"l1t5mb2sic4slc3n"x""#
    );
}

#[test]
fn bad_descriptors_are_one_named_line() {
    for (desc, has) in [
        ("", "empty"),
        ("l1t2mb2", "'sic' is missing"),
        ("l1t0mb2sic4", "'t' must be between 1 and 1048576, got 0"),
        ("l0sic4", "'l' must be between 1"),
        ("mb0sic4", "'mb' must be between 1"),
        ("sic0", "'sic' must be between 1"),
        ("sic4slc0", "'slc' must be between 1"),
        ("sic1048577", "got 1048577"),
        ("sic4dhc0", "'dhc' must be between 1"),
        ("sic4dic0", "'dic' must be between 1"),
        ("t99999999999999999999999sic4", "too large"),
        (
            "l1t2mb2sic4dic8",
            "projection (dic != dhc) is not supported",
        ),
        ("sic4dhc8dic4", "projection (dic != dhc) is not supported"),
        ("sic4dhc8", "sic4 != dhc8"),
        ("l1t2mb2sic4xyz", "unknown token 'xyz'"),
        ("l1t2mb2sic4_5", "number '5' has no key"),
        ("l1t2mb2sic4t3", "'t' given twice"),
        ("l1t-2sic4", "must be followed by a number, got '-'"),
        ("sic4mb", "got end of input"),
        ("sic4 t2", "unknown token ' t'"),
        ("sic4n\"open", "unterminated"),
        ("sic4n\"a\"t2", "comes last"),
        ("sic4n\"a\"n\"b\"", "'n' given twice"),
        ("sic4n", "empty name"),
        ("sic4n\"\"", "empty name"),
        ("sic4na\"b", "quote inside"),
        ("sic4na b", "space in the unquoted name"),
        ("sic4n\"a#b\"", "'#'"),
        ("sic4\nt2", "character '\\n' at byte 4"),
        ("sic4\u{1b}[2J", "character '\\u{1b}'"),
        ("sic4né", "character '\\u{e9}'"),
        (
            "l1048576t1048576mb1048576sic1048576",
            "gate activations kept for the backward pass",
        ),
    ] {
        let e = err(desc);
        assert!(e.contains(has), "{desc:?}: wanted {has:?} in {e}");
        assert!(!e.contains('\n') && !e.contains('\u{1b}'), "{desc:?}: {e}");
        assert!(e.starts_with("in problem '"), "{e}");
    }
    assert!(err("l1t2mb2sic4xyz").contains("'l1t2mb2sic4xyz'"));
    assert!(err("sic4\nt2").contains(r"'sic4\nt2'"));
}

#[test]
fn sizes_at_the_limit_are_counted_not_wrapped() {
    // LSTM, 2^20 steps of 2^20 sequences, 512 wide: 2^62 FLOPs, which
    // a u64 holds; twice as wide, 2^64, which it does not.
    let p = parse("l1t1048576mb1048576sic512");
    assert_eq!(p.checked_flops().unwrap(), 1u64 << 62);
    assert_eq!(p.weights_len(), 4 * 512 * (512 + 512 + 2));
    assert!(err("l1t1048576mb1048576sic1024").contains("the FLOP count overflows 64 bits"));
    // Every size at the limit: the weights still fit (about 2^63
    // elements), the gate activations kept for the backward pass
    // (2^82) do not.
    let wide = err("l1048576t1048576mb1048576sic1048576");
    assert!(wide.contains("gate activations"), "{wide}");
}

#[test]
fn flops_and_weights_by_hand() {
    // GRU (3 gates), two layers, both directions concatenated: layer 0
    // reads slc 3, layer 1 reads 2·dhc = 8.
    let p =
        RnnProblem::parse("l2t5mb2sic4slc3", Cell::Gru, Direction::BidirectionalConcat).unwrap();
    let (gh, tb) = (3 * 4, 5 * 2);
    let want = 2 * (2 * tb * gh * (3 + 4) + 2 * tb * gh * (8 + 4));
    assert_eq!(p.checked_flops(), Some(want as u64));
    assert_eq!(p.weights_len(), 2 * (gh * (3 + 4 + 2) + gh * (8 + 4 + 2)));
    // Summing the directions keeps the next layer's input at dhc.
    let s = RnnProblem::parse("l2t5mb2sic4slc3", Cell::Gru, Direction::BidirectionalSum).unwrap();
    assert_eq!(s.weights_len(), 2 * (gh * (3 + 4 + 2) + gh * (4 + 4 + 2)));
}

#[test]
fn option_prefixed_lines() {
    let p = parse_line(
        "--cell=gru --direction=bidirectional-concat  l1t25mb16sic512",
        Cell::Lstm,
        L2R,
    )
    .unwrap();
    assert_eq!(
        (p.cell, p.direction, p.t),
        (Cell::Gru, Direction::BidirectionalConcat, 25)
    );
    // No options: the defaults passed in.
    let p = parse_line("sic4", Cell::RnnTanh, Direction::Right2Left).unwrap();
    assert_eq!(
        (p.cell, p.direction),
        (Cell::RnnTanh, Direction::Right2Left)
    );
    // benchdnn's spellings.
    for (opts, cell) in [
        ("--alg=VANILLA_RNN", Cell::RnnRelu),
        ("--alg=VANILLA_RNN --activation=RELU", Cell::RnnRelu),
        ("--activation=tanh --alg=vanilla_rnn", Cell::RnnTanh),
        ("--alg=VANILLA_LSTM", Cell::Lstm),
        ("--alg=VANILLA_LSTM --activation=UNDEF", Cell::Lstm),
        ("--alg=LBR_GRU", Cell::Gru),
    ] {
        let p = parse_line(&format!("{opts} --direction=sum sic4"), Cell::RnnTanh, L2R)
            .unwrap_or_else(|e| panic!("{opts}: {e:#}"));
        assert_eq!(p.cell, cell, "{opts}");
        assert_eq!(p.direction, Direction::BidirectionalSum);
    }
    // A reproducer line reads back as the problem it came from.
    let p = RnnProblem::parse("l2t3mb4sic5slc7nx y", Cell::Gru, Direction::Right2Left);
    assert!(p.is_err());
    let p =
        RnnProblem::parse(r#"l2t3mb4sic5slc7n"x y""#, Cell::Gru, Direction::Right2Left).unwrap();
    let line = format!(
        "--cell={} --direction={} {p}",
        p.cell.name(),
        p.direction.name()
    );
    assert_eq!(parse_line(&line, Cell::Lstm, L2R).unwrap(), p);
}

#[test]
fn bad_options_are_one_line() {
    for (line, has) in [
        ("--cell=lstn sic4", "unknown cell 'lstn'"),
        ("--cell lstm sic4", "needs a value"),
        ("--cell=lstm --cell=gru sic4", "'--cell' given twice"),
        ("--direction=up sic4", "unknown direction 'up'"),
        ("--prop=FWD_D sic4", "unknown option '--prop'"),
        ("--cell=lstm", "no problem descriptor"),
        ("sic4 --cell=lstm", "after the descriptor"),
        ("--alg=VANILLA_GRU sic4", "LBR_GRU"),
        ("--alg=LBR_AUGRU sic4", "not in cuDNN"),
        ("--alg=VANILLA_RNN,VANILLA_LSTM sic4", "one value per line"),
        ("--alg=LSTM sic4", "unknown --alg 'LSTM'"),
        ("--alg=VANILLA_RNN --activation=LOGISTIC sic4", "logistic"),
        ("--alg=VANILLA_RNN --activation=UNDEF sic4", "not UNDEF"),
        (
            "--alg=VANILLA_LSTM --activation=TANH sic4",
            "only to --alg=VANILLA_RNN",
        ),
        ("--activation=TANH sic4", "needs --alg=VANILLA_RNN"),
        (
            "--cell=lstm --alg=VANILLA_LSTM sic4",
            "both --cell and --alg",
        ),
        ("--cell=lstm --activation=RELU sic4", "--cell=rnn-relu"),
        ("--cell=\u{1b}[2J sic4", "'\\u{1b}[2J'"),
        ("--cell=gru sic4dic8", "projection"),
    ] {
        let e = line_err(line);
        assert!(e.contains(has), "{line:?}: wanted {has:?} in {e}");
        assert!(!e.contains('\n') && !e.contains('\u{1b}'), "{line:?}: {e}");
    }
}

#[test]
fn batch_files_carry_line_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("rnns.txt");
    let path = f.to_str().unwrap();
    std::fs::write(
        &f,
        "\u{feff}--cell=gru l1t2sic4 # first\n\n# a comment\n  --direction=concat t3sic4  \nsic4xyz\n",
    )
    .unwrap();
    let e = format!("{:#}", load_rnn_batch(path, Cell::Lstm, L2R).unwrap_err());
    assert!(
        e.starts_with(&format!("{path}:5: in problem 'sic4xyz'")),
        "{e}"
    );
    std::fs::write(
        &f,
        "\u{feff}--cell=gru l1t2sic4 # first\n\n# a comment\n  --direction=concat t3sic4  \n",
    )
    .unwrap();
    let list = load_rnn_batch(path, Cell::Lstm, L2R).unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!((list[0].cell, list[0].direction), (Cell::Gru, L2R));
    assert_eq!(
        (list[1].cell, list[1].direction, list[1].t),
        (Cell::Lstm, Direction::BidirectionalConcat, 3)
    );
    std::fs::write(&f, "# nothing\n").unwrap();
    let e = format!("{:#}", load_rnn_batch(path, Cell::Lstm, L2R).unwrap_err());
    assert!(e.contains("no problems"), "{e}");
    // Each kind of list only where it can be read.
    let e = format!(
        "{:#}",
        load_rnn_batch("builtin:resnet50", Cell::Lstm, L2R).unwrap_err()
    );
    assert!(
        e.contains("unknown built-in list 'resnet50' (known: deepbench-rnn, small-rnn)"),
        "{e}"
    );
    let e = format!(
        "{:#}",
        crate::problem::load_batch("builtin:deepbench-rnn").unwrap_err()
    );
    assert!(e.contains("(known: resnet50)"), "{e}");
}

#[test]
fn the_small_list_reads_with_its_cells_directions_and_inputs() {
    let list = load_rnn_batch("builtin:small-rnn", Cell::Lstm, L2R).unwrap();
    assert_eq!(list.len(), 18);
    assert!(list.iter().all(|p| (64..=512).contains(&p.dhc)));
}

#[test]
fn deepbench_training_set() {
    let list = load_rnn_batch("builtin:deepbench-rnn", Cell::Lstm, L2R).unwrap();
    assert_eq!(list.len(), 52);
    let count = |c: Cell| list.iter().filter(|p| p.cell == c).count();
    assert_eq!(
        Cell::ALL.map(count),
        [12, 0, 22, 18],
        "rnn-relu, rnn-tanh, lstm, gru"
    );
    let mut shapes: Vec<_> = list
        .iter()
        .map(|p| (p.cell.name(), p.dhc, p.mb, p.t))
        .collect();
    shapes.sort();
    shapes.dedup();
    assert_eq!(shapes.len(), 52, "duplicates in the list");
    let mut names: Vec<_> = list.iter().filter_map(|p| p.name.as_deref()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 52, "names missing or repeated");
    for p in &list {
        assert_eq!(
            (p.layers, p.direction, p.slc, p.dic),
            (1, L2R, p.sic, p.dhc),
            "{p}"
        );
        let cell = if p.cell == Cell::RnnRelu {
            "vanilla"
        } else {
            p.cell.name()
        };
        let want = format!("deepbench-{cell}-h{}-mb{}-t{}", p.dhc, p.mb, p.t);
        assert_eq!(p.name.as_deref(), Some(want.as_str()));
    }
    // LSTM, hidden 512, batch 16, 25 steps: per step an input and a
    // recurrent GEMM, each [16 x 512] x [512 x 4·512]:
    // 2 · 25 · (16·2048·512 + 16·2048·512) = 1,677,721,600.
    let p = list
        .iter()
        .find(|p| p.name.as_deref() == Some("deepbench-lstm-h512-mb16-t25"))
        .unwrap();
    assert_eq!(p.checked_flops().unwrap(), 1_677_721_600);
    assert_eq!(p.checked_flops().unwrap(), 1_677_721_600);
    // weight_ih and weight_hh [2048, 512], two biases [2048].
    assert_eq!(p.weights_len(), 2 * 2048 * 512 + 2 * 2048);
    // The commented-out GRU stays out.
    assert!(!list.iter().any(|p| p.dhc == 2816 && p.t == 1500));
}

/// Any problem in range survives display and parse; cell and
/// direction ride outside the descriptor.
fn problem() -> impl Strategy<Value = RnnProblem> {
    (
        prop::sample::select(Cell::ALL.to_vec()),
        prop::sample::select(Direction::ALL.to_vec()),
        (1usize..=4, 1usize..=64, 1usize..=64),
        (1usize..=MAX_DIM, 1usize..=MAX_DIM),
        // Printable ASCII but the quote and '#'.
        prop::option::of("[ -!$-~]{1,12}"),
    )
        .prop_map(
            |(cell, direction, (layers, t, mb), (sic, slc), name)| RnnProblem {
                cell,
                direction,
                layers,
                t,
                mb,
                sic,
                slc,
                dhc: sic,
                dic: sic,
                name,
            },
        )
}

proptest! {
    #![proptest_config(config(500))]

    #[test]
    fn display_parses_back(p in problem()) {
        let again = RnnProblem::parse(&p.to_string(), p.cell, p.direction);
        prop_assert_eq!(again.ok(), Some(p));
    }

    /// Whatever the line, no panic, and an error is one line.
    #[test]
    fn any_line_is_read_or_refused_in_one_line(
        line in prop_oneof![
            ".{0,40}",
            "(--(cell|alg|activation|direction)=[A-Za-z_-]{0,12} ){0,3}[ltmbsicdhn_0-9\"]{0,24}",
        ]
    ) {
        if let Err(e) = parse_line(&line, Cell::Lstm, Direction::Left2Right) {
            let msg = format!("{e:#}");
            prop_assert!(!msg.trim().is_empty());
            prop_assert!(!msg.contains('\n') && !msg.contains('\r'), "{}", msg);
        }
    }
}
