//! A team of threads that runs a whole recurrent sequence together, each
//! member owning some hidden units at every step, with a spinning barrier
//! between the phases of the sequence.
//!
//! A small layer's step (h 128, batch 8: a 512x8x128 product and a gate
//! pass of 1,024 values, about 20 µs on one thread) is too short to hand to
//! the pool step by step: waking its threads for each step cost more than
//! the step (see `rows_gemm`'s `PARALLEL_MACS`), so those steps ran on one
//! thread. A team wakes the pool once per pass and then meets at a barrier,
//! which costs well under a microsecond, so the step's product and gate
//! pass split across every thread.
//!
//! The team grows while it runs: a leader (the caller's thread when it is
//! one of the pool's, else a pool thread while the caller waits) starts
//! the first phase alone, and a member joins at the next phase boundary
//! after its thread has started (on a 2-core VM: 20-60 µs after a pass
//! began, and now and then 2 ms or more, when the hypervisor had the other
//! core elsewhere). So nobody ever waits for a thread that is late or
//! cannot come at all (a busy pool: a model's bidirectional layer runs its
//! two directions at once, each leading a team). The body of a phase must
//! therefore derive everything from the phase's number and the member's
//! share, which may change from one phase to the next.
//!
//! Once the team is whole, a member that has arrived at a barrier runs
//! its share of the next phase's independent part (a recurrent step's
//! input side) before it waits ([`run_ahead`]): the barrier's latency and
//! the other member's lag hide behind it (small LSTM and GRU forwards on
//! two threads of the Zen 5, ABBA: 1.05-1.08x).
//!
//! A panic in any member poisons the team: the others stop waiting and
//! panic too, so that the panic reaches the caller instead of a hang.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// The high bit of the join count: set when the team is done.
const CLOSED: usize = 1 << (usize::BITS - 1);
/// The most threads a team takes.
const MAX_TEAM: usize = 64;

/// One member's view of the team during one phase.
pub(super) struct Member {
    /// 0 for the leader (the calling thread), then in order of joining.
    pub(super) index: usize,
    /// How many run this phase.
    pub(super) size: usize,
}

impl Member {
    /// This member's share of `0..n` in contiguous, nearly equal parts.
    pub(super) fn share(&self, n: usize) -> std::ops::Range<usize> {
        let (q, r) = (n / self.size, n % self.size);
        let start = self.index * q + self.index.min(r);
        start..start + q + usize::from(self.index < r)
    }
}

/// A counting barrier whose generation counts the phases completed. It
/// spins, and yields after a while, so that an oversubscribed machine
/// still makes progress.
struct Barrier {
    arrived: AtomicUsize,
    generation: AtomicUsize,
    /// Set when a member panicked: every wait gives up.
    poisoned: AtomicBool,
}

impl Barrier {
    /// Arrives: `None` for the last of `size` (the others are free to go
    /// on), else the generation to wait past ([`Barrier::wait_past`]).
    fn arrive(&self, size: usize) -> Option<usize> {
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == size {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation
                .store(generation.wrapping_add(1), Ordering::Release);
            return None;
        }
        Some(generation)
    }

    fn wait_past(&self, generation: Option<usize>) {
        if let Some(g) = generation {
            self.spin_until(|| self.generation.load(Ordering::Acquire) != g);
        }
    }

    /// Spins until `done`, or panics once the team is poisoned.
    fn spin_until(&self, done: impl FnMut() -> bool) {
        spin_until(done, &self.poisoned);
    }
}

/// Poisons the team if the thread holding it unwinds.
struct PoisonOnPanic<'a>(&'a AtomicBool);

impl Drop for PoisonOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::Release);
        }
    }
}

