//! The replicas of a data-parallel run (`model`, `allreduce`): threads of
//! this process, one per GPU (`--gpus`, on `ncclCommInitAll`'s
//! communicators), or this process as one rank of a job a launcher started
//! (`--launcher`: rank 0 makes NCCL's unique id and hands it out over the
//! TCP rendezvous, which later brings every rank's results back to rank 0).

use crate::dist::launch::World;
use crate::dist::rendezvous::Rendezvous;
use anyhow::{anyhow, bail, Context, Result};
use cnnbench_layers::cuda::nccl::{self, Comm};
use cnnbench_layers::cuda::Gpu;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Where the replicas run.
pub enum Replicas {
    /// Threads of this process, one per device id.
    InProcess(Vec<usize>),
    /// This process is one rank of a launched job.
    Launched { world: World, timeout: Duration },
}

impl Replicas {
    /// The device of this process's first replica.
    pub fn first_device(&self) -> usize {
        match self {
            Replicas::InProcess(ids) => ids.first().copied().unwrap_or(0),
            // Checked by `launched_device` before.
            Replicas::Launched { world, .. } => launched_device(world).unwrap_or(0),
        }
    }

    /// Whether this process reports (rank 0, or every in-process run).
    pub fn leads(&self) -> bool {
        match self {
            Replicas::InProcess(_) => true,
            Replicas::Launched { world, .. } => world.rank == 0,
        }
    }
}

/// The most GPUs `--gpus` takes in one process.
const MAX_LOCAL_GPUS: usize = 64;

/// `--gpus`: a count (the first N devices) or a comma-separated list of
/// device ids (`0,2,3`), as `CUDA_VISIBLE_DEVICES` numbers them.
pub fn parse_gpus(s: &str) -> Result<Vec<usize>> {
    let bad = || anyhow!("--gpus '{s}': expected a count (4) or a list of device ids (0,2,3)");
    if !s.contains(',') {
        let n: usize = s.trim().parse().map_err(|_| bad())?;
        if n == 0 || n > MAX_LOCAL_GPUS {
            bail!("--gpus {n}: expected 1 to {MAX_LOCAL_GPUS} GPUs");
        }
        return Ok((0..n).collect());
    }
    let mut ids = Vec::new();
    for part in s.split(',') {
        let id: usize = part.trim().parse().map_err(|_| bad())?;
        if id >= MAX_LOCAL_GPUS {
            bail!(
                "--gpus '{s}': device id {id} is past the most cnnbench takes ({MAX_LOCAL_GPUS})"
            );
        }
        if ids.contains(&id) {
            bail!("--gpus '{s}': device {id} is listed twice");
        }
        ids.push(id);
    }
    Ok(ids)
}

/// Checks, before any model runs, that NCCL loads and that the devices
/// exist; `what` names the option for the error line.
pub fn check_devices(what: &str, ids: &[usize]) -> Result<()> {
    if let Some(why) = nccl::missing() {
        bail!("{what}: {why}");
    }
    let count = Gpu::count().map_err(|why| anyhow!("{what}: {why}"))?;
    if let Some(&id) = ids.iter().find(|&&id| id >= count) {
        let gpus = if count == 1 { "GPU" } else { "GPUs" };
        bail!("{what}: device {id} asked for, and this machine shows {count} {gpus} (see CUDA_VISIBLE_DEVICES)");
    }
    Ok(())
}

/// Every GPU this process sees (after NCCL was found): `allreduce`'s
/// default.
pub fn all_devices(what: &str) -> Result<Vec<usize>> {
    if let Some(why) = nccl::missing() {
        bail!("{what}: {why}");
    }
    match Gpu::count().map_err(|why| anyhow!("{what}: {why}"))? {
        0 => bail!("{what}: this machine shows no GPU (see CUDA_VISIBLE_DEVICES)"),
        n => Ok((0..n).collect()),
    }
}

/// The device of a launched rank: its local rank, or the one GPU a
/// launcher that binds a GPU per task left visible.
pub fn launched_device(world: &World) -> Result<usize> {
    if let Some(why) = nccl::missing() {
        bail!("--launcher: {why}");
    }
    let count = Gpu::count().map_err(|why| anyhow!("--launcher: {why}"))?;
    match count {
        0 => bail!("--launcher: this process sees no GPU"),
        1 => Ok(0),
        n if world.local_rank < n => Ok(world.local_rank),
        n => bail!(
            "--launcher: local rank {} and this process sees {n} GPUs (start at most one rank per GPU)",
            world.local_rank
        ),
    }
}

