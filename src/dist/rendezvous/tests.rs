use super::join::PROBLEM_GRACE;
use super::wire::{
    hello, parse_hello, prefix, Parsed, HEADER_BYTES, PREFIX_BYTES, STATUS_OK, STATUS_REFUSED, TAG,
    VERSION,
};
use super::*;
use crate::dist::launch::Launcher;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io::{Read, Write};
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
    h[TAG.len()..TAG.len() + 4].copy_from_slice(&1u32.to_le_bytes());
    old.write_all(&h[..TAG.len() + 4]).unwrap();
    let rank1 = spawn_rank(world(1, 2, port), FP, LONG);
    let msg = error_of(host(listener, &world(0, 2, port), random_id(), FP, LONG));
    assert!(
        msg.contains("speaks rendezvous protocol version 1, rank 0 speaks 2"),
        "{msg}"
    );
    assert!(error_of(rank1.join().unwrap()).contains("protocol version 1"));
    // The other version hears why, in the answer format all versions share.
    old.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut answer = Vec::new();
    let _ = old.read_to_end(&mut answer);
    assert_eq!(answer.first(), Some(&STATUS_REFUSED));
    assert!(String::from_utf8_lossy(&answer[5..]).contains("version 1"));
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
    liar.write_all(&prefix()).unwrap();
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

/// A fake rank 0 on a loopback port: reads a hello, answers `answer`, and
/// keeps the connection open until the rank has read it.
fn fake_rank0(answer: Vec<u8>) -> (u16, thread::JoinHandle<()>) {
    let (listener, port) = loopback();
    let t = thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut h = vec![0u8; HEADER_BYTES + FP.len()];
        let _ = s.read_exact(&mut h);
        let _ = s.write_all(&answer);
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = s.read_to_end(&mut Vec::new());
    });
    (port, t)
}

#[test]
fn a_stranger_answering_zero_bytes_is_refused_in_one_line() {
    // Version 1 took these 129 bytes for status 0 and an all-zero id.
    let (port, fake) = fake_rank0(vec![0u8; 1 + ID_BYTES]);
    let start = Instant::now();
    let msg = error_of(Rendezvous::join(&world(1, 2, port), None, FP, LONG));
    assert_eq!(
        msg,
        format!(
            "rendezvous: the process at 127.0.0.1:{port} (MASTER_PORT) is not a cnnbench rank \
             0: it answered 1 byte (00) where the rendezvous tag 'cnnbench-rdv' was due"
        )
    );
    assert!(start.elapsed() < Duration::from_secs(2));
    drop(fake);
    // Half the tag, then a wrong byte; and half the tag, then closed.
    let (port, _fake) = fake_rank0(b"cnnbXXXX".to_vec());
    let msg = error_of(Rendezvous::join(&world(1, 2, port), None, FP, LONG));
    assert!(msg.contains("answered 5 bytes (63 6e 6e 62 58)"), "{msg}");
}

#[test]
fn answers_of_another_version_and_unknown_status_are_refused() {
    let mut other = TAG.to_vec();
    other.extend_from_slice(&9u32.to_le_bytes());
    other.push(STATUS_OK);
    other.extend_from_slice(&[7u8; ID_BYTES]);
    let (port, _fake) = fake_rank0(other);
    let msg = error_of(Rendezvous::join(&world(1, 2, port), None, FP, LONG));
    assert_eq!(
        msg,
        format!(
            "rendezvous: rank 0 at 127.0.0.1:{port} speaks rendezvous protocol version 9, this \
             rank speaks {VERSION} (are all ranks the same cnnbench build?)"
        )
    );
    let mut odd = prefix().to_vec();
    odd.push(42);
    let (port, _fake) = fake_rank0(odd);
    let msg = error_of(Rendezvous::join(&world(1, 2, port), None, FP, LONG));
    assert!(msg.ends_with("answered with unknown status 42"), "{msg}");
}

#[test]
fn rank0_answers_carry_the_tag_and_version() {
    // The id, to a rank that joined.
    let (listener, port) = loopback();
    let mut rank1 = TcpStream::connect(("127.0.0.1", port)).unwrap();
    rank1
        .write_all(&hello(1, 2, FP.as_bytes()).unwrap())
        .unwrap();
    let id = random_id();
    let (_rdv, _) = host(listener, &world(0, 2, port), id, FP, LONG).unwrap();
    let mut answer = vec![0u8; PREFIX_BYTES + 1 + ID_BYTES];
    rank1.read_exact(&mut answer).unwrap();
    assert_eq!(&answer[..PREFIX_BYTES], &prefix());
    assert_eq!(&answer[..TAG.len()], TAG);
    assert_eq!(answer[PREFIX_BYTES], STATUS_OK);
    assert_eq!(&answer[PREFIX_BYTES + 1..], &id);
    // A refusal, to a rank of another configuration.
    let (listener, port) = loopback();
    let mut rank1 = TcpStream::connect(("127.0.0.1", port)).unwrap();
    rank1.write_all(&hello(1, 2, b"other").unwrap()).unwrap();
    error_of(host(listener, &world(0, 2, port), random_id(), FP, LONG));
    let mut answer = Vec::new();
    rank1
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let _ = rank1.read_to_end(&mut answer);
    assert_eq!(&answer[..PREFIX_BYTES], &prefix());
    assert_eq!(answer[PREFIX_BYTES], STATUS_REFUSED);
}

