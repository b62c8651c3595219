//! How a run stops. SIGINT (Ctrl-C), SIGTERM (`kill`, `timeout`, Slurm)
//! and SIGHUP (a closed terminal) all stop it the same way: the one timing
//! loop stops at its next sample, what finished is kept and printed, and
//! the exit code is 128 + the signal's number (130, 143, 129), as a shell
//! reports a process the signal killed. A second signal ends the process
//! at once (the results store and `--out` are rewritten after every
//! record, so nothing finished is lost; the temporary file being written
//! is removed); in a sweep or `compare` it ends the running child at once,
//! and the parent follows as soon as the child has.

use anyhow::{Context, Result};
pub use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

/// The signals that stop a run.
pub const STOP_SIGNALS: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];

/// Set by the first stop signal; the timing loop and sweeps watch it.
static STOP: OnceLock<Arc<AtomicBool>> = OnceLock::new();
/// The first stop signal received (0: none).
static SIGNAL: AtomicI32 = AtomicI32::new(0);
/// How many stop signals arrived.
static COUNT: AtomicU32 = AtomicU32::new(0);
/// The child run being waited for (0: none), which a second signal goes to.
static CHILD: AtomicI32 = AtomicI32::new(0);

/// How many stop signals arrived so far: a wait that must end at the next
/// one compares this before and during.
pub fn count() -> u32 {
    COUNT.load(Ordering::SeqCst)
}

/// While alive, `pid` is the child run a second stop signal is passed to.
pub struct ChildRunning(());

impl ChildRunning {
    pub fn new(pid: u32) -> ChildRunning {
        CHILD.store(libc::pid_t::try_from(pid).unwrap_or(0), Ordering::SeqCst);
        ChildRunning(())
    }
}

impl Drop for ChildRunning {
    fn drop(&mut self) {
        CHILD.store(0, Ordering::SeqCst);
    }
}

fn stop_arc() -> &'static Arc<AtomicBool> {
    STOP.get_or_init(|| Arc::new(AtomicBool::new(false)))
}

/// Installs the handlers (once per process; later calls do nothing).
pub fn install() -> Result<()> {
    static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            let go = || -> std::io::Result<()> {
                for sig in STOP_SIGNALS {
                    let flag = Arc::clone(stop_arc());
                    // SAFETY: the action only touches atomics and calls
                    // unlink(2), kill(2) and _exit(2), all async-signal-safe;
                    // the unlinked paths are C strings that are never freed
                    // (see `TEMP_FILES`).
                    unsafe {
                        signal_hook::low_level::register(sig, move || {
                            let n = COUNT.fetch_add(1, Ordering::SeqCst) + 1;
                            let _ =
                                SIGNAL.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
                            flag.store(true, Ordering::SeqCst);
                            if n == 1 {
                                return;
                            }
                            // A second signal: no temporary file is left.
                            for slot in &TEMP_FILES {
                                let p = slot.load(Ordering::SeqCst);
                                if !p.is_null() {
                                    libc::unlink(p);
                                }
                            }
                            // With a child running (a sweep, `compare`),
                            // the child gets it and ends at once; this
                            // process follows as soon as it has, so no
                            // child outlives it. Otherwise, or at a third
                            // signal, this process ends now.
                            let child = CHILD.load(Ordering::SeqCst);
                            if n == 2 && child > 0 {
                                libc::kill(child, sig);
                                return;
                            }
                            libc::_exit(128 + sig);
                        })
                    }?;
                }
                Ok(())
            };
            go().map_err(|e| e.to_string())
        })
        .clone()
        .map_err(anyhow::Error::msg)
        .context("installing the signal handlers")
}

