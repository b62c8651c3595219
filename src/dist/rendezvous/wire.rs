//! The protocol's messages (see the module doc of [`super`]): the hello a
//! joining rank sends, rank 0's answer to it, and the payloads gathered at
//! the end.

use std::net::TcpStream;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};

use super::deadline::{answer_by, read_exact_by, seconds, write_all_by, Fail};

/// Bytes of an NCCL unique id (`NCCL_UNIQUE_ID_BYTES`).
pub const ID_BYTES: usize = 128;

/// Longest fingerprint a hello carries: a description of a run, not data.
pub const MAX_FINGERPRINT_BYTES: usize = 64 << 10;

/// Largest payload one rank may send to `Rendezvous::gather`.
pub const MAX_PAYLOAD_BYTES: usize = 64 << 20;

/// What every hello starts with, before the protocol version.
pub(super) const TAG: &[u8; 12] = b"cnnbench-rdv";

/// The protocol version this build speaks. Version 2: rank 0's answers
/// and the gathered payloads carry the tag and version too (version 1's
/// answers started with the status byte, so anything that answered one
/// zero byte and 128 more was taken for rank 0).
pub(super) const VERSION: u32 = 2;

/// Bytes before every answer and payload: the tag and the version.
pub(super) const PREFIX_BYTES: usize = TAG.len() + 4;

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

/// The tag and version that start every answer and payload.
pub(super) fn prefix() -> [u8; PREFIX_BYTES] {
    let mut p = [0u8; PREFIX_BYTES];
    p[..TAG.len()].copy_from_slice(TAG);
    p[TAG.len()..].copy_from_slice(&VERSION.to_le_bytes());
    p
}

/// Up to 16 received bytes for a message: `16 bytes: 00 00 ...`.
pub(super) fn shown(bytes: &[u8]) -> String {
    let hex: Vec<String> = bytes.iter().take(16).map(|b| format!("{b:02x}")).collect();
    let more = if bytes.len() > 16 { " ..." } else { "" };
    match bytes.len() {
        0 => "nothing".to_string(),
        n => format!(
            "{n} byte{} ({}{more})",
            if n == 1 { "" } else { "s" },
            hex.join(" ")
        ),
    }
}

/// Why a message that should start with [`prefix`] did not.
#[derive(Debug)]
pub(super) enum BadPrefix {
    /// The bytes read, up to the first that differs from the tag.
    NoTag(Vec<u8>),
    OtherVersion(u32),
    Read(Fail),
}

/// Reads [`prefix`] from `stream`, judging each byte as it arrives: a
/// stranger is known by its first wrong byte, without waiting for more.
pub(super) fn read_prefix(
    stream: &mut TcpStream,
    deadline: Instant,
) -> std::result::Result<(), BadPrefix> {
    let mut got = [0u8; PREFIX_BYTES];
    for i in 0..PREFIX_BYTES {
        read_exact_by(stream, &mut got[i..=i], deadline).map_err(|f| match f {
            // Closed part-way through the tag: a stranger all the same.
            Fail::Closed if i > 0 && i <= TAG.len() => BadPrefix::NoTag(got[..i].to_vec()),
            f => BadPrefix::Read(f),
        })?;
        if i < TAG.len() && got[i] != TAG[i] {
            return Err(BadPrefix::NoTag(got[..=i].to_vec()));
        }
    }
    let mut v = [0u8; 4];
    v.copy_from_slice(&got[TAG.len()..]);
    match u32::from_le_bytes(v) {
        VERSION => Ok(()),
        other => Err(BadPrefix::OtherVersion(other)),
    }
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
        Fail::Stopped => anyhow!(
            "rendezvous: {} while waiting for rank 0 at {rank0} to answer",
            crate::signals::stopped_by()
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
    read_prefix(stream, deadline).map_err(|bad| match bad {
        BadPrefix::NoTag(got) => anyhow!(
            "rendezvous: the process at {rank0} (MASTER_PORT) is not a cnnbench rank 0: it \
             answered {} where the rendezvous tag '{}' was due",
            shown(&got),
            String::from_utf8_lossy(TAG)
        ),
        BadPrefix::OtherVersion(v) => anyhow!(
            "rendezvous: rank 0 at {rank0} speaks rendezvous protocol version {v}, this rank \
             speaks {VERSION} (are all ranks the same cnnbench build?)"
        ),
        BadPrefix::Read(f) => fail(f),
    })?;
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

/// Rank 0's answer that hands over the id: prefix, status 0, the id.
pub(super) fn id_answer(id: &[u8; ID_BYTES]) -> Vec<u8> {
    let mut answer = Vec::with_capacity(PREFIX_BYTES + 1 + ID_BYTES);
    answer.extend_from_slice(&prefix());
    answer.push(STATUS_OK);
    answer.extend_from_slice(id);
    answer
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

/// Sends a refusal: prefix, status, length, reason.
pub(super) fn refuse(stream: &mut TcpStream, why: &str) -> std::result::Result<(), Fail> {
    send_refusal(stream, why, true)
}

/// Sends a refusal to a process of another protocol version in the format
/// version 1 read (status, length, reason: no prefix), so that a rank of
/// an older build hears why too.
pub(super) fn refuse_other_version(
    stream: &mut TcpStream,
    why: &str,
) -> std::result::Result<(), Fail> {
    send_refusal(stream, why, false)
}

fn send_refusal(
    stream: &mut TcpStream,
    why: &str,
    prefixed: bool,
) -> std::result::Result<(), Fail> {
    stream.set_nonblocking(false).map_err(Fail::Io)?;
    let why = truncate(why, MAX_REFUSAL_BYTES);
    let mut answer = Vec::with_capacity(PREFIX_BYTES + 5 + why.len());
    if prefixed {
        answer.extend_from_slice(&prefix());
    }
    answer.push(STATUS_REFUSED);
    // At most MAX_REFUSAL_BYTES: fits a u32.
    answer.extend_from_slice(&(why.len() as u32).to_le_bytes());
    answer.extend_from_slice(why.as_bytes());
    answer_by(stream, &answer, Instant::now() + ANSWER_TIMEOUT)
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
        Fail::Stopped => anyhow!(
            "rendezvous: {} while waiting for rank {rank}'s results",
            crate::signals::stopped_by()
        ),
        f => anyhow!(
            "rendezvous: receiving rank {rank}'s results failed: {}",
            f.reason()
        ),
    };
    read_prefix(stream, deadline).map_err(|bad| match bad {
        BadPrefix::NoTag(got) => anyhow!(
            "rendezvous: rank {rank} sent {} where its results' tag '{}' was due",
            shown(&got),
            String::from_utf8_lossy(TAG)
        ),
        BadPrefix::OtherVersion(v) => anyhow!(
            "rendezvous: rank {rank} sent results in protocol version {v}, rank 0 speaks \
             {VERSION}"
        ),
        BadPrefix::Read(f) => fail(f),
    })?;
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
        Fail::Stopped => anyhow!(
            "rendezvous: {} while sending this rank's results to rank 0 at {rank0}",
            crate::signals::stopped_by()
        ),
        f => anyhow!(
            "rendezvous: sending this rank's results to rank 0 at {rank0} failed: {}",
            f.reason()
        ),
    };
    let mut head = Vec::with_capacity(PREFIX_BYTES + 8);
    head.extend_from_slice(&prefix());
    head.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    write_all_by(stream, &head, deadline).map_err(fail)?;
    write_all_by(stream, payload, deadline).map_err(fail)
}
