//! One line on stderr that can never panic: the bottom of the binary's
//! imports (it uses nothing of the crate), so that every layer may write
//! its notes through it without depending on `main.rs` or `output/`.

use std::io::Write;

/// One line on stderr, where a failed write (a closed terminal, a closed
/// pipe) is ignored instead of panicking as `eprintln!` would: for the
/// lines that end a run.
pub fn line(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// [`line`] with `format!` arguments: what cnnbench uses instead of
/// `eprintln!` everywhere, so that no message can panic. Used by path
/// (`use crate::note::note;`), so each caller names where it comes from.
macro_rules! note {
    ($($arg:tt)*) => {
        $crate::note::line(&format!($($arg)*))
    };
}
pub(crate) use note;
