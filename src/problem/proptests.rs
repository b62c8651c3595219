//! Property tests of the problem readers: convolution descriptors, GEMM
//! sizes and batch files. Whatever the input, each returns Ok or an error
//! that says something; it never panics. Parsed descriptors also survive
//! a round trip through their canonical form.
//!
//! Random strings rarely get past the tokenizer, so most strategies build
//! inputs from the real keys with awkward numbers (0, huge, past u64,
//! negative, missing) to reach the validation and the size arithmetic.

use super::{gemm, load_batch, parse_lines, ConvProblem};
use crate::proptest_support::{check_error, config};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use std::io::Write;

/// The 2-D keys the parser accepts, then the 3-D keys it refuses.
const KEYS_2D: [&str; 16] = [
    "mb", "ic", "ih", "iw", "oc", "oh", "ow", "kh", "kw", "sh", "sw", "ph", "pw", "dh", "dw", "g",
];
const KEYS_3D: [&str; 6] = ["id", "od", "kd", "sd", "pd", "dd"];

/// A number as a descriptor or GEMM size may spell it: mostly small (so
/// problems often validate), else 0, large, at and past the u64 limit,
/// half of it (doubling overflows), negative, empty or not a plain integer.
fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => (1u64..=16).prop_map(|n| n.to_string()),
        1 => Just("0".to_string()),
        1 => any::<u64>().prop_map(|n| n.to_string()),
        1 => any::<i64>().prop_map(|n| n.to_string()),
        2 => prop::sample::select(vec![
            u64::MAX.to_string(),
            (u64::MAX - 1).to_string(),
            (u64::MAX / 2).to_string(),
            (u64::MAX / 2 + 1).to_string(),
            "18446744073709551616".to_string(),
            "-1".to_string(),
            String::new(),
            "007".to_string(),
            "1e3".to_string(),
            "+1".to_string(),
            " 1".to_string(),
            "1.5".to_string(),
        ]),
        1 => "[0-9]{19,40}",
    ]
}

/// A name token: quoted (any text but a quote), unterminated, bare `n`,
/// or unquoted.
fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[^\"]{0,12}".prop_map(|s| format!("n\"{s}\"")),
        1 => ".{0,6}".prop_map(|s| format!("n\"{s}")),
        1 => Just("n".to_string()),
        1 => "[^\"]{0,6}".prop_map(|s| format!("n{s}")),
    ]
}

/// One token of a wild descriptor: any key (or junk) with any number.
fn token() -> impl Strategy<Value = String> {
    let mut keys: Vec<&str> = KEYS_2D.iter().chain(&KEYS_3D).copied().collect();
    keys.extend(["n", "x", "i", "k", "G", "MB", ""]);
    prop_oneof![
        8 => (prop::sample::select(keys), number()).prop_map(|(k, n)| format!("{k}{n}")),
        1 => name(),
        1 => "[^0-9]{1,2}",
    ]
}

/// Wild descriptors: tokens in any order, repeats included, between
/// optional underscores.
fn wild_descriptor() -> impl Strategy<Value = String> {
    prop::collection::vec(
        (token(), prop::sample::select(vec!["", "", "_", "__"])),
        0..12,
    )
    .prop_map(|parts| parts.into_iter().map(|(t, sep)| t + sep).collect())
}

