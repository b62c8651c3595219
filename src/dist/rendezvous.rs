//! How the launched ranks find each other before NCCL takes over.
//!
//! Rank 0 makes the NCCL unique id and hands it to the other ranks over
//! TCP at `MASTER_ADDR:MASTER_PORT`; at the end it gathers every rank's
//! results over the same connections. Gradients never pass here: only the
//! id, a check that all ranks run the same configuration, and the results.
//!
//! # Protocol (version 1)
//!
//! Integers are little endian. Rank 0 listens on `0.0.0.0:MASTER_PORT`;
//! every other rank connects (retrying every 100 ms until its deadline, as
//! rank 0 may start later) and sends a hello:
//!
//! | bytes | field                                        |
//! |-------|----------------------------------------------|
//! | 12    | `cnnbench-rdv`                               |
//! | 4     | protocol version, u32 (1)                    |
//! | 4     | rank, u32                                    |
//! | 4     | world size, u32                              |
//! | 4     | fingerprint length, u32, at most 64 KiB      |
//! | n     | fingerprint: the run's configuration         |
//!
//! Rank 0 ignores connections that do not start with the tag (a stranger
//! on the port) or send nothing for 5 s, and waits until every rank from 1
//! to world size - 1 has said hello. It then checks, in rank order, each
//! rank's world size, that no rank is claimed twice, and the fingerprint,
//! and answers every rank with one status byte: 0 followed by the 128-byte
//! id, or 1 followed by a u32 length and a one-line UTF-8 reason, so that
//! every rank fails with the reason rank 0 fails with. Once a problem is
//! seen rank 0 waits at most 2 s more for the missing ranks, so that those
//! started at the same moment hear the reason too.
//!
//! [`Rendezvous::gather`]: every rank other than 0 sends its payload as a
//! u64 length (at most 64 MiB) and the bytes; rank 0 reads them in rank
//! order. Nothing answers them: a rank's results matter only to rank 0.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};

use super::launch::World;

/// Bytes of an NCCL unique id (`NCCL_UNIQUE_ID_BYTES`).
pub const ID_BYTES: usize = 128;

/// Longest fingerprint a hello carries: a description of a run, not data.
pub const MAX_FINGERPRINT_BYTES: usize = 64 << 10;

/// Largest payload one rank may send to [`Rendezvous::gather`].
pub const MAX_PAYLOAD_BYTES: usize = 64 << 20;

/// What every hello starts with, before the protocol version.
const TAG: &[u8; 12] = b"cnnbench-rdv";

/// The protocol version this build speaks.
const VERSION: u32 = 1;

/// Bytes of a hello before the fingerprint: tag, version, rank, world
/// size, fingerprint length.
const HEADER_BYTES: usize = TAG.len() + 4 * 4;

/// Answer statuses.
const STATUS_OK: u8 = 0;
const STATUS_REFUSED: u8 = 1;

/// Longest refusal a joining rank reads: one line, so far more than enough.
const MAX_REFUSAL_BYTES: usize = 1 << 20;

/// How long rank 0 waits for a connection's hello once it is accepted:
/// a silent stranger is dropped after this, without delaying anyone.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

/// How long rank 0 keeps waiting for missing ranks once the run is known
/// to be refused, so that ranks started together all hear why.
const PROBLEM_GRACE: Duration = Duration::from_secs(2);

/// How often a joining rank tries to connect while rank 0 is not up.
const RETRY_EVERY: Duration = Duration::from_millis(100);

/// Longest single connection attempt: an address that drops packets must
/// not eat the whole deadline in one try.
const CONNECT_ATTEMPT: Duration = Duration::from_secs(1);

/// How long rank 0 sleeps when no connection made progress.
const POLL_EVERY: Duration = Duration::from_millis(5);

/// Bound on sending an answer: a few hundred bytes, which fit in any
/// socket buffer, so this is only hit by a peer that vanished.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

/// The launched ranks, connected: rank 0 to every other rank, the others
/// to rank 0. Drop it after an error: the connections' state is unknown.
#[derive(Debug)]
pub struct Rendezvous {
    rank: usize,
    world_size: usize,
    link: Link,
}

#[derive(Debug)]
enum Link {
    /// A world of one: nobody to talk to.
    Alone,
    /// Rank 0: the stream to rank `i + 1` at index `i`.
    Root(Vec<TcpStream>),
    /// Another rank: the stream to rank 0, and its `host:port` for messages.
    Member { stream: TcpStream, rank0: String },
}