/// Ignores SIGXFSZ, whose default action kills the process without a
/// word (exit 153) when a write passes `ulimit -f`: ignored, the write
/// fails with EFBIG instead, and that is reported in one line and cleaned
/// up as any other write error (no temporary or partial file is left).
/// Called first thing in `main`; children of sweeps and `compare` inherit
/// the disposition and call it again.
pub fn ignore_file_size_limit_signal() {
    // SAFETY: setting a signal's disposition to SIG_IGN has no handler to
    // run and touches no memory of ours.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

/// How many temporary files may be tracked at once: the results store's
/// and `--out`'s writes may overlap (a sink thread and the main thread).
const TEMP_SLOTS: usize = 8;

/// The temporary files being written now, published for the second-signal
/// handler (null: a free slot). One slot held a single path before, so a
/// second writer's path replaced the first's, and the first's file was left
/// behind by a second signal. Each path published is leaked, never freed:
/// the handler may run on any thread at any moment and still hold one, and
/// freeing it would leave it unlinking freed memory. About 100 bytes per
/// output write, a few thousand writes in the longest runs.
static TEMP_FILES: [AtomicPtr<libc::c_char>; TEMP_SLOTS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; TEMP_SLOTS];

/// While alive, a second stop signal (which ends the process at once)
/// removes the temporary file at this path, so none is left beside the
/// output. Make it before the file exists (see
/// `results::atomic::write_atomic`), so that no moment has the file
/// without its guard.
pub struct TempFile(Option<usize>);

impl TempFile {
    pub fn track(path: &std::path::Path) -> TempFile {
        use std::os::unix::ffi::OsStrExt;
        let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
            return TempFile(None);
        };
        let p = c.into_raw();
        let null = std::ptr::null_mut();
        // All slots busy (more than TEMP_SLOTS writes at once): untracked.
        let slot = TEMP_FILES.iter().position(|s| {
            s.compare_exchange(null, p, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        });
        TempFile(slot)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(i) = self.0 {
            TEMP_FILES[i].store(std::ptr::null_mut(), Ordering::SeqCst);
        }
    }
}

/// The flag the timing loop watches.
pub fn stop_flag() -> &'static AtomicBool {
    stop_arc()
}

/// Whether a stop signal arrived.
pub fn stopped() -> bool {
    stop_flag().load(Ordering::Relaxed)
}

/// The first stop signal received.
pub fn received() -> Option<i32> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// `SIGINT`, `SIGTERM`, `SIGHUP` (or the number).
pub fn name(sig: i32) -> String {
    match sig {
        SIGINT => "SIGINT".into(),
        SIGTERM => "SIGTERM".into(),
        SIGHUP => "SIGHUP".into(),
        s => format!("signal {s}"),
    }
}

/// `stopped by SIGTERM` (or `interrupted` when no signal was recorded),
/// for messages.
pub fn stopped_by() -> String {
    match received() {
        Some(SIGINT) | None => "interrupted".into(),
        Some(s) => format!("stopped by {}", name(s)),
    }
}

/// 128 + the signal that stopped the run (130 when none was recorded).
pub fn exit_code() -> ExitCode {
    stop_code(received().unwrap_or(SIGINT))
}

fn stop_code(sig: i32) -> ExitCode {
    ExitCode::from(u8::try_from(128 + sig).unwrap_or(130))
}

/// Whether a child's exit status says a stop signal stopped it (after it
/// kept what it finished).
pub fn is_stop_status(code: i32) -> bool {
    STOP_SIGNALS.iter().any(|s| 128 + s == code)
}

/// Sends `sig` to process `pid` (a child run).
pub fn send(pid: u32, sig: i32) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill(2) has no memory effects; a child that already exited
    // is reaped by us only after this, so its pid is not reused.
    unsafe {
        libc::kill(pid, sig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_128_plus_the_signal() {
        assert_eq!(stop_code(SIGINT), ExitCode::from(130));
        assert_eq!(stop_code(SIGTERM), ExitCode::from(143));
        assert_eq!(stop_code(SIGHUP), ExitCode::from(129));
        assert!(is_stop_status(130) && is_stop_status(143) && is_stop_status(129));
        assert!(!is_stop_status(1) && !is_stop_status(2) && !is_stop_status(137));
        assert_eq!(name(SIGTERM), "SIGTERM");
    }
}