/// Descriptors that often validate: each key at most once (the required
/// ones almost always), in any order, mostly with sizes that fit
/// together and now and then a wild number; sometimes a 3-D key or a
/// name. `oh`/`ow` are rarely given, as a guessed one seldom matches.
fn plausible_descriptor() -> impl Strategy<Value = String> {
    const BIG: &[u64] = &[1, 2, 3, 4, 7, 8, 13, 16, 56, 64];
    const SMALL: &[u64] = &[0, 1, 1, 1, 2, 3];
    let table: [(&'static str, f64, &'static [u64]); 22] = [
        ("ic", 0.97, BIG),
        ("ih", 0.97, BIG),
        ("oc", 0.97, BIG),
        ("kh", 0.97, &[1, 1, 2, 3, 5]),
        ("mb", 0.5, BIG),
        ("iw", 0.3, BIG),
        ("kw", 0.3, &[1, 2, 3]),
        ("sh", 0.3, &[1, 2, 3]),
        ("sw", 0.2, &[1, 2]),
        ("ph", 0.3, SMALL),
        ("pw", 0.2, SMALL),
        ("dh", 0.2, SMALL),
        ("dw", 0.2, SMALL),
        ("g", 0.3, &[1, 1, 2, 4]),
        ("oh", 0.1, BIG),
        ("ow", 0.1, BIG),
        ("id", 0.01, BIG),
        ("od", 0.01, BIG),
        ("kd", 0.01, BIG),
        ("sd", 0.01, BIG),
        ("pd", 0.01, BIG),
        ("dd", 0.01, BIG),
    ];
    let fields: Vec<_> = table
        .into_iter()
        .map(|(key, p, values)| {
            // Near the limits, the size arithmetic's overflow checks.
            let extreme = vec![u64::MAX, u64::MAX - 1, (1 << 63) - 1, 1 << 62];
            let value = prop_oneof![
                30 => prop::sample::select(values).prop_map(|v| v.to_string()),
                1 => number(),
                1 => prop::sample::select(extreme).prop_map(|v| v.to_string()),
            ];
            prop::option::weighted(p, value.prop_map(move |v| format!("{key}{v}")))
        })
        .collect();
    let tokens = (fields, prop::option::weighted(0.3, name()))
        .prop_map(|(fields, name)| fields.into_iter().flatten().chain(name).collect::<Vec<_>>())
        .prop_shuffle();
    (tokens, prop::sample::select(vec!["", "_"])).prop_map(|(tokens, sep)| tokens.join(sep))
}

/// Any string: any chars (controls, NUL, BOM and beyond the BMP
/// included), bytes read lossily, printable ASCII, or the descriptor
/// alphabet.
fn arbitrary_text() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::collection::vec(any::<char>(), 0..48).prop_map(String::from_iter),
        prop::collection::vec(any::<u8>(), 0..48)
            .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        "[ -~]{0,48}",
        "[cdghikmnopsw0-9_\" ]{0,48}",
    ]
}

/// The descriptor property: no panic; an error says something; a parsed
/// problem's canonical form parses back to the same problem, and is a
/// fixed point.
fn check_descriptor(desc: &str) -> Result<(), TestCaseError> {
    match ConvProblem::parse(desc) {
        Ok(p) => {
            let canon = p.canonical();
            let again = ConvProblem::parse(&canon).map_err(|e| {
                TestCaseError::fail(format!(
                    "{desc:?} parsed, but its canonical form {canon:?} does not: {e:#}"
                ))
            })?;
            prop_assert_eq!(&again, &p, "{:?} -> {:?}", desc, canon);
            prop_assert_eq!(again.canonical(), canon);
        }
        Err(e) => check_error(&e)?,
    }
    Ok(())
}

/// The GEMM property: no panic, errors say something, and the canonical
/// `MxNxK:TT` form parses back to the same shape.
fn check_gemm(size: &str, trans: &str) -> Result<(), TestCaseError> {
    match gemm::parse(size, trans) {
        Ok(s) => {
            let canon = gemm::canonical(&s);
            let (dims, t) = canon.split_once(':').expect("canonical has ':'");
            let again = gemm::parse(dims, t)
                .map_err(|e| TestCaseError::fail(format!("{canon:?} does not parse: {e:#}")))?;
            prop_assert_eq!(again, s);
        }
        Err(e) => check_error(&e)?,
    }
    Ok(())
}

/// A batch file's text: descriptor lines, comments, blank and padded
/// lines, junk, joined with LF or CRLF, sometimes after a BOM.
fn batch_text() -> impl Strategy<Value = String> {
    // Mostly lines that parse, so that whole files do now and then.
    let line = prop_oneof![
        8 => plausible_descriptor(),
        2 => "#.{0,10}",
        2 => (plausible_descriptor(), ".{0,6}").prop_map(|(d, c)| format!("  {d}\t# {c}")),
        2 => "[ \t]{0,3}",
        1 => wild_descriptor(),
        1 => arbitrary_text(),
    ];
    (
        prop::collection::vec(line, 0..6),
        prop::sample::select(vec!["\n", "\r\n", "\r"]),
        prop::option::of(Just("\u{feff}")),
    )
        .prop_map(|(lines, eol, bom)| format!("{}{}", bom.unwrap_or(""), lines.join(eol)))
}

