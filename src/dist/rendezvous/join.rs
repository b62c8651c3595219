//! Rank 0's side of joining: it accepts connections, reads each hello
//! without blocking on any one of them, and decides whether the run goes
//! ahead.

use std::io::{self, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};

use super::deadline::{answer_by, is_gone, stopped};
use super::wire::{
    id_answer, parse_hello, refuse, refuse_other_version, Parsed, ANSWER_TIMEOUT, HEADER_BYTES,
    ID_BYTES, VERSION,
};

/// How long rank 0 waits for a connection's hello once it is accepted:
/// a silent stranger is dropped after this, without delaying anyone.
pub(super) const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

/// How long rank 0 keeps waiting for missing ranks once the run is known
/// to be refused, so that ranks started together all hear why.
pub(super) const PROBLEM_GRACE: Duration = Duration::from_secs(2);

/// How long rank 0 sleeps when no connection made progress.
const POLL_EVERY: Duration = Duration::from_millis(5);

/// A connection rank 0 accepted whose hello is still arriving.
struct Pending {
    stream: TcpStream,
    peer: SocketAddr,
    buf: Vec<u8>,
    since: Instant,
}

/// A complete hello and the connection it came on.
struct Hello {
    rank: usize,
    world_size: usize,
    fingerprint: Vec<u8>,
    peer: SocketAddr,
    stream: TcpStream,
}

/// What became of a pending connection after reading what it sent.
enum Step {
    Wait(Pending),
    Drop,
    OtherVersion(Pending, u32),
    Hello(Hello),
}

/// Reads what `p` has sent, never more than its hello (the rest of the
/// stream belongs to later messages), without blocking.
fn advance(mut p: Pending) -> Step {
    let mut chunk = [0u8; 4096];
    loop {
        let want = match parse_hello(&p.buf) {
            Parsed::Incomplete(total) => total - p.buf.len(),
            Parsed::Stranger => return Step::Drop,
            Parsed::OtherVersion(v) => return Step::OtherVersion(p, v),
            Parsed::Done(rank, world_size, len) => {
                if p.stream.set_nonblocking(false).is_err() {
                    return Step::Drop;
                }
                let fingerprint = p.buf[HEADER_BYTES..HEADER_BYTES + len].to_vec();
                let (stream, peer) = (p.stream, p.peer);
                return Step::Hello(Hello {
                    rank,
                    world_size,
                    fingerprint,
                    peer,
                    stream,
                });
            }
        };
        match p.stream.read(&mut chunk[..want.min(4096)]) {
            Ok(0) => return Step::Drop,
            Ok(n) => p.buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if p.since.elapsed() < HELLO_TIMEOUT {
                    return Step::Wait(p);
                }
                return Step::Drop;
            }
            Err(_) => return Step::Drop,
        }
    }
}

/// The hellos rank 0 received, by rank.
pub(super) struct Joins {
    world_size: usize,
    /// Index `r` holds rank `r`'s first hello; index 0 stays empty.
    joined: Vec<Option<Hello>>,
    /// Hellos with no place in `joined`: out of range or a rank claimed twice.
    extras: Vec<Hello>,
    /// Processes that spoke another protocol version, already answered.
    versions: Vec<(SocketAddr, u32)>,
    /// When the run was first known to be refused.
    first_problem: Option<Instant>,
}

impl Joins {
    fn new(world_size: usize) -> Joins {
        Joins {
            world_size,
            joined: (0..world_size).map(|_| None).collect(),
            extras: Vec::new(),
            versions: Vec::new(),
            first_problem: None,
        }
    }

    fn add(&mut self, h: Hello, fingerprint: &[u8]) {
        let fits = h.rank > 0 && h.rank < self.world_size && self.joined[h.rank].is_none();
        if !fits || h.world_size != self.world_size || h.fingerprint != fingerprint {
            self.problem();
        }
        if fits {
            let rank = h.rank;
            self.joined[rank] = Some(h);
        } else {
            self.extras.push(h);
        }
    }

    fn problem(&mut self) {
        self.first_problem.get_or_insert_with(Instant::now);
    }

    pub(super) fn missing(&self) -> Vec<usize> {
        (1..self.world_size)
            .filter(|&r| self.joined[r].is_none())
            .collect()
    }

    /// Why the run is refused, if it is: the first problem in rank order,
    /// so that the message does not depend on who connected first.
    pub(super) fn verdict(&self, fingerprint: &[u8]) -> Option<String> {
        let n = self.world_size;
        let mut all: Vec<&Hello> = self.joined.iter().flatten().chain(&self.extras).collect();
        // Stable: of two claims to one rank, the first to arrive stays first.
        all.sort_by_key(|h| h.rank);
        for (i, h) in all.iter().enumerate() {
            let (r, peer) = (h.rank, h.peer);
            if h.world_size != n {
                return Some(format!(
                    "rank {r} says the world has {} ranks, rank 0 says {n}",
                    h.world_size
                ));
            }
            if r == 0 {
                return Some(format!(
                    "a process at {peer} also claims rank 0 (are two runs sharing \
                     MASTER_ADDR:MASTER_PORT?)"
                ));
            }
            if r >= n {
                return Some(format!(
                    "a process at {peer} claims rank {r} in a world of {n} ranks"
                ));
            }
            if i > 0 && all[i - 1].rank == r {
                return Some(format!(
                    "two processes claim rank {r} ({} and {peer}; are two runs sharing \
                     MASTER_ADDR:MASTER_PORT?)",
                    all[i - 1].peer
                ));
            }
            if h.fingerprint != fingerprint {
                return Some(format!(
                    "rank {r} runs a different configuration from rank 0: rank {r} has {:?}, \
                     rank 0 has {:?}",
                    String::from_utf8_lossy(&h.fingerprint),
                    String::from_utf8_lossy(fingerprint)
                ));
            }
        }
        self.versions
            .first()
            .map(|(peer, v)| other_version(*peer, *v))
    }