#[test]
fn results_carry_the_tag_both_ways() {
    // What a joining rank sends.
    let (listener, port) = loopback();
    let mut out = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let (mut inn, _) = listener.accept().unwrap();
    let deadline = Instant::now() + LONG;
    super::wire::send_payload(&mut out, "rank 0", b"abc", deadline, LONG).unwrap();
    let mut raw = vec![0u8; PREFIX_BYTES + 8 + 3];
    inn.read_exact(&mut raw).unwrap();
    assert_eq!(&raw[..PREFIX_BYTES], &prefix());
    assert_eq!(&raw[PREFIX_BYTES..PREFIX_BYTES + 8], &3u64.to_le_bytes());
    assert_eq!(&raw[PREFIX_BYTES + 8..], b"abc");
    // What rank 0 refuses: results without the tag, or of another version.
    out.write_all(&[0u8; 24]).unwrap();
    let msg = error_of(receive_payload(&mut inn, 3, deadline, LONG));
    assert_eq!(
        msg,
        "rendezvous: rank 3 sent 1 byte (00) where its results' tag 'cnnbench-rdv' was due"
    );
    let (listener, port) = loopback();
    let mut out = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let (mut inn, _) = listener.accept().unwrap();
    let mut old = TAG.to_vec();
    old.extend_from_slice(&1u32.to_le_bytes());
    out.write_all(&old).unwrap();
    let msg = error_of(receive_payload(&mut inn, 1, deadline, LONG));
    assert!(msg.contains("protocol version 1, rank 0 speaks 2"), "{msg}");
}

/// Tells a child process to wait at the rendezvous until a signal stops
/// it: `rank,port`.
const STOP_CHILD_VAR: &str = "CNNBENCH_RDV_STOP_CHILD";

/// A rank waiting (rank 0 for its ranks, or rank 1 for rank 0's answer)
/// in a process of its own, started by `a_stop_signal_ends_the_wait`; the
/// error it prints is checked there. Does nothing in a normal test run.
#[test]
fn child_waiting_rank() {
    let Ok(spec) = std::env::var(STOP_CHILD_VAR) else {
        return;
    };
    let (rank, port) = spec.split_once(',').unwrap();
    let (rank, port): (usize, u16) = (rank.parse().unwrap(), port.parse().unwrap());
    crate::signals::install().unwrap();
    let long = Duration::from_secs(120);
    let msg = match rank {
        0 => error_of(Rendezvous::join(
            &world(0, 3, port),
            Some(random_id()),
            FP,
            long,
        )),
        _ => error_of(Rendezvous::join(&world(rank, 3, port), None, FP, long)),
    };
    // The parent reads the child's stdout; a test may print.
    #[allow(clippy::print_stdout)]
    {
        println!("ERROR: {msg}");
    }
}

#[test]
fn a_stop_signal_ends_the_wait() {
    let exe = std::env::current_exe().unwrap();
    // Rank 1 waiting for an answer from a rank 0 that never answers (the
    // listener accepts into its backlog), and rank 0 waiting for ranks 1
    // and 2 (a raw rank 1 joins, rank 2 never comes).
    let (_silent, silent_port) = loopback();
    let rank0_port = free_port();
    for (rank, port, want) in [
        (1, silent_port, format!("rendezvous: stopped by SIGTERM while waiting for rank 0 at 127.0.0.1:{silent_port} to answer")),
        (2, free_port(), "rendezvous: stopped by SIGTERM while waiting for rank 0 at 127.0.0.1:".to_string()),
        (0, rank0_port, format!("rendezvous at 0.0.0.0:{rank0_port}: stopped by SIGTERM while waiting for the ranks to join (2 of 3 had, rank 0 included)")),
    ] {
        let mut child = Children(vec![Command::new(&exe)
            .args(["--exact", "dist::rendezvous::tests::child_waiting_rank"])
            .args(["--nocapture", "--test-threads=1"])
            .env(STOP_CHILD_VAR, format!("{rank},{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()]);
        let c = &mut child.0[0];
        let mut joined = None;
        if rank == 0 {
            // Rank 1 says hello once rank 0 listens.
            let deadline = Instant::now() + LONG;
            let mut s = loop {
                if let Ok(s) = TcpStream::connect(("127.0.0.1", port)) {
                    break s;
                }
                assert!(Instant::now() < deadline, "rank 0 never listened");
                thread::sleep(Duration::from_millis(20));
            };
            s.write_all(&hello(1, 3, FP.as_bytes()).unwrap()).unwrap();
            joined = Some(s);
        }
        thread::sleep(Duration::from_millis(700));
        crate::signals::send(c.id(), crate::signals::SIGTERM);
        let sent = Instant::now();
        let status = loop {
            if let Some(status) = c.try_wait().unwrap() {
                break status;
            }
            assert!(sent.elapsed() < Duration::from_secs(10), "rank {rank} ignored SIGTERM");
            thread::sleep(Duration::from_millis(10));
        };
        assert!(
            sent.elapsed() < Duration::from_secs(3),
            "rank {rank} took {:?} to stop",
            sent.elapsed()
        );
        let mut out = String::new();
        c.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        assert!(status.success(), "rank {rank}: {out}");
        assert!(out.contains(&format!("ERROR: {want}")), "rank {rank}: {out}");
        assert!(!out.contains("missing"), "rank {rank} blames missing ranks: {out}");
        if let Some(mut s) = joined {
            // The rank that joined hears that rank 0 was stopped.
            let answer = read_answer(&mut s, "rank 0", Instant::now() + LONG, LONG);
            assert_eq!(
                error_of(answer),
                "rendezvous: rank 0 refused this rank: rank 0 was stopped by SIGTERM before \
                 every rank had joined"
            );
        }
    }
}