/// How a replica gets its communicator.
pub enum CommFrom {
    /// Made for it by `ncclCommInitAll`.
    Made(Comm),
    /// Made on its thread from rank 0's unique id.
    Id {
        id: [u8; nccl::ID_BYTES],
        rank: usize,
        world_size: usize,
    },
}

impl Replicas {
    /// Runs `body` once per replica, each with its device, communicator
    /// and progress bar (the first replica's is `bar`, the others'
    /// hidden). Returns every replica's result in rank order and the
    /// launcher's name on the reporting process, `None` on the others.
    pub fn run<T, F>(
        &self,
        what: &str,
        fingerprint: &str,
        bar: &indicatif::ProgressBar,
        body: F,
    ) -> Result<Option<(Vec<T>, &'static str)>>
    where
        T: Serialize + DeserializeOwned + Send,
        F: Fn(usize, CommFrom, &indicatif::ProgressBar, &Meet) -> Result<T> + Sync,
    {
        match self {
            Replicas::InProcess(ids) => {
                let ordinals: Vec<i32> = ids.iter().map(|&d| d as i32).collect();
                bar.set_message(format!("{what}: NCCL communicators for {} GPUs", ids.len()));
                let comms = Comm::init_all(&ordinals).map_err(|e| anyhow!("{e}"))?;
                let hidden = indicatif::ProgressBar::hidden();
                let body = &body;
                let shared = Shared {
                    barrier: std::sync::Barrier::new(ids.len()),
                    failed: AtomicBool::new(false),
                };
                let shared = &shared;
                let results = std::thread::scope(|s| -> Result<Vec<Result<T>>> {
                    let mut handles = Vec::new();
                    for (k, (&dev, comm)) in ids.iter().zip(comms).enumerate() {
                        let bar = if k == 0 { bar } else { &hidden };
                        let h = std::thread::Builder::new()
                            .name(format!("gpu{dev}"))
                            .spawn_scoped(s, move || {
                                let meet = Meet {
                                    shared: Some(shared),
                                    met: Cell::new(false),
                                };
                                body(dev, CommFrom::Made(comm), bar, &meet)
                            })
                            .context("starting a thread per GPU")?;
                        handles.push(h);
                    }
                    Ok(handles
                        .into_iter()
                        .map(|h| {
                            h.join()
                                .unwrap_or_else(|_| Err(anyhow!("a replica's thread panicked")))
                        })
                        .collect())
                })?;
                // The error that stopped the others, not their echo of it.
                let cause =
                    |r: &Result<T>| r.as_ref().is_err_and(|e| !e.is::<OtherReplicaFailed>());
                let first = results.iter().position(cause);
                let mut ok = Vec::new();
                for (k, r) in results.into_iter().enumerate() {
                    match r {
                        Ok(v) => ok.push(v),
                        Err(e) if first.is_none_or(|f| f == k) => {
                            return Err(e.context(format!("{what} on GPU {}", ids[k])))
                        }
                        Err(_) => {}
                    }
                }
                if let Some(f) = first {
                    bail!("{what} on GPU {}: failed", ids[f]);
                }
                Ok(Some((ok, "in-process")))
            }
            Replicas::Launched { world, timeout } => {
                let dev = launched_device(world)?;
                let id = if world.rank == 0 {
                    Some(nccl::unique_id().map_err(|e| anyhow!("{e}"))?)
                } else {
                    None
                };
                bar.set_message(format!(
                    "{what}: rendezvous of {} ranks at {}:{}",
                    world.world_size, world.master_addr, world.master_port
                ));
                let (mut rdv, id) = Rendezvous::join(world, id, fingerprint, *timeout)?;
                let from = CommFrom::Id {
                    id,
                    rank: world.rank,
                    world_size: world.world_size,
                };
                let meet = Meet {
                    shared: None,
                    met: Cell::new(false),
                };
                let mine = body(dev, from, bar, &meet).map_err(|e| format!("{e:#}"));
                // Every rank reports, a failed one its error, so that rank 0
                // says what happened instead of waiting.
                let payload = serde_json::to_vec(&mine)?;
                let gathered = rdv.gather(&payload, *timeout)?;
                let Some(all) = gathered else {
                    return match mine {
                        Err(e) => bail!("rank {}: {e}", rdv.rank()),
                        Ok(_) => Ok(None),
                    };
                };
                if all.len() != rdv.world_size() {
                    bail!(
                        "rendezvous: {} results from {} ranks",
                        all.len(),
                        rdv.world_size()
                    );
                }
                let mut ok = Vec::new();
                for (rank, bytes) in all.iter().enumerate() {
                    let r: std::result::Result<T, String> = serde_json::from_slice(bytes)
                        .with_context(|| format!("reading rank {rank}'s results"))?;
                    ok.push(r.map_err(|e| anyhow!("rank {rank}: {e}"))?);
                }
                Ok(Some((ok, world.launcher.name())))
            }
        }
    }
}

/// A replica's error when another replica of its process failed before
/// their first collective (that replica's error is the one reported).
#[derive(Debug)]
pub struct OtherReplicaFailed;

impl std::fmt::Display for OtherReplicaFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stopped: another GPU's replica failed")
    }
}

