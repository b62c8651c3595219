//! The protocol's messages (see the module doc of [`super`]): the hello a
//! joining rank sends, rank 0's answer to it, and the payloads gathered at
//! the end.

use std::net::TcpStream;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};

use super::deadline::{read_exact_by, seconds, write_all_by, Fail};

/// Bytes of an NCCL unique id (`NCCL_UNIQUE_ID_BYTES`).
pub const ID_BYTES: usize = 128;

/// Longest fingerprint a hello carries: a description of a run, not data.
pub const MAX_FINGERPRINT_BYTES: usize = 64 << 10;

/// Largest payload one rank may send to `Rendezvous::gather`.
pub const MAX_PAYLOAD_BYTES: usize = 64 << 20;

/// What every hello starts with, before the protocol version.
pub(super) const TAG: &[u8; 12] = b"cnnbench-rdv";

/// The protocol version this build speaks.
pub(super) const VERSION: u32 = 1;

/// Bytes of a hello before the fingerprint: tag, version, rank, world
/// size, fingerprint length.
pub(super) const HEADER_BYTES: usize = TAG.len() + 4 * 4;

/// Answer statuses.
pub(super) const STATUS_OK: u8 = 0;
pub(super) const STATUS_REFUSED: u8 = 1;

/// Longest refusal a joining rank reads: one line, so far more than enough.
pub(super) const MAX_REFUSAL_BYTES: usize = 1 << 20;

/// Bound on sending an answer: a few hundred bytes, which fit in any
/// socket buffer, so this is only hit by a peer that vanished.
pub(super) const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

/// A hello (see the module doc).
pub(super) fn hello(rank: usize, world_size: usize, fingerprint: &[u8]) -> Result<Vec<u8>> {
    let word = |n: usize| {
        u32::try_from(n).map_err(|_| anyhow!("rendezvous: {n} does not fit the protocol's 32 bits"))
    };
    let mut out = Vec::with_capacity(HEADER_BYTES + fingerprint.len());
    out.extend_from_slice(TAG);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&word(rank)?.to_le_bytes());
    out.extend_from_slice(&word(world_size)?.to_le_bytes());
    out.extend_from_slice(&word(fingerprint.len())?.to_le_bytes());
    out.extend_from_slice(fingerprint);
    Ok(out)
}

/// Rank 0's answer to a hello: the id, or the reason it refused.
pub(super) fn read_answer(
    stream: &mut TcpStream,
    rank0: &str,
    deadline: Instant,
    timeout: Duration,
) -> Result<[u8; ID_BYTES]> {
    let fail = |f: Fail| match f {
        Fail::TimedOut => anyhow!(
            "rendezvous: rank 0 at {rank0} did not answer within {} (it answers once every rank \
             has joined: are all ranks running?)",
            seconds(timeout)
        ),
        Fail::Closed => anyhow!(
            "rendezvous: rank 0 at {rank0} closed the connection without answering (is another \
             program listening on MASTER_PORT?)"
        ),
        f => anyhow!(
            "rendezvous: lost the connection to rank 0 at {rank0}: {}",
            f.reason()
        ),
    };
    let mut status = [0u8; 1];
    read_exact_by(stream, &mut status, deadline).map_err(fail)?;
    match status[0] {
        STATUS_OK => {
            let mut id = [0u8; ID_BYTES];
            read_exact_by(stream, &mut id, deadline).map_err(fail)?;
            Ok(id)
        }
        STATUS_REFUSED => {
            let mut len = [0u8; 4];
            read_exact_by(stream, &mut len, deadline).map_err(fail)?;
            let len = (u32::from_le_bytes(len) as usize).min(MAX_REFUSAL_BYTES);
            let mut why = vec![0u8; len];
            read_exact_by(stream, &mut why, deadline).map_err(fail)?;
            bail!(
                "rendezvous: rank 0 refused this rank: {}",
                String::from_utf8_lossy(&why)
            )
        }
        other => bail!("rendezvous: rank 0 at {rank0} answered with unknown status {other}"),
    }
}

