//! How much memory a new allocation can get: the least of what the machine
//! has free, what the process's cgroup (a container, a Slurm job) still
//! allows, and what its rlimits (`ulimit -v`, `ulimit -d`) still allow. A
//! memory check against the machine's free memory alone lets an
//! allocation past a cgroup or rlimit abort the run instead of refusing it
//! in one line.

use std::path::{Path, PathBuf};

/// Bytes still available, and which bound sets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Available {
    pub bytes: u128,
    pub source: &'static str,
}

impl Available {
    /// `12.3 GiB available (cgroup memory.max)`, for messages.
    pub fn describe(&self) -> String {
        format!("{} available ({})", size(self.bytes), self.source)
    }
}

/// Bytes for messages: `312 MiB` under a GiB, else `12.3 GiB`, so that a
/// need and a bound close to each other do not print alike.
pub fn size(bytes: u128) -> String {
    if bytes < 1 << 30 {
        format!("{} MiB", bytes.div_ceil(1 << 20))
    } else {
        format!("{:.1} GiB", bytes as f64 / (1u128 << 30) as f64)
    }
}

/// The least of every bound this machine reports, or `None` when none is
/// readable (not Linux).
/// `threads`: the compute threads the run starts (for the address space
/// they take under `ulimit -v`).
pub fn available(threads: usize) -> Option<Available> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let bounds = [
        (meminfo_available(), "free memory"),
        (
            cgroup_available(Path::new("/sys/fs/cgroup")),
            "cgroup limit",
        ),
        (
            rlimit_left(libc::RLIMIT_AS, status_kib(&status, "VmSize:"))
                .map(|left| left.saturating_sub(address_space_reserve(threads))),
            "RLIMIT_AS (ulimit -v)",
        ),
        (
            rlimit_left(libc::RLIMIT_DATA, status_kib(&status, "VmData:"))
                .map(|left| left.saturating_sub(data_reserve(threads))),
            "RLIMIT_DATA (ulimit -d)",
        ),
    ];
    least(&bounds)
}

/// Address space that the run takes after the check, besides its
/// tensors, and that `ulimit -v` counts: each compute thread's stack and
/// malloc arena (glibc reserves 64 MiB of address space per arena, for up
/// to 8 arenas per logical CPU), and the libraries and buffers loaded
/// later. Without it, a problem just under the limit passed the check and
/// then aborted in an allocation.
fn address_space_reserve(threads: usize) -> u128 {
    const PER_THREAD: u128 = 72 << 20;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (threads.max(cores) as u128 + 2) * PER_THREAD
}

/// Data that the run takes after the check, besides its tensors and
/// plans, and that `ulimit -d` counts: each thread's stack (2 MiB) and
/// the first of its malloc arena. `conv` at batch 1 grew VmData by 2.2,
/// 4.3 and 26 MiB with 1, 2 and 8 threads; without this reserve,
/// `--batch max` chose a batch that left nothing for them and aborted.
fn data_reserve(threads: usize) -> u128 {
    const PER_THREAD: u128 = 4 << 20;
    (threads as u128 + 2) * PER_THREAD
}

/// The smallest known bound.
fn least(bounds: &[(Option<u128>, &'static str)]) -> Option<Available> {
    bounds
        .iter()
        .filter_map(|&(b, source)| b.map(|bytes| Available { bytes, source }))
        .min_by_key(|a| a.bytes)
}

fn meminfo_available() -> Option<u128> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u128 = s
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// `VmSize:  123 kB` in /proc/self/status, in bytes.
fn status_kib(status: &str, key: &str) -> Option<u128> {
    let kib: u128 = status
        .lines()
        .find_map(|l| l.strip_prefix(key))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// What rlimit `resource` still allows beyond `used` (None: unlimited).
fn rlimit_left(resource: libc::__rlimit_resource_t, used: Option<u128>) -> Option<u128> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: an out-pointer to a local.
    if unsafe { libc::getrlimit(resource, &mut r) } != 0 || r.rlim_cur == libc::RLIM_INFINITY {
        return None;
    }
    Some((r.rlim_cur as u128).saturating_sub(used.unwrap_or(0)))
}

/// What this process's cgroup, and every cgroup above it, still allows:
/// cgroup v2 (`memory.max` − `memory.current`) or v1
/// (`memory.limit_in_bytes` − `memory.usage_in_bytes`), under `root`.
fn cgroup_available(root: &Path) -> Option<u128> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    cgroup_available_in(root, &own)
}

fn cgroup_available_in(root: &Path, proc_cgroup: &str) -> Option<u128> {
    let mut best: Option<u128> = None;
    let mut take = |v: Option<u128>| {
        if let Some(v) = v {
            best = Some(best.map_or(v, |b| b.min(v)));
        }
    };
    for line in proc_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next(), parts.next()?, parts.next()?);
        let rel = path.trim_start_matches('/');
        let (base, max, current): (PathBuf, &str, &str) = if controllers.is_empty() {
            (root.to_path_buf(), "memory.max", "memory.current")
        } else if controllers.split(',').any(|c| c == "memory") {
            (
                root.join("memory"),
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
            )
        } else {
            continue;
        };
        // The process's own cgroup and each one above it.
        let mut dir = base.join(rel);
        loop {
            take(cgroup_left(&dir, max, current));
            if dir == base || !dir.pop() {
                break;
            }
        }
    }
    best
}

