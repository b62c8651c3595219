//! cnnbench: how fast convolutional networks train, layer by layer.

// Everything reaches stdout through `output::print` and stderr through
// `note!` (`note.rs`), which turn a closed pipe or a full disk into an exit
// code instead of the panic `println!` and `eprintln!` would raise.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod bench;
mod bounded_read;
mod cli;
mod dist;
mod driver;
mod note;
mod output;
mod plan;
mod problem;
#[cfg(test)]
mod proptest_support;
mod report;
mod results;
mod signals;

use note::note;
use std::process::ExitCode;

/// Large blocks (tensors) start on a cache line, as PyTorch's do (see
/// `cnnbench_kernels::alloc`).
#[global_allocator]
static ALLOCATOR: cnnbench_kernels::alloc::Aligned64 = cnnbench_kernels::alloc::Aligned64;

/// Most characters an error line shows of its message.
const MAX_ERROR_CHARS: usize = 400;

/// An error message as one safe line: control characters escaped (a
/// newline or an escape sequence in a user's input cannot break the line
/// or the terminal), and cut at [`MAX_ERROR_CHARS`] with a note of how much
/// was left out.
fn one_line(msg: &str) -> String {
    let mut out = String::new();
    for c in msg.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    let n = out.chars().count();
    if n > MAX_ERROR_CHARS {
        let kept: String = out.chars().take(MAX_ERROR_CHARS).collect();
        return format!("{kept}... ({} more characters)", n - MAX_ERROR_CHARS);
    }
    out
}

/// A write whose reader went away (`--out /dev/stdout | head`).
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.root_cause()
        .downcast_ref::<std::io::Error>()
        .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}

fn main() -> ExitCode {
    // A write past `ulimit -f` fails (EFBIG), one line, instead of killing us.
    signals::ignore_file_size_limit_signal();
    // A bug should still end in one line, not a backtrace.
    std::panic::set_hook(Box::new(|info| {
        note!("cnnbench: internal error: {info}");
        results::atomic::release_fifo_readers();
    }));
    let result = cli::run();
    results::atomic::release_fifo_readers();
    match result {
        Ok(code) => code,
        // `| head` closed stdout: end quietly, as a program SIGPIPE killed
        // (or with the stop signal's code, after one).
        Err(e) if e.is::<output::ClosedStdout>() || is_broken_pipe(&e) => match signals::received()
        {
            Some(_) => signals::exit_code(),
            None => ExitCode::from(141),
        },
        Err(e) => {
            note!("cnnbench: error: {}", one_line(&format!("{e:#}")));
            // An error on the way out of a stopped run (a FIFO nobody read)
            // still ends with the stop signal's code.
            match signals::received() {
                Some(_) => signals::exit_code(),
                None => ExitCode::from(2),
            }
        }
    }
}
