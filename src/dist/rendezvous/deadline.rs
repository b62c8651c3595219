//! Reads and writes that give up at a deadline, and why they stopped.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Why a bounded read or write stopped short.
#[derive(Debug)]
pub(super) enum Fail {
    /// The peer closed or reset the connection.
    Closed,
    /// The deadline passed.
    TimedOut,
    /// A stop signal arrived (SIGINT, SIGTERM, SIGHUP) while waiting.
    Stopped,
    Io(io::Error),
}

impl Fail {
    pub(super) fn reason(&self) -> String {
        match self {
            Fail::Closed => "the connection was closed".to_string(),
            Fail::TimedOut => "timed out".to_string(),
            Fail::Stopped => crate::signals::stopped_by(),
            Fail::Io(e) => e.to_string(),
        }
    }

    fn from_io(e: io::Error) -> Fail {
        if is_gone(&e) {
            Fail::Closed
        } else {
            Fail::Io(e)
        }
    }
}

/// Errors that mean the peer is gone rather than that something broke here.
pub(super) fn is_gone(e: &io::Error) -> bool {
    use io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof
    )
}

/// Errors after which the same read or write may be tried again.
fn is_retry(e: &io::Error) -> bool {
    use io::ErrorKind::*;
    matches!(e.kind(), WouldBlock | TimedOut | Interrupted)
}

/// Longest a read or write blocks before it looks at the stop flag: a
/// rank waiting for its peers stops within this of the first signal.
pub(super) const STOP_POLL: Duration = Duration::from_millis(100);

/// Whether a stop signal arrived.
pub(super) fn stopped() -> bool {
    crate::signals::stopped()
}

/// Time left before `deadline`; `None` once it has passed.
pub(super) fn remaining(deadline: Instant) -> Option<Duration> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
}

/// `read_exact` that gives up at `deadline` or at a stop signal: the
/// socket's timeout is renewed before each read (at most [`STOP_POLL`]),
/// as a peer may trickle bytes forever.
pub(super) fn read_exact_by(
    stream: &mut TcpStream,
    buf: &mut [u8],
    deadline: Instant,
) -> std::result::Result<(), Fail> {
    let mut got = 0;
    while got < buf.len() {
        if stopped() {
            return Err(Fail::Stopped);
        }
        let left = remaining(deadline).ok_or(Fail::TimedOut)?;
        stream
            .set_read_timeout(Some(left.min(STOP_POLL)))
            .map_err(Fail::Io)?;
        match stream.read(&mut buf[got..]) {
            Ok(0) => return Err(Fail::Closed),
            Ok(n) => got += n,
            Err(e) if is_retry(&e) => {}
            Err(e) => return Err(Fail::from_io(e)),
        }
    }
    Ok(())
}

/// `write_all` that gives up at `deadline` or at a stop signal.
pub(super) fn write_all_by(
    stream: &mut TcpStream,
    buf: &[u8],
    deadline: Instant,
) -> std::result::Result<(), Fail> {
    write_all(stream, buf, deadline, true)
}

/// `write_all` of a short answer (bounded by a deadline of seconds) that a
/// stop signal does not cut: rank 0, stopped, still tells the ranks why.
pub(super) fn answer_by(
    stream: &mut TcpStream,
    buf: &[u8],
    deadline: Instant,
) -> std::result::Result<(), Fail> {
    write_all(stream, buf, deadline, false)
}

fn write_all(
    stream: &mut TcpStream,
    buf: &[u8],
    deadline: Instant,
    watch_stop: bool,
) -> std::result::Result<(), Fail> {
    let mut sent = 0;
    while sent < buf.len() {
        if watch_stop && stopped() {
            return Err(Fail::Stopped);
        }
        let left = remaining(deadline).ok_or(Fail::TimedOut)?;
        stream
            .set_write_timeout(Some(left.min(STOP_POLL)))
            .map_err(Fail::Io)?;
        match stream.write(&buf[sent..]) {
            Ok(0) => return Err(Fail::Closed),
            Ok(n) => sent += n,
            Err(e) if is_retry(&e) => {}
            Err(e) => return Err(Fail::from_io(e)),
        }
    }
    Ok(())
}

/// A duration for messages: `30 s`, `1.5 s`.
pub(super) fn seconds(d: Duration) -> String {
    let s = format!("{:.1}", d.as_secs_f64());
    format!("{} s", s.strip_suffix(".0").unwrap_or(&s))
}
