//! cnnbench: how fast convolutional networks train, layer by layer.

mod bench;
mod cli;
mod driver;
mod output;
mod plan;
mod problem;
mod report;
mod results;
mod signals;

use std::process::ExitCode;

fn main() -> ExitCode {
    // A bug should still end in one line, not a backtrace.
    std::panic::set_hook(Box::new(|info| {
        output::note(&format!("cnnbench: internal error: {info}"));
    }));
    match cli::run() {
        Ok(code) => code,
        // `| head` closed stdout: end quietly, as a program SIGPIPE killed
        // (or with the stop signal's code, after one).
        Err(e) if e.is::<output::ClosedStdout>() => match signals::received() {
            Some(_) => signals::exit_code(),
            None => ExitCode::from(141),
        },
        Err(e) => {
            output::note(&format!("cnnbench: error: {e:#}"));
            ExitCode::from(2)
        }
    }
}