fn spin_until(mut done: impl FnMut() -> bool, poisoned: &AtomicBool) {
    let mut spins = 0u32;
    while !done() {
        if poisoned.load(Ordering::Acquire) {
            panic!("another thread of the recurrent layer's team panicked");
        }
        if spins < 1 << 14 {
            spins += 1;
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// The team's size by phase: from phase `from` on `new`, before it `old`,
/// packed in one word so that a member reads both at once.
fn size_at(sizes: u64, phase: usize) -> usize {
    if phase as u64 >= sizes >> 32 {
        ((sizes >> 16) & 0xffff) as usize
    } else {
        (sizes & 0xffff) as usize
    }
}

fn pack_sizes(from: usize, new: usize, old: usize) -> u64 {
    ((from as u64) << 32) | ((new as u64) << 16) | old as u64
}

struct Team {
    barrier: Barrier,
    /// Members that have claimed an index, and CLOSED once the leader is
    /// done.
    joined: AtomicUsize,
    sizes: AtomicU64,
    /// Member `i`'s first phase plus one (0 until it is admitted).
    admit: [AtomicUsize; MAX_TEAM],
}

/// Runs phases `0..phases` of `body` on a team of up to `want` threads of
/// the current rayon pool, with a barrier after each: `body(phase, member)`
/// for every member of that phase's team. The calling thread leads and
/// runs every phase; the others join as they come. Returns the largest
/// size the team reached.
pub(super) fn run(want: usize, phases: usize, body: impl Fn(usize, &Member) + Sync) -> usize {
    run_ahead(want, phases, |phase, m, _| body(phase, m), |_, _| {})
}

/// [`run`], with work that needs nothing of the others done while the
/// barrier waits: once the team is whole (its shares can no longer
/// change), a member that has arrived at phase `p`'s barrier runs
/// `ahead(p + 1, member)`, its share of the next phase's independent part,
/// before it waits for the others; `body(p + 1, member, true)` then
/// leaves that part out. The barrier's wait, and whatever the slower
/// member is behind by, hide behind it.
pub(super) fn run_ahead(
    want: usize,
    phases: usize,
    body: impl Fn(usize, &Member, bool) + Sync,
    ahead: impl Fn(usize, &Member) + Sync,
) -> usize {
    let want = want.min(rayon::current_num_threads()).clamp(1, MAX_TEAM);
    if want == 1 {
        for phase in 0..phases {
            body(phase, &Member { index: 0, size: 1 }, false);
        }
        return 1;
    }
    let team = Team {
        barrier: Barrier {
            arrived: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
            poisoned: AtomicBool::new(false),
        },
        joined: AtomicUsize::new(0),
        sizes: AtomicU64::new(pack_sizes(0, 1, 1)),
        admit: std::array::from_fn(|_| AtomicUsize::new(0)),
    };
    let (team, body, ahead) = (&team, &body, &ahead);
    let mut admitted = 1;
    rayon::scope(|s| {
        for _ in 1..want {
            s.spawn(move |_| team.member(phases, want, body, ahead));
        }
        // A panic here closes and poisons the team: the members that came
        // stop waiting, those that did not never start.
        let _closing = CloseOnExit(&team.joined);
        let _poison = PoisonOnPanic(&team.barrier.poisoned);
        let mut done_ahead = false;
        for phase in 0..phases {
            let size = size_at(team.sizes.load(Ordering::Acquire), phase);
            let member = Member { index: 0, size };
            body(phase, &member, done_ahead);
            // Admit the members that have come, from the next phase on:
            // decided before this phase's barrier, so that every member
            // reads the new size only after it.
            if phase + 1 < phases && admitted < want {
                let come = (team.joined.load(Ordering::Acquire) + 1).min(want);
                if come > admitted {
                    team.sizes
                        .store(pack_sizes(phase + 1, come, size), Ordering::Release);
                    for a in &team.admit[admitted..come] {
                        a.store(phase + 2, Ordering::Release);
                    }
                    admitted = come;
                }
            }
            // Even alone: the barrier's generation counts the phases done,
            // which a member admitted later waits on.
            let arrived = team.barrier.arrive(size);
            done_ahead = size == want && phase + 1 < phases;
            if done_ahead {
                ahead(phase + 1, &member);
            }
            team.barrier.wait_past(arrived);
        }
    });
    admitted
}

/// Closes the team (no member joins any more) when the leader is done,
/// normally or by a panic.
struct CloseOnExit<'a>(&'a AtomicUsize);

impl Drop for CloseOnExit<'_> {
    fn drop(&mut self) {
        self.0.fetch_or(CLOSED, Ordering::AcqRel);
    }
}

impl Team {
    /// A member's life: claim an index, wait to be admitted (or for the
    /// leader to finish without it), then run its phases.
    fn member(
        &self,
        phases: usize,
        want: usize,
        body: &(impl Fn(usize, &Member, bool) + Sync),
        ahead: &(impl Fn(usize, &Member) + Sync),
    ) {
        let mut seen = self.joined.load(Ordering::Acquire);
        let index = loop {
            if seen & CLOSED != 0 || seen + 1 >= MAX_TEAM {
                return;
            }
            match self.joined.compare_exchange_weak(
                seen,
                seen + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break seen + 1,
                Err(now) => seen = now,
            }
        };
        let _poison = PoisonOnPanic(&self.barrier.poisoned);
        let mut first = 0;
        self.barrier.spin_until(|| {
            first = self.admit[index].load(Ordering::Acquire);
            first != 0 || self.joined.load(Ordering::Acquire) & CLOSED != 0
        });
        if first == 0 {
            return;
        }
        let first = first - 1;
        // The phases before this member's first are done when the barrier
        // has completed that many times.
        self.barrier
            .spin_until(|| self.barrier.generation.load(Ordering::Acquire) >= first);
        let mut done_ahead = false;
        for phase in first..phases {
            let size = size_at(self.sizes.load(Ordering::Acquire), phase);
            let member = Member { index, size };
            body(phase, &member, done_ahead);
            let arrived = self.barrier.arrive(size);
            // A whole team's shares stay as they are: the next phase's
            // share is this one's.
            done_ahead = size == want && phase + 1 < phases;
            if done_ahead {
                ahead(phase + 1, &member);
            }
            self.barrier.wait_past(arrived);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    fn pool(threads: usize) -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
    }

    #[test]
    fn every_member_sees_every_phase_of_the_others() {
        // Each phase, every member of that phase's team marks its share of
        // the cells with the phase's number; the next phase checks that
        // every cell holds the last one, whoever wrote it.
        let phases = 400;
        let cells: Vec<AtomicU64> = (0..96).map(|_| AtomicU64::new(u64::MAX)).collect();
        for threads in [2, 3] {
            let pool = pool(threads);
            for c in &cells {
                c.store(u64::MAX, Ordering::Relaxed);
            }
            let most = pool.install(|| {
                run(threads, phases, |phase, m| {
                    if phase > 0 {
                        for c in &cells[m.share(cells.len())] {
                            assert_eq!(c.load(Ordering::Relaxed), phase as u64 - 1);
                        }
                    }
                    for c in &cells[m.share(cells.len())] {
                        c.store(phase as u64, Ordering::Relaxed);
                    }
                })
            });
            assert!((1..=threads).contains(&most));
        }
    }

    #[test]
    fn work_run_ahead_is_the_same_members_next_share() {
        // `ahead(p, m)` stamps m's share of the cells with p; `body(p, m,
        // true)` finds its share stamped so, else stamps it itself. During
        // phase p each cell holds p - 1, or p where a member ran ahead, or
        // p + 1 where one has finished p and is running ahead already.
        let phases = 2000;
        let cells: Vec<AtomicU64> = (0..96).map(|_| AtomicU64::new(0)).collect();
        for threads in [2, 3] {
            let pool = pool(threads);
            for c in &cells {
                c.store(0, Ordering::Relaxed);
            }
            let aheads = AtomicU64::new(0);
            // Whether the team was whole before its last phase, when the
            // work ahead must have run.
            let whole_early = std::sync::atomic::AtomicBool::new(false);
            let stamp = |phase: usize, m: &Member| {
                for c in &cells[m.share(cells.len())] {
                    c.store(phase as u64, Ordering::Relaxed);
                }
            };
            let most = pool.install(|| {
                run_ahead(
                    threads,
                    phases,
                    |phase, m, done| {
                        for c in &cells {
                            let v = c.load(Ordering::Relaxed) as usize;
                            assert!(v + 1 >= phase && v <= phase + 1, "{v} in phase {phase}");
                        }
                        if m.size == threads && phase + 1 < phases {
                            whole_early.store(true, Ordering::Relaxed);
                        }
                        if done {
                            for c in &cells[m.share(cells.len())] {
                                assert_eq!(c.load(Ordering::Relaxed), phase as u64);
                            }
                        } else {
                            stamp(phase, m);
                        }
                    },
                    |phase, m| {
                        aheads.fetch_add(1, Ordering::Relaxed);
                        stamp(phase, m);
                    },
                )
            });
            assert!((1..=threads).contains(&most));
            if whole_early.load(Ordering::Relaxed) {
                assert!(aheads.load(Ordering::Relaxed) > 0);
            }
        }
    }

    #[test]
    fn a_team_from_outside_the_pool_grows() {
        // The global pool, as the benchmarks call it: a member comes, even
        // while other tests keep the pool busy for a while (each phase of
        // the leader alone waits a little, for up to 30 s in all).
        if rayon::current_num_threads() < 2 {
            return;
        }
        let start = std::time::Instant::now();
        let grown = std::sync::atomic::AtomicBool::new(false);
        let most = run(2, 1_000_000, |_, m| {
            if m.size > 1 {
                grown.store(true, Ordering::Relaxed);
            } else if !grown.load(Ordering::Relaxed)
                && start.elapsed() < std::time::Duration::from_secs(30)
            {
                std::thread::sleep(std::time::Duration::from_micros(100));
            }
        });
        assert_eq!(most, 2);
    }

    #[test]
    fn a_busy_pool_leaves_the_leader_alone_instead_of_waiting() {
        // Both threads of the pool lead a team at once: neither's member
        // can start before its leader is done, so each runs alone.
        let pool = pool(2);
        let (a, b) =
            pool.install(|| rayon::join(|| run(2, 50, |_, _| {}), || run(2, 50, |_, _| {})));
        assert!(a >= 1 && b >= 1);
    }

    #[test]
    fn a_panicking_member_fails_the_run_instead_of_hanging() {
        let pool = pool(2);
        let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.install(|| {
                run(2, 100_000, |phase, m| {
                    if m.index == 1 || (phase == 99_999 && m.size == 1) {
                        panic!("member {} at phase {phase}", m.index);
                    }
                })
            })
        }));
        assert!(got.is_err());
    }

    #[test]
    fn shares_cover_the_range_once() {
        for size in 1..5 {
            for n in 0..13 {
                let mut next = 0;
                for index in 0..size {
                    let r = Member { index, size }.share(n);
                    assert_eq!(r.start, next);
                    next = r.end;
                }
                assert_eq!(next, n);
            }
        }
    }
}
