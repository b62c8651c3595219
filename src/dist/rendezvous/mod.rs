//! How the launched ranks find each other before NCCL takes over.
//!
//! Rank 0 makes the NCCL unique id and hands it to the other ranks over
//! TCP at `MASTER_ADDR:MASTER_PORT`; at the end it gathers every rank's
//! results over the same connections. Gradients never pass here: only the
//! id, a check that all ranks run the same configuration, and the results.
//!
//! # Protocol (version 2)
//!
//! Integers are little endian. Every message, in both directions, starts
//! with the tag `cnnbench-rdv` (12 bytes) and the protocol version (u32,
//! 2), and its reader checks both before anything else: a joining rank
//! that meets a stranger on `MASTER_PORT` fails in one line naming the
//! address and the bytes it received, instead of taking them for an id.
//! Rank 0 listens on `0.0.0.0:MASTER_PORT`; every other rank connects
//! (retrying every 100 ms until its deadline, as rank 0 may start later)
//! and sends a hello:
//!
//! | bytes | field                                        |
//! |-------|----------------------------------------------|
//! | 12    | `cnnbench-rdv`                               |
//! | 4     | protocol version, u32 (2)                    |
//! | 4     | rank, u32                                    |
//! | 4     | world size, u32                              |
//! | 4     | fingerprint length, u32, at most 64 KiB      |
//! | n     | fingerprint: the run's configuration         |
//!
//! Rank 0 ignores connections that do not start with the tag (a stranger
//! on the port) or send nothing for 5 s, and waits until every rank from 1
//! to world size - 1 has said hello. It then checks, in rank order, each
//! rank's world size, that no rank is claimed twice, and the fingerprint,
//! and answers every rank with the tag, the version and one status byte: 0
//! followed by the 128-byte id, or 1 followed by a u32 length and a
//! one-line UTF-8 reason, so that every rank fails with the reason rank 0
//! fails with. A process that says hello in another protocol version is
//! refused in version 1's answer format (status, length, reason: no tag),
//! which every older build reads. Once a problem is seen rank 0 waits at
//! most 2 s more for the missing ranks, so that those started at the same
//! moment hear the reason too.
//!
//! [`Rendezvous::gather`]: every rank other than 0 sends the tag, the
//! version, its payload's length (u64, at most 64 MiB) and the bytes; rank
//! 0 reads them in rank order. Nothing answers them: a rank's results
//! matter only to rank 0.
//!
//! Every wait (connecting, the hellos, the answer, the results) ends
//! within a second of the first stop signal (SIGINT, SIGTERM, SIGHUP) with
//! an error that says the rank was stopped; rank 0, stopped, tells the
//! ranks that joined.

mod deadline;
mod join;
#[cfg(test)]
mod tests;
mod wire;

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};

use super::launch::World;
use deadline::{remaining, seconds, stopped, write_all_by, Fail};
use join::wait_for_ranks;
use wire::{hello, read_answer, receive_payload, send_payload};
pub use wire::{ID_BYTES, MAX_FINGERPRINT_BYTES, MAX_PAYLOAD_BYTES};

/// How often a joining rank tries to connect while rank 0 is not up.
const RETRY_EVERY: Duration = Duration::from_millis(100);

/// Longest single connection attempt: an address that drops packets must
/// not eat the whole deadline in one try.
const CONNECT_ATTEMPT: Duration = Duration::from_secs(1);

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
        let stopped = || {
            anyhow!(
                "rendezvous: {} while waiting for rank 0 at {rank0}",
                crate::signals::stopped_by()
            )
        };
        let mut stream = connect(&addrs, deadline).map_err(|f| match f {
            Fail::Stopped => stopped(),
            _ => no_answer(),
        })?;
        // Small messages, each awaited: Nagle's algorithm would only delay them.
        let _ = stream.set_nodelay(true);
        let hello = hello(world.rank, world.world_size, fingerprint.as_bytes())?;
        write_all_by(&mut stream, &hello, deadline).map_err(|f| match f {
            Fail::TimedOut => no_answer(),
            Fail::Stopped => stopped(),
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
/// until `deadline` (`Fail::TimedOut`) or a stop signal (`Fail::Stopped`).
fn connect(addrs: &[SocketAddr], deadline: Instant) -> std::result::Result<TcpStream, Fail> {
    loop {
        for addr in addrs {
            if stopped() {
                return Err(Fail::Stopped);
            }
            let left = remaining(deadline).ok_or(Fail::TimedOut)?;
            // A stop signal is seen within CONNECT_ATTEMPT even where an
            // address drops packets.
            if let Ok(stream) = TcpStream::connect_timeout(addr, left.min(CONNECT_ATTEMPT)) {
                return Ok(stream);
            }
        }
        if stopped() {
            return Err(Fail::Stopped);
        }
        thread::sleep(remaining(deadline).ok_or(Fail::TimedOut)?.min(RETRY_EVERY));
    }
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