impl Rendezvous {
    /// Rank 0 passes `Some(id)` (the NCCL unique id it made) and listens on
    /// `0.0.0.0:master_port` (all interfaces, as torchrun's store does;
    /// std sets `SO_REUSEADDR` on Linux listeners, so a port left in
    /// TIME_WAIT by the previous run is usable); the others pass `None` and
    /// connect to `master_addr:master_port`, retrying every 100 ms (rank 0
    /// may not be up yet) until `timeout` has passed. `fingerprint` is a
    /// short description of the run (model, batch, dtype, ...): every
    /// rank's must equal rank 0's, else every rank fails with an error
    /// naming the first rank that differs and both fingerprints. Returns
    /// the rendezvous and the id: rank 0's own, or the one received. A world
    /// of one rank returns at once, without listening.
    pub fn join(
        world: &World,
        id: Option<[u8; ID_BYTES]>,
        fingerprint: &str,
        timeout: Duration,
    ) -> Result<(Rendezvous, [u8; ID_BYTES])> {
        check_world(world, fingerprint)?;
        match (world.rank, id) {
            (0, Some(id)) if world.world_size == 1 => Ok((Self::alone(), id)),
            (0, Some(id)) => {
                let listener = listen(world.master_port)?;
                Self::host(listener, world, id, fingerprint, timeout)
            }
            (0, None) => bail!("rendezvous: rank 0 must bring the NCCL id it made"),
            (_, None) => Self::reach_rank0(world, fingerprint, timeout),
            (rank, Some(_)) => {
                bail!("rendezvous: only rank 0 brings an NCCL id; rank {rank} receives it")
            }
        }
    }

    /// Every rank sends `payload`; rank 0 gets `Some` of all payloads in
    /// rank order, its own first, the others `None`. Bounded by `timeout`
    /// (rank 0: for all the ranks together).
    pub fn gather(&mut self, payload: &[u8], timeout: Duration) -> Result<Option<Vec<Vec<u8>>>> {
        if payload.len() > MAX_PAYLOAD_BYTES {
            bail!(
                "rendezvous: this rank's results are {} bytes, more than the {MAX_PAYLOAD_BYTES} \
                 the rendezvous carries",
                payload.len()
            );
        }
        let deadline = Instant::now() + timeout;
        match &mut self.link {
            Link::Alone => Ok(Some(vec![payload.to_vec()])),
            Link::Root(streams) => {
                let mut all = Vec::with_capacity(streams.len() + 1);
                all.push(payload.to_vec());
                for (i, stream) in streams.iter_mut().enumerate() {
                    all.push(receive_payload(stream, i + 1, deadline, timeout)?);
                }
                Ok(Some(all))
            }
            Link::Member { stream, rank0 } => {
                send_payload(stream, rank0, payload, deadline, timeout)?;
                Ok(None)
            }
        }
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// How many ranks joined: all of them, once [`Rendezvous::join`] returned.
    pub fn world_size(&self) -> usize {
        self.world_size
    }

    fn alone() -> Rendezvous {
        Rendezvous {
            rank: 0,
            world_size: 1,
            link: Link::Alone,
        }
    }

    /// Rank 0's side of [`Rendezvous::join`], on a listener already bound
    /// (tests bind port 0 and pass the port to the other ranks).
    fn host(
        listener: TcpListener,
        world: &World,
        id: [u8; ID_BYTES],
        fingerprint: &str,
        timeout: Duration,
    ) -> Result<(Rendezvous, [u8; ID_BYTES])> {
        let at = listener.local_addr().map_or_else(
            |_| format!("0.0.0.0:{}", world.master_port),
            |a| a.to_string(),
        );
        let joins = wait_for_ranks(&listener, &at, world.world_size, fingerprint, timeout)?;
        // Late ranks now find the port closed rather than a silent listener.
        drop(listener);
        if let Some(why) = joins.verdict(fingerprint.as_bytes()) {
            joins.refuse_all(&why);
            bail!("rendezvous: {why}");
        }
        let missing = joins.missing();
        if !missing.is_empty() {
            let why = format!(
                "{} of {} ranks joined within {} (missing ranks: {})",
                world.world_size - missing.len(),
                world.world_size,
                seconds(timeout),
                rank_list(&missing)
            );
            joins.refuse_all(&why);
            bail!("rendezvous at {at}: {why}");
        }
        let streams = joins.send_id(&id)?;
        let link = Link::Root(streams);
        Ok((
            Rendezvous {
                rank: 0,
                world_size: world.world_size,
                link,
            },
            id,
        ))
    }

    /// A joining rank's side of [`Rendezvous::join`].
    fn reach_rank0(
        world: &World,
        fingerprint: &str,
        timeout: Duration,
    ) -> Result<(Rendezvous, [u8; ID_BYTES])> {
        let deadline = Instant::now() + timeout;
        let rank0 = host_port(&world.master_addr, world.master_port);
        let addrs = resolve(&world.master_addr, world.master_port)?;
        let no_answer = || {
            anyhow!(
                "rendezvous: no answer from rank 0 at {rank0} within {} (is MASTER_ADDR right, \
                 and is rank 0 running?)",
                seconds(timeout)
            )
        };
        let mut stream = connect(&addrs, deadline).ok_or_else(no_answer)?;
        // Small messages, each awaited: Nagle's algorithm would only delay them.
        let _ = stream.set_nodelay(true);
        let hello = hello(world.rank, world.world_size, fingerprint.as_bytes())?;
        write_all_by(&mut stream, &hello, deadline).map_err(|f| match f {
            Fail::TimedOut => no_answer(),
            f => anyhow!(
                "rendezvous: lost the connection to rank 0 at {rank0}: {}",
                f.reason()
            ),
        })?;
        let id = read_answer(&mut stream, &rank0, deadline, timeout)?;
        let link = Link::Member { stream, rank0 };
        Ok((
            Rendezvous {
                rank: world.rank,
                world_size: world.world_size,
                link,
            },
            id,
        ))
    }
}

/// What `join` needs of its arguments before any network is touched.
fn check_world(world: &World, fingerprint: &str) -> Result<()> {
    if world.world_size == 0 || world.rank >= world.world_size {
        bail!(
            "rendezvous: rank {} is not in a world of {} ranks",
            world.rank,
            world.world_size
        );
    }
    if u32::try_from(world.world_size).is_err() {
        bail!(
            "rendezvous: a world of {} ranks is more than the protocol counts",
            world.world_size
        );
    }
    if fingerprint.len() > MAX_FINGERPRINT_BYTES {
        bail!(
            "rendezvous: the run's fingerprint is {} bytes, more than the \
             {MAX_FINGERPRINT_BYTES} the rendezvous carries",
            fingerprint.len()
        );
    }
    Ok(())
}

/// Rank 0's listener on every interface, so that `MASTER_ADDR` may name
/// any of this host's addresses.
fn listen(port: u16) -> Result<TcpListener> {
    TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)).map_err(|e| {
        anyhow!("rendezvous: cannot listen on 0.0.0.0:{port} (MASTER_PORT={port}): {e}")
    })
}