impl std::error::Error for OtherReplicaFailed {}

/// The threads of one process, meeting.
struct Shared {
    barrier: std::sync::Barrier,
    failed: AtomicBool,
}

/// Where a process's replicas meet before their first collective, so that
/// one that failed before it (no GPU memory, a bad device) stops them all
/// instead of leaving the others in an all-reduce. Every replica meets
/// once: a replica that returns or panics without meeting meets as failed
/// on the way out. Launched ranks are alone in their process and meet
/// nobody: when one fails, the launcher ends the job (torchrun does, and
/// `srun --kill-on-bad-exit`).
pub struct Meet<'a> {
    shared: Option<&'a Shared>,
    met: Cell<bool>,
}

impl Meet<'_> {
    /// Whether every replica of this process is `ready` (waits for all).
    pub fn all_ready(&self, ready: bool) -> bool {
        if self.met.replace(true) {
            return ready;
        }
        let Some(s) = self.shared else {
            return ready;
        };
        if !ready {
            s.failed.store(true, Ordering::SeqCst);
        }
        s.barrier.wait();
        !s.failed.load(Ordering::SeqCst)
    }
}

impl Drop for Meet<'_> {
    fn drop(&mut self) {
        if !self.met.get() {
            self.all_ready(false);
        }
    }
}

impl CommFrom {
    /// The communicator, made now from rank 0's id when it was not made
    /// for this replica (with `gpu`'s context current, as NCCL needs).
    pub fn comm(self, gpu: &Gpu) -> Result<Comm> {
        match self {
            CommFrom::Made(c) => Ok(c),
            CommFrom::Id {
                id,
                rank,
                world_size,
            } => {
                gpu.ctx
                    .bind_to_thread()
                    .map_err(|e| anyhow!("cuCtxSetCurrent: {e:?}"))?;
                Comm::init_rank(world_size, &id, rank).map_err(|e| anyhow!("{e}"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpus_take_a_count_or_a_list() {
        assert_eq!(parse_gpus("4").unwrap(), vec![0, 1, 2, 3]);
        assert_eq!(parse_gpus("0,2,3").unwrap(), vec![0, 2, 3]);
        for bad in ["0", "-1", "x", "1,1", "", "65", "1,99", "3,"] {
            let e = parse_gpus(bad).unwrap_err().to_string();
            assert!(e.starts_with("--gpus"), "{bad}: {e}");
        }
    }

    /// Three replicas: one fails before the first collective (it returns
    /// early, or panics, without meeting); the others hear of it and stop
    /// instead of waiting for it.
    #[test]
    fn a_replica_that_fails_first_stops_the_others() {
        for panics in [false, true] {
            let shared = Shared {
                barrier: std::sync::Barrier::new(3),
                failed: AtomicBool::new(false),
            };
            let seen: Vec<Option<bool>> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..3)
                    .map(|k| {
                        let shared = &shared;
                        s.spawn(move || {
                            let meet = Meet {
                                shared: Some(shared),
                                met: Cell::new(false),
                            };
                            if k == 1 {
                                assert!(!panics, "replica 1 panics");
                                return None;
                            }
                            Some(meet.all_ready(true))
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap_or(None)).collect()
            });
            assert_eq!(seen, [Some(false), None, Some(false)]);
        }
        // All ready: all go on.
        let shared = Shared {
            barrier: std::sync::Barrier::new(2),
            failed: AtomicBool::new(false),
        };
        let go: Vec<bool> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..2)
                .map(|_| {
                    let shared = &shared;
                    s.spawn(move || {
                        Meet {
                            shared: Some(shared),
                            met: Cell::new(false),
                        }
                        .all_ready(true)
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(go, [true, true]);
    }
}
