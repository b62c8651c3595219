//! Progress on stderr for multi-item runs: a bar with the current item and
//! an ETA, hidden when stderr is not a terminal or with `--quiet`.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

pub fn bar(len: u64, quiet: bool) -> ProgressBar {
    if quiet || !std::io::stderr().is_terminal() || len < 2 {
        return ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
    }
    let b = ProgressBar::new(len);
    b.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} ETA {eta} {wide_msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    b
}