/// How far the bytes received on a connection go towards a hello.
#[derive(Debug, PartialEq)]
pub(super) enum Parsed {
    /// A hello so far: this many bytes in all are needed to go on.
    Incomplete(usize),
    /// Not a hello: a stranger on the port, dropped without a word.
    Stranger,
    /// A cnnbench hello of another protocol version.
    OtherVersion(u32),
    /// A whole hello: rank, world size, fingerprint length.
    Done(usize, usize, usize),
}

fn u32_at(buf: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&buf[at..at + 4]);
    u32::from_le_bytes(b)
}

pub(super) fn parse_hello(buf: &[u8]) -> Parsed {
    let n = buf.len().min(TAG.len());
    if buf[..n] != TAG[..n] {
        return Parsed::Stranger;
    }
    let version_end = TAG.len() + 4;
    if buf.len() < version_end {
        return Parsed::Incomplete(version_end);
    }
    let version = u32_at(buf, TAG.len());
    if version != VERSION {
        return Parsed::OtherVersion(version);
    }
    if buf.len() < HEADER_BYTES {
        return Parsed::Incomplete(HEADER_BYTES);
    }
    let fingerprint = u32_at(buf, HEADER_BYTES - 4) as usize;
    if fingerprint > MAX_FINGERPRINT_BYTES {
        // A cnnbench rank refuses to send one this long: not one of ours.
        return Parsed::Stranger;
    }
    if buf.len() < HEADER_BYTES + fingerprint {
        return Parsed::Incomplete(HEADER_BYTES + fingerprint);
    }
    let rank = u32_at(buf, version_end) as usize;
    let world_size = u32_at(buf, version_end + 4) as usize;
    Parsed::Done(rank, world_size, fingerprint)
}

/// Sends a refusal: status, length, reason.
pub(super) fn refuse(stream: &mut TcpStream, why: &str) -> std::result::Result<(), Fail> {
    stream.set_nonblocking(false).map_err(Fail::Io)?;
    let why = truncate(why, MAX_REFUSAL_BYTES);
    let mut answer = Vec::with_capacity(5 + why.len());
    answer.push(STATUS_REFUSED);
    // At most MAX_REFUSAL_BYTES: fits a u32.
    answer.extend_from_slice(&(why.len() as u32).to_le_bytes());
    answer.extend_from_slice(why.as_bytes());
    write_all_by(stream, &answer, Instant::now() + ANSWER_TIMEOUT)
}

/// `s` cut to at most `max` bytes, at a character boundary.
fn truncate(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

pub(super) fn receive_payload(
    stream: &mut TcpStream,
    rank: usize,
    deadline: Instant,
    timeout: Duration,
) -> Result<Vec<u8>> {
    let fail = |f: Fail| match f {
        Fail::Closed => {
            anyhow!("rendezvous: rank {rank} closed the connection before sending its results")
        }
        Fail::TimedOut => {
            anyhow!(
                "rendezvous: rank {rank}'s results did not arrive within {}",
                seconds(timeout)
            )
        }
        f => anyhow!(
            "rendezvous: receiving rank {rank}'s results failed: {}",
            f.reason()
        ),
    };
    let mut len = [0u8; 8];
    read_exact_by(stream, &mut len, deadline).map_err(fail)?;
    let len = u64::from_le_bytes(len);
    if len > MAX_PAYLOAD_BYTES as u64 {
        bail!(
            "rendezvous: rank {rank} announced {len} bytes of results, more than the \
             {MAX_PAYLOAD_BYTES} the rendezvous carries"
        );
    }
    let mut payload = vec![0u8; len as usize];
    read_exact_by(stream, &mut payload, deadline).map_err(fail)?;
    Ok(payload)
}

pub(super) fn send_payload(
    stream: &mut TcpStream,
    rank0: &str,
    payload: &[u8],
    deadline: Instant,
    timeout: Duration,
) -> Result<()> {
    let fail = |f: Fail| match f {
        Fail::TimedOut => anyhow!(
            "rendezvous: could not send this rank's results to rank 0 at {rank0} within {}",
            seconds(timeout)
        ),
        f => anyhow!(
            "rendezvous: sending this rank's results to rank 0 at {rank0} failed: {}",
            f.reason()
        ),
    };
    write_all_by(stream, &(payload.len() as u64).to_le_bytes(), deadline).map_err(fail)?;
    write_all_by(stream, payload, deadline).map_err(fail)
}