    /// Tells every connected rank why the run is refused; a rank that is
    /// gone already cannot be told, and needs not be.
    pub(super) fn refuse_all(self, why: &str) {
        for h in self.joined.into_iter().flatten().chain(self.extras) {
            let mut stream = h.stream;
            let _ = refuse(&mut stream, why);
        }
    }

    /// Sends the id to every rank; the streams in rank order, from rank 1.
    pub(super) fn send_id(self, id: &[u8; ID_BYTES]) -> Result<Vec<TcpStream>> {
        let deadline = Instant::now() + ANSWER_TIMEOUT;
        let answer = id_answer(id);
        let mut streams = Vec::with_capacity(self.world_size.saturating_sub(1));
        for h in self.joined.into_iter().flatten() {
            let mut stream = h.stream;
            answer_by(&mut stream, &answer, deadline).map_err(|f| {
                anyhow!(
                    "rendezvous: could not send the NCCL id to rank {} at {}: {}",
                    h.rank,
                    h.peer,
                    f.reason()
                )
            })?;
            streams.push(stream);
        }
        Ok(streams)
    }
}

fn other_version(peer: SocketAddr, version: u32) -> String {
    format!(
        "a process at {peer} speaks rendezvous protocol version {version}, rank 0 speaks \
         {VERSION} (are all ranks the same cnnbench build?)"
    )
}

/// Rank 0 accepts connections and reads hellos until every rank has
/// joined, the deadline passes, or [`PROBLEM_GRACE`] after the run is
/// known to be refused; a stop signal ends the wait at once, an error
/// that says so (the ranks joined so far hear it too). Polls a non-blocking listener and connections, so
/// that neither a silent stranger nor a slow rank holds up the others.
pub(super) fn wait_for_ranks(
    listener: &TcpListener,
    at: &str,
    world_size: usize,
    fingerprint: &str,
    timeout: Duration,
) -> Result<Joins> {
    let deadline = Instant::now() + timeout;
    listener
        .set_nonblocking(true)
        .map_err(|e| anyhow!("rendezvous: cannot poll the listener on {at}: {e}"))?;
    let mut joins = Joins::new(world_size);
    let mut pending: Vec<Pending> = Vec::new();
    loop {
        if stopped() {
            let joined = world_size - joins.missing().len();
            let how = crate::signals::stopped_by();
            joins.refuse_all(&format!("rank 0 was {how} before every rank had joined"));
            bail!(
                "rendezvous at {at}: {how} while waiting for the ranks to join ({joined} of \
                 {world_size} had, rank 0 included)"
            );
        }
        let mut busy = accept_all(listener, at, &mut pending)?;
        for p in std::mem::take(&mut pending) {
            let had = p.buf.len();
            match advance(p) {
                Step::Wait(p) => {
                    busy |= p.buf.len() > had;
                    pending.push(p);
                }
                Step::Drop => {}
                Step::OtherVersion(mut p, v) => {
                    discard_waiting(&mut p.stream);
                    let _ = refuse_other_version(&mut p.stream, &other_version(p.peer, v));
                    joins.versions.push((p.peer, v));
                    joins.problem();
                }
                Step::Hello(h) => {
                    busy = true;
                    joins.add(h, fingerprint.as_bytes());
                }
            }
        }
        if joins.missing().is_empty() {
            return Ok(joins);
        }
        let stop = joins
            .first_problem
            .map_or(deadline, |t| (t + PROBLEM_GRACE).min(deadline));
        let Some(left) = stop.checked_duration_since(Instant::now()) else {
            return Ok(joins);
        };
        if !busy {
            thread::sleep(left.min(POLL_EVERY));
        }
    }
}

/// Accepts every connection waiting on `listener`; whether there was one.
fn accept_all(listener: &TcpListener, at: &str, pending: &mut Vec<Pending>) -> Result<bool> {
    let mut any = false;
    loop {
        match listener.accept() {
            Ok((stream, peer)) => {
                any = true;
                // Accepted sockets do not inherit the listener's O_NONBLOCK.
                if stream.set_nonblocking(true).is_ok() {
                    let _ = stream.set_nodelay(true);
                    let since = Instant::now();
                    pending.push(Pending {
                        stream,
                        peer,
                        buf: Vec::new(),
                        since,
                    });
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(any),
            // A connection that went away before it was accepted.
            Err(e) if is_gone(&e) || e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => bail!("rendezvous: accepting connections on {at} failed: {e}"),
        }
    }
}

/// Reads and drops what `stream` has received and nobody will read:
/// closing a socket with unread bytes resets the connection, which may
/// destroy the answer sent just before.
fn discard_waiting(stream: &mut TcpStream) {
    let mut scratch = [0u8; 4096];
    for _ in 0..16 {
        match stream.read(&mut scratch) {
            Ok(n) if n > 0 => {}
            _ => return,
        }
    }
}