/// A batch file's bytes: a text with a few bytes overwritten (NUL, a
/// lone continuation byte, 0xFF, a BOM's lead byte, anything), so often
/// not UTF-8; or bytes at random.
fn batch_bytes() -> impl Strategy<Value = Vec<u8>> {
    let patch = (
        any::<prop::sample::Index>(),
        prop_oneof![
            Just(0u8),
            Just(0x80u8),
            Just(0xFFu8),
            Just(0xEFu8),
            any::<u8>()
        ],
    );
    prop_oneof![
        (batch_text(), prop::collection::vec(patch, 0..4)).prop_map(|(text, patches)| {
            let mut b = text.into_bytes();
            if !b.is_empty() {
                for (at, byte) in patches {
                    let i = at.index(b.len());
                    b[i] = byte;
                }
            }
            b
        }),
        prop::collection::vec(any::<u8>(), 0..128),
    ]
}

/// `load_batch` on `bytes` written to a file: no panic, errors say
/// something, a success holds at least one problem.
fn check_batch_file(bytes: &[u8]) -> Result<(), TestCaseError> {
    let mut f = tempfile::NamedTempFile::new().expect("temp file");
    f.write_all(bytes).expect("write temp file");
    let path = f.path().to_str().expect("temp path is UTF-8");
    match load_batch(path) {
        Ok(list) => prop_assert!(!list.is_empty()),
        Err(e) => check_error(&e)?,
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(3000))]

    /// Any string at all, straight into the descriptor parser.
    #[test]
    fn descriptor_arbitrary_strings(desc in arbitrary_text()) {
        check_descriptor(&desc)?;
    }

    /// Descriptors from the real keys, repeats and junk, wild numbers.
    #[test]
    fn descriptor_wild_tokens(desc in wild_descriptor()) {
        check_descriptor(&desc)?;
    }

    /// Descriptors that mostly validate: the size arithmetic with extreme
    /// values, and the canonical round trip of every problem that parses.
    #[test]
    fn descriptor_plausible_round_trip(desc in plausible_descriptor()) {
        check_descriptor(&desc)?;
    }

    /// GEMM sizes: `AxBxC` from awkward numbers, or any text; any
    /// transpose string.
    #[test]
    fn gemm_sizes(
        size in prop_oneof![
            3 => (number(), number(), number()).prop_map(|(m, n, k)| format!("{m}x{n}x{k}")),
            1 => prop::collection::vec(number(), 0..5).prop_map(|d| d.join("x")),
            1 => arbitrary_text(),
        ],
        trans in prop_oneof![
            3 => prop::sample::select(vec!["NN", "NT", "TN", "TT", "nn", "nt", "tn", "tt"])
                .prop_map(String::from),
            1 => arbitrary_text(),
        ],
    ) {
        check_gemm(&size, &trans)?;
    }
}

proptest! {
    #![proptest_config(config(1000))]

    /// Batch text straight into `parse_lines` (no BOM stripping there).
    #[test]
    fn batch_lines(text in batch_text()) {
        match parse_lines(&text, "batch.txt") {
            Ok(list) => prop_assert!(!list.is_empty()),
            Err(e) => check_error(&e)?,
        }
    }

    /// `--from FILE`: any bytes on disk, BOM, NUL and invalid UTF-8 included.
    #[test]
    fn batch_file_bytes(bytes in batch_bytes()) {
        check_batch_file(&bytes)?;
    }

    /// `builtin:NAME` with any name.
    #[test]
    fn batch_builtin_names(name in arbitrary_text()) {
        match load_batch(&format!("builtin:{name}")) {
            Ok(list) => prop_assert!(!list.is_empty()),
            Err(e) => check_error(&e)?,
        }
    }
}

proptest! {
    #![proptest_config(config(200))]

    /// Padding and dilation anywhere in the u64 range: ph/pw of 2^63 or
    /// more once overflowed `2 * p`, and dh/dw of u64::MAX `d + 1`, in
    /// desc.rs `out_size` (a panic in debug builds, wrong sizes in
    /// release).
    #[test]
    fn descriptor_huge_padding_and_dilation(
        key in prop::sample::select(vec!["ph", "pw", "dh", "dw"]),
        v in prop_oneof![any::<u64>(), (1u64 << 62)..=u64::MAX, Just(u64::MAX)],
        kh in 1u64..4,
    ) {
        check_descriptor(&format!("ic1ih1oc1kh{kh}{key}{v}"))?;
    }
}