/// `max − current` in `dir`; `None` when unlimited or unreadable.
fn cgroup_left(dir: &Path, max: &str, current: &str) -> Option<u128> {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
    let limit: u128 = read(max)?.trim().parse().ok()?; // "max": unlimited
                                                       // cgroup v1 says "unlimited" with a number near 2^63.
    if limit >= 1 << 62 {
        return None;
    }
    let used: u128 = read(current)
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    Some(limit.saturating_sub(used))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_bound_wins_and_is_named() {
        let a = least(&[
            (Some(64 << 30), "free memory"),
            (None, "cgroup limit"),
            (Some(2 << 30), "RLIMIT_AS (ulimit -v)"),
        ])
        .unwrap();
        assert_eq!(a.bytes, 2 << 30);
        assert_eq!(a.describe(), "2.0 GiB available (RLIMIT_AS (ulimit -v))");
        assert!(least(&[(None, "x")]).is_none());
    }

    #[test]
    fn cgroup_v2_and_v1_limits_are_read_up_the_tree() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        // v2: the job's cgroup allows 8 GiB with 1 GiB used; its parent 4
        // GiB with 3 GiB used, so 1 GiB is left.
        let job = root.join("slurm/job1");
        std::fs::create_dir_all(&job).unwrap();
        std::fs::write(job.join("memory.max"), format!("{}\n", 8u64 << 30)).unwrap();
        std::fs::write(job.join("memory.current"), format!("{}\n", 1u64 << 30)).unwrap();
        std::fs::write(root.join("slurm/memory.max"), format!("{}\n", 4u64 << 30)).unwrap();
        std::fs::write(
            root.join("slurm/memory.current"),
            format!("{}\n", 3u64 << 30),
        )
        .unwrap();
        std::fs::write(root.join("memory.max"), "max\n").unwrap();
        assert_eq!(cgroup_available_in(root, "0::/slurm/job1\n"), Some(1 << 30));
        // Unlimited everywhere: no bound.
        std::fs::write(job.join("memory.max"), "max\n").unwrap();
        std::fs::write(root.join("slurm/memory.max"), "max\n").unwrap();
        assert_eq!(cgroup_available_in(root, "0::/slurm/job1\n"), None);
        // v1, beside other controllers.
        let v1 = root.join("memory/docker/abc");
        std::fs::create_dir_all(&v1).unwrap();
        std::fs::write(v1.join("memory.limit_in_bytes"), "2147483648\n").unwrap();
        std::fs::write(v1.join("memory.usage_in_bytes"), "1073741824\n").unwrap();
        std::fs::write(
            root.join("memory/memory.limit_in_bytes"),
            "9223372036854771712\n",
        )
        .unwrap();
        let own = "12:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n";
        assert_eq!(cgroup_available_in(root, own), Some(1 << 30));
    }

    #[test]
    fn status_and_rlimits_parse() {
        let s = "Name:\tcnnbench\nVmSize:\t  204800 kB\nVmData:\t 1024 kB\n";
        assert_eq!(status_kib(s, "VmSize:"), Some(200 << 20));
        assert_eq!(status_kib(s, "VmData:"), Some(1 << 20));
        assert_eq!(status_kib(s, "VmRSS:"), None);
        // This test process has no address-space limit unless its runner
        // set one; either way the call does not fail.
        let _ = rlimit_left(libc::RLIMIT_AS, Some(0));
    }
}