/// `host:port`, with an IPv6 literal bracketed.
fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Rank 0's IPv4 addresses: it listens on 0.0.0.0 only.
fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>> {
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| anyhow!("rendezvous: MASTER_ADDR={host:?} does not resolve: {e}"))?
        .filter(SocketAddr::is_ipv4)
        .collect();
    if addrs.is_empty() {
        bail!(
            "rendezvous: MASTER_ADDR={host:?} has no IPv4 address, and rank 0 listens on IPv4 \
             (0.0.0.0)"
        );
    }
    Ok(addrs)
}

/// A connection to one of `addrs`, tried in turn every [`RETRY_EVERY`]
/// until `deadline`; `None` when none answered.
fn connect(addrs: &[SocketAddr], deadline: Instant) -> Option<TcpStream> {
    loop {
        for addr in addrs {
            let left = remaining(deadline)?;
            if let Ok(stream) = TcpStream::connect_timeout(addr, left.min(CONNECT_ATTEMPT)) {
                return Some(stream);
            }
        }
        thread::sleep(remaining(deadline)?.min(RETRY_EVERY));
    }
}

/// A hello (see the module doc).
fn hello(rank: usize, world_size: usize, fingerprint: &[u8]) -> Result<Vec<u8>> {
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
fn read_answer(
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

/// How far the bytes received on a connection go towards a hello.
#[derive(Debug, PartialEq)]
enum Parsed {
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

fn parse_hello(buf: &[u8]) -> Parsed {
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
struct Joins {
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

    fn missing(&self) -> Vec<usize> {
        (1..self.world_size)
            .filter(|&r| self.joined[r].is_none())
            .collect()
    }

    /// Why the run is refused, if it is: the first problem in rank order,
    /// so that the message does not depend on who connected first.
    fn verdict(&self, fingerprint: &[u8]) -> Option<String> {
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
    fn refuse_all(self, why: &str) {
        for h in self.joined.into_iter().flatten().chain(self.extras) {
            let mut stream = h.stream;
            let _ = refuse(&mut stream, why);
        }
    }

    /// Sends the id to every rank; the streams in rank order, from rank 1.
    fn send_id(self, id: &[u8; ID_BYTES]) -> Result<Vec<TcpStream>> {
        let deadline = Instant::now() + ANSWER_TIMEOUT;
        let mut answer = Vec::with_capacity(1 + ID_BYTES);
        answer.push(STATUS_OK);
        answer.extend_from_slice(id);
        let mut streams = Vec::with_capacity(self.world_size.saturating_sub(1));
        for h in self.joined.into_iter().flatten() {
            let mut stream = h.stream;
            write_all_by(&mut stream, &answer, deadline).map_err(|f| {
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
/// known to be refused. Polls a non-blocking listener and connections, so
/// that neither a silent stranger nor a slow rank holds up the others.
fn wait_for_ranks(
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
                    let _ = refuse(&mut p.stream, &other_version(p.peer, v));
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

/// Sends a refusal: status, length, reason.
fn refuse(stream: &mut TcpStream, why: &str) -> std::result::Result<(), Fail> {
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

fn receive_payload(
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

fn send_payload(
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

/// Why a bounded read or write stopped short.
#[derive(Debug)]
enum Fail {
    /// The peer closed or reset the connection.
    Closed,
    /// The deadline passed.
    TimedOut,
    Io(io::Error),
}

impl Fail {
    fn reason(&self) -> String {
        match self {
            Fail::Closed => "the connection was closed".to_string(),
            Fail::TimedOut => "timed out".to_string(),
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
fn is_gone(e: &io::Error) -> bool {
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

/// Time left before `deadline`; `None` once it has passed.
fn remaining(deadline: Instant) -> Option<Duration> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
}

/// `read_exact` that gives up at `deadline`: the socket's timeout is
/// renewed before each read, as a peer may trickle bytes forever.
fn read_exact_by(
    stream: &mut TcpStream,
    buf: &mut [u8],
    deadline: Instant,
) -> std::result::Result<(), Fail> {
    let mut got = 0;
    while got < buf.len() {
        let left = remaining(deadline).ok_or(Fail::TimedOut)?;
        stream.set_read_timeout(Some(left)).map_err(Fail::Io)?;
        match stream.read(&mut buf[got..]) {
            Ok(0) => return Err(Fail::Closed),
            Ok(n) => got += n,
            Err(e) if is_retry(&e) => {}
            Err(e) => return Err(Fail::from_io(e)),
        }
    }
    Ok(())
}

/// `write_all` that gives up at `deadline`.
fn write_all_by(
    stream: &mut TcpStream,
    buf: &[u8],
    deadline: Instant,
) -> std::result::Result<(), Fail> {
    let mut sent = 0;
    while sent < buf.len() {
        let left = remaining(deadline).ok_or(Fail::TimedOut)?;
        stream.set_write_timeout(Some(left)).map_err(Fail::Io)?;
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
fn seconds(d: Duration) -> String {
    let s = format!("{:.1}", d.as_secs_f64());
    format!("{} s", s.strip_suffix(".0").unwrap_or(&s))
}

/// Ranks for messages: all of a few, the first 16 of many.
fn rank_list(ranks: &[usize]) -> String {
    const SHOWN: usize = 16;
    let shown: Vec<String> = ranks.iter().take(SHOWN).map(usize::to_string).collect();
    match ranks.len().checked_sub(SHOWN) {
        Some(more) if more > 0 => format!("{} and {more} more", shown.join(", ")),
        _ => shown.join(", "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::launch::Launcher;
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    use std::process::{Child, Command, Stdio};

    const FP: &str = "resnet50 batch=64 dtype=f32";
    const LONG: Duration = Duration::from_secs(20);

    fn world(rank: usize, world_size: usize, port: u16) -> World {
        World {
            launcher: Launcher::Torchrun,
            rank,
            world_size,
            local_rank: rank,
            master_addr: "127.0.0.1".to_string(),
            master_port: port,
        }
    }

    /// A listener on a port the kernel picked, and the port.
    fn loopback() -> (TcpListener, u16) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        (listener, port)
    }

    /// A port nothing listens on (free a moment ago).
    fn free_port() -> u16 {
        loopback().1
    }

    fn random_id() -> [u8; ID_BYTES] {
        let mut h = RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        let mut x = h.finish() | 1;
        let mut id = [0u8; ID_BYTES];
        for b in &mut id {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = (x >> 32) as u8;
        }
        id
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Rank 0 on `listener`, in this thread.
    fn host(
        listener: TcpListener,
        world: &World,
        id: [u8; ID_BYTES],
        fp: &str,
        timeout: Duration,
    ) -> Result<(Rendezvous, [u8; ID_BYTES])> {
        Rendezvous::host(listener, world, id, fp, timeout)
    }

    /// A joining rank in a thread.
    fn spawn_rank(
        world: World,
        fp: &'static str,
        timeout: Duration,
    ) -> thread::JoinHandle<Result<(Rendezvous, [u8; ID_BYTES])>> {
        thread::spawn(move || Rendezvous::join(&world, None, fp, timeout))
    }

    fn error_of<T>(r: Result<T>) -> String {
        match r {
            Ok(_) => panic!("expected an error"),
            Err(e) => {
                let msg = e.to_string();
                assert!(!msg.contains('\n'), "not one line: {msg}");
                msg
            }
        }
    }

    fn payload_of(rank: usize) -> Vec<u8> {
        // Rank 2 sends nothing: empty results must survive too.
        match rank {
            2 => Vec::new(),
            r => format!("results of rank {r};")
                .repeat(r * 1000)
                .into_bytes(),
        }
    }

    #[test]
    fn four_threads_share_the_id_and_gather_in_rank_order() {
        let (listener, port) = loopback();
        let id = random_id();
        let ranks: Vec<_> = (1..4)
            .map(|r| {
                thread::spawn(move || {
                    let (mut rdv, got) = Rendezvous::join(&world(r, 4, port), None, FP, LONG)?;
                    assert_eq!((rdv.rank(), rdv.world_size()), (r, 4));
                    let gathered = rdv.gather(&payload_of(r), LONG)?;
                    anyhow::Ok((got, gathered))
                })
            })
            .collect();
        let (mut rdv, own) = host(listener, &world(0, 4, port), id, FP, LONG).unwrap();
        assert_eq!(own, id);
        assert_eq!((rdv.rank(), rdv.world_size()), (0, 4));
        let all = rdv.gather(&payload_of(0), LONG).unwrap().unwrap();
        assert_eq!(all, (0..4).map(payload_of).collect::<Vec<_>>());
        for r in ranks {
            let (got, gathered) = r.join().unwrap().unwrap();
            assert_eq!(got, id);
            assert!(gathered.is_none());
        }
    }

    /// Tells a child process which rank it is: `rank,world,port,hex id`.
    const CHILD_VAR: &str = "CNNBENCH_RDV_CHILD";

    /// A rank in a process of its own, started by
    /// `ranks_in_separate_processes`; does nothing in a normal test run.
    #[test]
    fn child_rank() {
        let Ok(spec) = std::env::var(CHILD_VAR) else {
            return;
        };
        let parts: Vec<&str> = spec.split(',').collect();
        let [rank, world_size, port, id] = parts[..] else {
            panic!("{CHILD_VAR}={spec:?}: expected rank,world,port,id");
        };
        let rank: usize = rank.parse().unwrap();
        let world = world(rank, world_size.parse().unwrap(), port.parse().unwrap());
        let (mut rdv, got) = Rendezvous::join(&world, None, FP, LONG).unwrap();
        assert_eq!(hex(&got), id, "rank {rank} got another id");
        assert!(rdv.gather(&payload_of(rank), LONG).unwrap().is_none());
    }

    /// Kills, on the way out, whatever children have not exited.
    struct Children(Vec<Child>);

    impl Drop for Children {
        fn drop(&mut self) {
            for c in &mut self.0 {
                if let Ok(None) = c.try_wait() {
                    let _ = c.kill();
                    let _ = c.wait();
                }
            }
        }
    }

    #[test]
    fn ranks_in_separate_processes() {
        let (listener, port) = loopback();
        let id = random_id();
        let n = 4;
        let exe = std::env::current_exe().unwrap();
        let children: Vec<Child> = (1..n)
            .map(|r| {
                Command::new(&exe)
                    .args(["--exact", "dist::rendezvous::tests::child_rank"])
                    .args(["--nocapture", "--test-threads=1"])
                    .env(CHILD_VAR, format!("{r},{n},{port},{}", hex(&id)))
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut children = Children(children);
        let rank0 = host(listener, &world(0, n, port), id, FP, LONG)
            .and_then(|(mut rdv, own)| Ok((own, rdv.gather(&payload_of(0), LONG)?)));
        // However rank 0 fared, a child's own account of it comes first.
        let deadline = Instant::now() + LONG;
        for (i, c) in children.0.iter_mut().enumerate() {
            let status = loop {
                if let Some(status) = c.try_wait().unwrap() {
                    break status;
                }
                assert!(Instant::now() < deadline, "rank {} hangs", i + 1);
                thread::sleep(Duration::from_millis(10));
            };
            let mut out = String::new();
            if let Some(mut pipe) = c.stdout.take() {
                let _ = pipe.read_to_string(&mut out);
            }
            if let Some(mut pipe) = c.stderr.take() {
                let _ = pipe.read_to_string(&mut out);
            }
            let rank0_err = rank0.as_ref().err().map(|e| e.to_string());
            assert!(
                status.success(),
                "rank {} failed (rank 0: {rank0_err:?}): {out}",
                i + 1
            );
            assert!(
                out.contains("1 passed"),
                "rank {} ran no test: {out}",
                i + 1
            );
        }
        let (own, all) = rank0.unwrap();
        assert_eq!(own, id);
        assert_eq!(all, Some((0..n).map(payload_of).collect::<Vec<_>>()));
    }

    #[test]
    fn rank0_times_out_naming_the_missing_ranks() {
        let (listener, port) = loopback();
        let rank2 = spawn_rank(world(2, 4, port), FP, LONG);
        let start = Instant::now();
        let msg = error_of(host(
            listener,
            &world(0, 4, port),
            random_id(),
            FP,
            Duration::from_secs(1),
        ));
        let took = start.elapsed();
        assert_eq!(
            msg,
            format!(
                "rendezvous at 127.0.0.1:{port}: 2 of 4 ranks joined within 1 s \
                 (missing ranks: 1, 3)"
            )
        );
        assert!(
            took >= Duration::from_secs(1) && took < Duration::from_secs(3),
            "{took:?}"
        );
        // The rank that came hears why at once, not at its own deadline.
        assert_eq!(
            error_of(rank2.join().unwrap()),
            "rendezvous: rank 0 refused this rank: 2 of 4 ranks joined within 1 s \
             (missing ranks: 1, 3)"
        );
    }

    #[test]
    fn joining_rank_times_out_without_rank0() {
        let port = free_port();
        let start = Instant::now();
        let r = Rendezvous::join(&world(1, 2, port), None, FP, Duration::from_secs(1));
        let took = start.elapsed();
        assert_eq!(
            error_of(r),
            format!(
                "rendezvous: no answer from rank 0 at 127.0.0.1:{port} within 1 s (is MASTER_ADDR \
                 right, and is rank 0 running?)"
            )
        );
        assert!(
            took >= Duration::from_secs(1) && took < Duration::from_secs(3),
            "{took:?}"
        );
    }

    #[test]
    fn joining_rank_times_out_when_rank0_never_answers() {
        // Connections complete in the listener's backlog; nobody reads them.
        let (_listener, port) = loopback();
        let start = Instant::now();
        let r = Rendezvous::join(&world(1, 2, port), None, FP, Duration::from_millis(500));
        assert!(error_of(r).contains("did not answer within 0.5 s"));
        assert!(start.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn addresses_and_ports_are_named() {
        let mut w = world(1, 2, 29500);
        w.master_addr = "::1".to_string();
        let msg = error_of(Rendezvous::join(&w, None, FP, LONG));
        assert!(
            msg.contains("MASTER_ADDR=\"::1\" has no IPv4 address"),
            "{msg}"
        );

        let taken = TcpListener::bind("0.0.0.0:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let msg = error_of(Rendezvous::join(
            &world(0, 2, port),
            Some(random_id()),
            FP,
            LONG,
        ));
        assert!(
            msg.starts_with(&format!(
                "rendezvous: cannot listen on 0.0.0.0:{port} (MASTER_PORT={port}):"
            )),
            "{msg}"
        );
    }

    #[test]
    fn fingerprint_mismatch_refuses_every_rank() {
        let (listener, port) = loopback();
        let rank1 = spawn_rank(world(1, 3, port), FP, LONG);
        let rank2 = spawn_rank(world(2, 3, port), "resnet50 batch=32 dtype=f32", LONG);
        let msg = error_of(host(listener, &world(0, 3, port), random_id(), FP, LONG));
        let why = "rank 2 runs a different configuration from rank 0: rank 2 has \
                   \"resnet50 batch=32 dtype=f32\", rank 0 has \"resnet50 batch=64 dtype=f32\"";
        assert_eq!(msg, format!("rendezvous: {why}"));
        for r in [rank1, rank2] {
            assert_eq!(
                error_of(r.join().unwrap()),
                format!("rendezvous: rank 0 refused this rank: {why}")
            );
        }
    }

    #[test]
    fn world_size_mismatch_refuses_every_rank() {
        let (listener, port) = loopback();
        let rank1 = spawn_rank(world(1, 3, port), FP, LONG);
        let msg = error_of(host(listener, &world(0, 2, port), random_id(), FP, LONG));
        assert_eq!(
            msg,
            "rendezvous: rank 1 says the world has 3 ranks, rank 0 says 2"
        );
        assert_eq!(
            error_of(rank1.join().unwrap()),
            "rendezvous: rank 0 refused this rank: rank 1 says the world has 3 ranks, rank 0 says 2"
        );
    }

    #[test]
    fn a_refused_run_does_not_wait_out_the_timeout() {
        // Rank 0 expects rank 2, which never comes; rank 1's world is
        // wrong anyway, so rank 0 gives up after the grace, not the timeout.
        let (listener, port) = loopback();
        let rank1 = spawn_rank(world(1, 2, port), FP, LONG);
        let start = Instant::now();
        let msg = error_of(host(listener, &world(0, 3, port), random_id(), FP, LONG));
        assert_eq!(
            msg,
            "rendezvous: rank 1 says the world has 2 ranks, rank 0 says 3"
        );
        assert!(start.elapsed() < PROBLEM_GRACE + Duration::from_secs(1));
        assert!(error_of(rank1.join().unwrap()).contains("rank 0 refused this rank"));
    }

    #[test]
    fn a_rank_claimed_twice_is_refused() {
        let (listener, port) = loopback();
        // Hellos sent before rank 0 looks: it reads all three at once, so
        // the second claim to rank 1 is seen before ranks 1 and 2 complete.
        let mut ranks: Vec<TcpStream> = [1, 1, 2]
            .iter()
            .map(|&r| {
                let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
                s.write_all(&hello(r, 3, FP.as_bytes()).unwrap()).unwrap();
                s
            })
            .collect();
        let msg = error_of(host(listener, &world(0, 3, port), random_id(), FP, LONG));
        let why = msg.strip_prefix("rendezvous: ").unwrap();
        assert!(
            why.starts_with("two processes claim rank 1 (127.0.0.1:"),
            "{msg}"
        );
        for s in &mut ranks {
            let answer = read_answer(s, "rank 0", Instant::now() + LONG, LONG);
            assert_eq!(
                error_of(answer),
                format!("rendezvous: rank 0 refused this rank: {why}")
            );
        }
    }

    #[test]
    fn strangers_do_not_hold_up_a_good_rank() {
        let (listener, port) = loopback();
        let at = ("127.0.0.1", port);
        // Silent, an HTTP client, half a tag then silence, and a hello
        // announcing a fingerprint no cnnbench sends.
        let _silent = TcpStream::connect(at).unwrap();
        let mut http = TcpStream::connect(at).unwrap();
        http.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut half = TcpStream::connect(at).unwrap();
        half.write_all(b"cnnb").unwrap();
        let mut huge = TcpStream::connect(at).unwrap();
        let mut h = hello(1, 2, b"").unwrap();
        h[HEADER_BYTES - 4..].copy_from_slice(&u32::MAX.to_le_bytes());
        huge.write_all(&h).unwrap();
        let rank1 = spawn_rank(world(1, 2, port), FP, LONG);
        let start = Instant::now();
        let id = random_id();
        let (_rdv, own) = host(listener, &world(0, 2, port), id, FP, LONG).unwrap();
        assert_eq!(own, id);
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
        assert_eq!(rank1.join().unwrap().unwrap().1, id);
        // The stranger heard nothing: the connection is simply closed.
        http.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut rest = Vec::new();
        assert!(http
            .read_to_end(&mut rest)
            .map_or(true, |_| rest.is_empty()));
    }

    #[test]
    fn another_protocol_version_is_refused() {
        let (listener, port) = loopback();
        let mut old = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let mut h = hello(1, 2, b"").unwrap();
        h[TAG.len()..TAG.len() + 4].copy_from_slice(&2u32.to_le_bytes());
        old.write_all(&h[..TAG.len() + 4]).unwrap();
        let rank1 = spawn_rank(world(1, 2, port), FP, LONG);
        let msg = error_of(host(listener, &world(0, 2, port), random_id(), FP, LONG));
        assert!(
            msg.contains("speaks rendezvous protocol version 2, rank 0 speaks 1"),
            "{msg}"
        );
        assert!(error_of(rank1.join().unwrap()).contains("protocol version 2"));
        // The other version hears why, in the answer format all versions share.
        old.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut answer = Vec::new();
        let _ = old.read_to_end(&mut answer);
        assert_eq!(answer.first(), Some(&STATUS_REFUSED));
        assert!(String::from_utf8_lossy(&answer[5..]).contains("version 2"));
    }

    #[test]
    fn gather_names_a_rank_that_closes_early() {
        let (listener, port) = loopback();
        let rank1 = thread::spawn(move || {
            let (mut rdv, _) = Rendezvous::join(&world(1, 3, port), None, FP, LONG)?;
            rdv.gather(b"fine", LONG)
        });
        // Rank 2 joins and leaves without results.
        let rank2 = spawn_rank(world(2, 3, port), FP, LONG);
        let (mut rdv, _) = host(listener, &world(0, 3, port), random_id(), FP, LONG).unwrap();
        drop(rank2.join().unwrap().unwrap());
        assert_eq!(
            error_of(rdv.gather(b"", LONG)),
            "rendezvous: rank 2 closed the connection before sending its results"
        );
        assert!(rank1.join().unwrap().unwrap().is_none());
    }

    #[test]
    fn gather_times_out_naming_the_rank() {
        let (listener, port) = loopback();
        let rank1 = spawn_rank(world(1, 2, port), FP, LONG);
        let (mut rdv, _) = host(listener, &world(0, 2, port), random_id(), FP, LONG).unwrap();
        // Rank 1 holds its connection and sends nothing.
        let _quiet = rank1.join().unwrap().unwrap();
        let start = Instant::now();
        assert_eq!(
            error_of(rdv.gather(b"", Duration::from_millis(500))),
            "rendezvous: rank 1's results did not arrive within 0.5 s"
        );
        assert!(start.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn oversized_payloads_are_refused() {
        let (mut rdv, _) = Rendezvous::join(&world(0, 1, 1), Some(random_id()), FP, LONG).unwrap();
        let msg = error_of(rdv.gather(&vec![0u8; MAX_PAYLOAD_BYTES + 1], LONG));
        assert!(
            msg.contains("this rank's results are 67108865 bytes"),
            "{msg}"
        );

        // A peer announcing more than the cap is refused before any allocation.
        let (listener, port) = loopback();
        let mut liar = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (mut stream, _) = listener.accept().unwrap();
        liar.write_all(&u64::MAX.to_le_bytes()).unwrap();
        let msg = error_of(receive_payload(&mut stream, 3, Instant::now() + LONG, LONG));
        assert!(
            msg.starts_with("rendezvous: rank 3 announced 18446744073709551615 bytes"),
            "{msg}"
        );
    }

    #[test]
    fn a_world_of_one_needs_no_network() {
        let id = random_id();
        // Port 1 would need privileges: nothing listens or connects.
        let (mut rdv, own) = Rendezvous::join(&world(0, 1, 1), Some(id), FP, LONG).unwrap();
        assert_eq!(own, id);
        assert_eq!(
            rdv.gather(b"mine", LONG).unwrap(),
            Some(vec![b"mine".to_vec()])
        );
    }

    #[test]
    fn misuse_is_refused() {
        let msg = error_of(Rendezvous::join(&world(0, 2, 1), None, FP, LONG));
        assert_eq!(msg, "rendezvous: rank 0 must bring the NCCL id it made");
        let msg = error_of(Rendezvous::join(
            &world(1, 2, 1),
            Some(random_id()),
            FP,
            LONG,
        ));
        assert_eq!(
            msg,
            "rendezvous: only rank 0 brings an NCCL id; rank 1 receives it"
        );
        let long = "x".repeat(MAX_FINGERPRINT_BYTES + 1);
        let msg = error_of(Rendezvous::join(&world(1, 2, 1), None, &long, LONG));
        assert!(msg.contains("fingerprint is 65537 bytes"), "{msg}");
        let msg = error_of(Rendezvous::join(&world(2, 2, 1), None, FP, LONG));
        assert_eq!(msg, "rendezvous: rank 2 is not in a world of 2 ranks");
    }

    #[test]
    fn hello_parsing() {
        let h = hello(3, 8, b"fp").unwrap();
        assert_eq!(parse_hello(&h), Parsed::Done(3, 8, 2));
        assert_eq!(parse_hello(&h[..5]), Parsed::Incomplete(TAG.len() + 4));
        assert_eq!(parse_hello(&h[..20]), Parsed::Incomplete(HEADER_BYTES));
        assert_eq!(
            parse_hello(&h[..HEADER_BYTES]),
            Parsed::Incomplete(HEADER_BYTES + 2)
        );
        assert_eq!(parse_hello(b""), Parsed::Incomplete(TAG.len() + 4));
        assert_eq!(parse_hello(b"GET "), Parsed::Stranger);
        assert_eq!(seconds(Duration::from_secs(30)), "30 s");
        assert_eq!(seconds(Duration::from_millis(1500)), "1.5 s");
        assert_eq!(rank_list(&[1, 3]), "1, 3");
        assert_eq!(
            rank_list(&(1..=20).collect::<Vec<_>>()),
            format!(
                "{} and 4 more",
                (1..=16)
                    .map(|r| r.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        );
    }
}
