//! What the property tests of the input readers share.

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

/// `cases` per test, sized for a quick debug `cargo test`, unless
/// PROPTEST_CASES asks for more (a longer soak); no regression files, so
/// nothing lands in the tree.
pub fn config(cases: u32) -> ProptestConfig {
    let default = ProptestConfig::default();
    ProptestConfig {
        cases: if std::env::var_os("PROPTEST_CASES").is_some() {
            default.cases
        } else {
            cases
        },
        failure_persistence: None,
        ..default
    }
}

/// An error must say something, as `{e:#}` prints its whole chain.
pub fn check_error(e: &anyhow::Error) -> Result<(), TestCaseError> {
    prop_assert!(
        !format!("{e:#}").trim().is_empty(),
        "an error with no message"
    );
    Ok(())
}
