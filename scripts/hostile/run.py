#!/usr/bin/env python3
"""Hostile cases for the cnnbench CLI: output files, signals and pipes,
memory and limits, validation, report/compare inputs, and garbage.

Each case runs against a copy of the binary, in a fresh temporary folder,
under a hard time limit, and is classified as PANIC, ABORT, HANG, CLOBBER,
MULTILINE, UNEXPECTED or OK (see README.md beside this file).

    python3 scripts/hostile/run.py                  # every case, as the current user
    python3 scripts/hostile/run.py --as-user nobody # the same, commands run as nobody
    python3 scripts/hostile/run.py --both           # as root, then as nobody
    python3 scripts/hostile/run.py --list
    python3 scripts/hostile/run.py --only 'out_fifo*,sig_*' --json results.json

Standard library only (Python 3.11).
"""

from __future__ import annotations

import argparse
import errno
import fnmatch
import json
import os
import pwd
import random
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

# ---------------------------------------------------------------------------
# Outcomes, classes, registry
# ---------------------------------------------------------------------------

# Worst first: a case's outcome is the worst of what was found.
OUTCOMES = ["PANIC", "ABORT", "HANG", "CLOBBER", "MULTILINE", "UNEXPECTED", "OK"]
CLASSES = {
    1: "files",
    2: "signals/pipes",
    3: "memory/limits",
    4: "validation",
    5: "report/compare",
    6: "garbage",
}
ABORT_SIGNALS = {signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS, signal.SIGILL,
                 signal.SIGFPE, signal.SIGSYS, signal.SIGTRAP}
PANIC_MARKS = [b"panicked", b"RUST_BACKTRACE", b"internal error", b"stack backtrace"]
ABORT_MARKS = [b"memory allocation of", b"fatal runtime error", b"Aborted"]
# stderr lines that are progress or status, not part of an error: left out
# when counting an error's lines (README: "excluding progress output").
STATUS_LINES = [
    rb"^cnnbench: device auto: ",          # which device --device auto chose
    rb"^cnnbench: checking ",              # check's progress line per model
    rb"^cnnbench: wrote \d+ records to ",  # where --out put the output
    rb"^cnnbench: warning: not read: ",    # report names each unreadable input
    rb"^cnnbench: warning: \d+ folder\(s\) of .* could not be read",  # data: unreadable folders
    rb"^\[\d+/\d+\] ",                     # progress lines (terminal only)
]
# Longest acceptable error line: "cnnbench: error: " + 400 characters +
# "... (N more characters)", with room to spare.
MAX_ERROR_LINE = 480
TEMP_NAME = re.compile(r"^(\.cnnbench-.*|\.tmp.*|cnnbench-child-.*|.*\.tmp)$")

P = "mb1ic4ih8oc4oh8kh3ph1"            # a problem that runs in microseconds
P2 = "mb1ic8ih8oc8kh3ph1"
P3 = "mb1ic16ih8oc16kh3ph1"
P4 = "mb1ic4ih16oc4kh3ph1"
FAST = ["--device", "cpu", "--iters", "1", "--warmup", "0", "--dir", "fwd",
        "--algo", "direct", "-q"]
# A run of a dozen records of about a second each, to be stopped.
LONG = ["conv", P, P2, P3, P4, "--device", "cpu", "--algo", "direct",
        "--min-time", "1", "-q"]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GiB = 1 << 30
MiB = 1 << 20


@dataclass
class Case:
    name: str
    cls: int
    fn: Callable
    who: str = "both"          # both | root | user
    doc: str = ""
    timeout: float | None = None


CASES: list[Case] = []


def case(cls: int, who: str = "both", timeout: float | None = None, name: str | None = None):
    def deco(fn):
        add(name or fn.__name__, cls, fn, who, (fn.__doc__ or "").strip(), timeout)
        return fn
    return deco


def add(name, cls, fn, who="both", doc="", timeout=None):
    assert not any(c.name == name for c in CASES), name
    CASES.append(Case(name, cls, fn, who, doc, timeout))


def fast(*extra):
    """FAST without the options that `extra` gives again (clap refuses an
    option given twice)."""
    given = {a for a in extra if isinstance(a, str) and a.startswith("-")}
    out, i = [], 0
    while i < len(FAST):
        n = 1 if FAST[i] == "-q" else 2
        if FAST[i] not in given:
            out += FAST[i:i + n]
        i += n
    return out


def conv(*extra, problem=P, save=False):
    return ["conv", problem, *fast(*extra), *([] if save else ["--no-save"]), *extra]


# ---------------------------------------------------------------------------
# Running one command
# ---------------------------------------------------------------------------

@dataclass
class R:
    cmd: str
    rc: int | None
    out: bytes
    err: bytes
    timed_out: bool
    secs: float

    def text(self) -> str:
        return self.err.decode("utf-8", "replace")


class Proc:
    def __init__(self, popen: subprocess.Popen, cmd: str, shell: bool):
        self.p = popen
        self.cmd = cmd
        self.shell = shell
        self.t0 = time.monotonic()

    @property
    def pid(self):
        return self.p.pid

    def signal(self, sig):
        try:
            os.kill(self.p.pid, sig)
        except ProcessLookupError:
            pass


class Skip(Exception):
    pass


def ftype(path) -> str:
    try:
        m = os.lstat(path)
    except FileNotFoundError:
        return "missing"
    for test, name in [(stat.S_ISLNK, "symlink"), (stat.S_ISFIFO, "fifo"),
                       (stat.S_ISCHR, "chardev"), (stat.S_ISDIR, "dir"),
                       (stat.S_ISREG, "file"), (stat.S_ISSOCK, "socket"),
                       (stat.S_ISBLK, "blockdev")]:
        if test(m.st_mode):
            return name
    return "other"


def read(path) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def load_json(path_or_bytes):
    data = path_or_bytes if isinstance(path_or_bytes, bytes) else read(path_or_bytes)
    if data is None:
        raise ValueError("cannot read")
    return json.loads(data)


class FifoReader(threading.Thread):
    """Reads a FIFO to its end (opening blocks until a writer comes)."""

    def __init__(self, path, delay=0.0):
        super().__init__(daemon=True)
        self.path = path
        self.delay = delay
        self.data: bytes | None = None
        self.opened = False

    def run(self):
        time.sleep(self.delay)
        try:
            with open(self.path, "rb") as f:
                self.opened = True
                self.data = f.read()
        except OSError as e:
            self.data = f"<{e}>".encode()

    def release(self) -> bool:
        """Unblocks a reader still waiting in open(); True when one was."""
        if not self.is_alive():
            return False
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
        except OSError:
            pass
        self.join(2)
        return True


class Ctx:
    """One case's folder, commands and findings."""

    def __init__(self, runner: "Runner", c: Case, folder: str):
        self.runner = runner
        self.case = c
        self.d = folder
        self.user = runner.user          # None (as ourselves) or (uid, gid)
        self.root = runner.user is None and os.geteuid() == 0
        self.bin = runner.bin
        self.deadline = time.monotonic() + (c.timeout or runner.timeout)
        self.findings: list[tuple[str, str]] = []
        self.runs: list[dict] = []
        self.tmp = self.mkdir("tmp")

    # -- files ------------------------------------------------------------
    def path(self, *parts) -> str:
        return os.path.join(self.d, *parts)

    def ids(self, owner):
        if owner == "runner":
            return self.user if self.user else (os.geteuid(), os.getegid())
        if owner == "root":
            return (0, 0)
        return owner

    def chown(self, p, owner="runner"):
        uid, gid = self.ids(owner)
        if os.geteuid() != 0:
            if (uid, gid) != (os.geteuid(), os.getegid()):
                raise Skip("needs root to give a file to another user")
            return
        os.lchown(p, uid, gid)

    def mkdir(self, rel, mode=0o755, owner="runner") -> str:
        p = self.path(rel)
        os.makedirs(p, exist_ok=True)
        self.chown(p, owner)
        os.chmod(p, mode)
        return p

    def write(self, rel, data: bytes | str = b"", mode=0o644, owner="runner") -> str:
        p = self.path(rel)
        if isinstance(data, str):
            data = data.encode()
        with open(p, "wb") as f:
            f.write(data)
        self.chown(p, owner)
        os.chmod(p, mode)
        return p

    def symlink(self, target, rel, owner="runner") -> str:
        p = self.path(rel)
        os.symlink(target, p)
        self.chown(p, owner)
        return p

    def mkfifo(self, rel, mode=0o666, owner="runner") -> str:
        p = self.path(rel)
        os.mkfifo(p, mode)
        self.chown(p, owner)
        os.chmod(p, mode)
        return p

    def copy_seed(self, rel, owner="runner") -> str:
        p = self.path(rel)
        shutil.copyfile(self.runner.seed, p)
        self.chown(p, owner)
        return p

    # -- commands ---------------------------------------------------------
    def remaining(self) -> float:
        return max(0.5, self.deadline - time.monotonic())

    def env(self, extra=None, drop=()):
        e = {k: v for k, v in os.environ.items() if not k.startswith("CNNBENCH_")}
        for k in ("RUST_BACKTRACE", "RUST_LIB_BACKTRACE"):
            e.pop(k, None)
        e.update({"TMPDIR": self.tmp, "HOME": self.d, "LC_ALL": "C.UTF-8", "CB": self.bin})
        for k in drop:
            e.pop(k, None)
        if extra:
            e.update(extra)
        return e

    def argv(self, args, shell=False, limits=None):
        base = ["sh", "-c", args] if shell else [self.bin, *args]
        if self.user:
            uid, gid = self.user
            base = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--", *base]
        if limits:
            base = ["prlimit", *[f"--{k}={v}" for k, v in limits.items()], "--", *base]
        return base

    def show(self, args, shell=False, env=None, limits=None):
        """The command as a person would type it (no setpriv prefix)."""
        def q(a):
            if isinstance(a, str):
                try:
                    a.encode("utf-8")
                except UnicodeEncodeError:
                    a = os.fsencode(a)
            if isinstance(a, bytes):
                return "$'" + "".join(
                    chr(b) if 32 <= b < 127 and b not in (39, 92) else f"\\x{b:02x}" for b in a
                ) + "'"
            if any(ord(ch) < 32 or ord(ch) == 127 for ch in a):
                return "$'" + a.encode("unicode_escape").decode().replace("'", "\\'") + "'"
            if len(a) > 120:
                return shlex.quote(a[:60]) + f"...<{len(a)} chars>"
            return shlex.quote(a)
        s = args if shell else " ".join(["cnnbench"] + [q(a) for a in args])
        if shell:
            s = "sh -c " + shlex.quote(args.replace('"$CB"', "cnnbench").replace("$CB", "cnnbench"))
        if env:
            s = " ".join(f"{k}={q(v if isinstance(v, (str, bytes)) else str(v))}" for k, v in env.items()) + " " + s
        if limits:
            s = "prlimit " + " ".join(f"--{k}={v}" for k, v in limits.items()) + " " + s
        return s

    def spawn(self, args, *, env=None, shell=False, limits=None, stdin=subprocess.DEVNULL,
              stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=None, pass_fds=(),
              drop_env=(), preexec=None) -> Proc:
        cmd = self.show(args, shell, env, limits)
        p = subprocess.Popen(self.argv(args, shell, limits), env=self.env(env, drop_env),
                             cwd=cwd or self.d, stdin=stdin, stdout=stdout, stderr=stderr,
                             start_new_session=True, pass_fds=pass_fds, preexec_fn=preexec)
        return Proc(p, cmd, shell)

    def finish(self, proc: Proc, *, allow=(0,), one_line=True, input=None,
               timeout=None, quiet_ok=False) -> R:
        t = min(timeout or self.remaining(), self.remaining())
        timed_out = False
        try:
            out, err = proc.p.communicate(input=input, timeout=t)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(proc.p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                out, err = proc.p.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                proc.p.kill()
                out, err = b"", b""
        r = R(proc.cmd, proc.p.returncode, out or b"", err or b"", timed_out,
              time.monotonic() - proc.t0)
        self.runs.append({"cmd": r.cmd, "rc": r.rc, "secs": round(r.secs, 2),
                          "stderr": r.text()[-1500:], "timed_out": timed_out})
        self.judge(r, proc.shell, allow, one_line, quiet_ok)
        return r

    def run(self, args, *, allow=(0,), one_line=True, input=None, timeout=None,
            quiet_ok=False, **kw) -> R:
        if input is not None:
            kw["stdin"] = subprocess.PIPE
        return self.finish(self.spawn(args, **kw), allow=allow, one_line=one_line,
                           input=input, timeout=timeout, quiet_ok=quiet_ok)

    # -- judging ----------------------------------------------------------
    def bad(self, outcome, msg):
        self.findings.append((outcome, msg))

    def expect(self, cond, outcome, msg):
        if not cond:
            self.bad(outcome, msg)
        return cond

    def judge(self, r: R, shell, allow, one_line, quiet_ok):
        rc = r.rc
        if r.timed_out:
            self.bad("HANG", f"`{r.cmd}` still running after {r.secs:.0f} s")
            return
        sig = -rc if rc is not None and rc < 0 else (rc - 128 if shell and rc and rc > 128 else None)
        # A panic (its message says "panicked") is a PANIC however the
        # process ended; an abort without one (a failed allocation, a
        # signal) is an ABORT, even where Rust's note names RUST_BACKTRACE.
        aborted = (sig in ABORT_SIGNALS) or any(m in r.err for m in ABORT_MARKS)
        if b"panicked" in r.err or (not aborted and any(m in r.err for m in PANIC_MARKS)):
            self.bad("PANIC", f"`{r.cmd}` exit {rc}: {first_lines(r.err)}")
        elif aborted:
            self.bad("ABORT", f"`{r.cmd}` exit {rc}: {first_lines(r.err)}")
        if rc not in allow:
            self.bad("UNEXPECTED", f"`{r.cmd}` exit {rc}, expected {sorted(allow)}: {first_lines(r.err)}")
        if rc == 2 and one_line:
            why = error_line_problem(r.err)
            if why:
                self.bad("MULTILINE", f"`{r.cmd}` exit 2: {why}: {first_lines(r.err, 3)}")
        if quiet_ok and rc in (0, 141) and r.err.strip():
            self.bad("UNEXPECTED", f"`{r.cmd}` said something on stderr: {first_lines(r.err)}")

    # -- checks shared by cases ------------------------------------------
    def error_mentions(self, r: R, *words):
        for w in words:
            wb = w.encode() if isinstance(w, str) else w
            self.expect(wb in r.err, "UNEXPECTED",
                        f"`{r.cmd}`: the error does not mention {w!r}: {first_lines(r.err)}")

    def unchanged(self, path, old: bytes, what="file"):
        now = read(path)
        if now != old:
            self.bad("CLOBBER", f"{what} {os.path.relpath(path, self.d)!r} changed: "
                     f"{len(old)} bytes before, {'missing' if now is None else len(now)} after "
                     f"({(now or b'')[:60]!r})")
            return False
        return True

    def is_type(self, path, want):
        got = ftype(path)
        return self.expect(got == want, "CLOBBER",
                           f"{os.path.relpath(path, self.d)!r} is now a {got}, was a {want}")

    def valid_json(self, path, complete=None, records=None, outcome="CLOBBER"):
        try:
            doc = load_json(path)
        except Exception as e:
            self.bad(outcome, f"{os.path.relpath(str(path), self.d)!r} is not valid JSON ({e}); "
                     f"{(read(path) or b'')[:80]!r}")
            return None
        if complete is not None and isinstance(doc, dict):
            self.expect(doc.get("complete") == complete, "UNEXPECTED",
                        f"{os.path.basename(str(path))}: complete={doc.get('complete')!r}, expected {complete}")
        if records is not None and isinstance(doc, dict):
            n = len(doc.get("records", []))
            self.expect(records(n), "UNEXPECTED",
                        f"{os.path.basename(str(path))}: {n} records")
        return doc

    def store(self, rel="results") -> list[str]:
        p = self.path(rel)
        if not os.path.isdir(p):
            return []
        return sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(".json"))

    def store_records(self, rel="results") -> int:
        n = 0
        for f in self.store(rel):
            try:
                n = max(n, len(load_json(f).get("records", [])))
            except Exception:
                pass
        return n

    def wait_until(self, cond, limit=20.0, step=0.05) -> bool:
        end = min(time.monotonic() + limit, self.deadline - 5)
        while time.monotonic() < end:
            if cond():
                return True
            time.sleep(step)
        return cond()


def first_lines(b: bytes, n=2, width=300) -> str:
    lines = b.decode("utf-8", "replace").splitlines()
    s = " | ".join(lines[:n]) + (f" | ...(+{len(lines) - n} lines)" if len(lines) > n else "")
    return s if len(s) <= width else s[:width] + "..."


def error_line_problem(err: bytes) -> str | None:
    """Why stderr is not one documented error line (None when it is)."""
    lines = [l for l in err.split(b"\n") if l and not any(re.match(p, l) for p in STATUS_LINES)]
    if len(lines) == 0:
        return "no error line"
    if len(lines) > 1:
        return f"{len(lines)} lines"
    line = lines[0]
    if not line.startswith(b"cnnbench: error: "):
        return "not a 'cnnbench: error: ' line"
    if any(b < 32 or b == 127 for b in line):
        return "unescaped control character"
    if len(line.decode("utf-8", "replace")) > MAX_ERROR_LINE:
        return f"{len(line)} characters, not cut at 400"
    if b"tip:" in line or b"For more information" in line:
        return "clap tip"
    return None


# ---------------------------------------------------------------------------
# The runner
# ---------------------------------------------------------------------------

class Runner:
    def __init__(self, bin_path, base, user, timeout, keep):
        self.bin = bin_path
        self.base = base
        self.user = user
        self.timeout = timeout
        self.keep = keep
        self.label = "nobody" if user else pwd.getpwuid(os.geteuid()).pw_name
        self.phase = os.path.join(base, self.label)
        os.makedirs(self.phase, exist_ok=True)
        os.chmod(self.phase, 0o755)
        self.seed = os.path.join(base, "seed.json")

    def run_case(self, c: Case, index: int) -> dict:
        t0 = time.monotonic()
        res = {"name": c.name, "class": c.cls, "class_name": CLASSES[c.cls], "user": self.label,
               "who": c.who, "doc": c.doc}
        if (c.who == "root" and (self.user or os.geteuid() != 0)) or (c.who == "user" and not self.user):
            res.update(outcome="SKIP", detail=f"{c.who}-only", secs=0.0, runs=[])
            return res
        folder = os.path.join(self.phase, f"{index:03d}-{c.name}")
        os.makedirs(folder)
        os.chmod(folder, 0o755)
        if self.user:
            os.chown(folder, *self.user)
        ctx = Ctx(self, c, folder)
        try:
            c.fn(ctx)
        except Skip as e:
            res.update(outcome="SKIP", detail=str(e), secs=time.monotonic() - t0, runs=ctx.runs)
            cleanup(folder, self.keep)
            return res
        except Exception as e:  # a bug in the case itself
            ctx.bad("UNEXPECTED", f"case raised {type(e).__name__}: {e} (a bug of the case?)")
        ctx.findings += leftovers(ctx)
        worst = min((OUTCOMES.index(o) for o, _ in ctx.findings), default=len(OUTCOMES) - 1)
        res.update(outcome=OUTCOMES[worst], findings=[{"outcome": o, "detail": d} for o, d in ctx.findings],
                   detail="; ".join(f"{o}: {d}" for o, d in sorted(ctx.findings, key=lambda f: OUTCOMES.index(f[0])))[:3000],
                   secs=round(time.monotonic() - t0, 2), runs=ctx.runs, folder=folder)
        cleanup(folder, self.keep)
        return res


def cleanup(folder, keep):
    if keep:
        return
    # Undo what stops root from removing things (chattr is never used).
    for dirpath, dirnames, _ in os.walk(folder):
        for d in dirnames:
            p = os.path.join(dirpath, d)
            if not os.path.islink(p):
                try:
                    os.chmod(p, 0o755)
                except OSError:
                    pass
    shutil.rmtree(folder, ignore_errors=True)


def our_processes(bin_path) -> list[int]:
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            exe = os.readlink(f"/proc/{d}/exe")
        except OSError:
            continue
        if exe == bin_path or exe == bin_path + " (deleted)":
            pids.append(int(d))
    return pids


def leftovers(ctx: Ctx) -> list[tuple[str, str]]:
    found = []
    # Processes of our copy of the binary that outlived the case (children
    # of a sweep or comparison): given 5 s to end, then killed by pid.
    end = time.monotonic() + 5
    pids = our_processes(ctx.bin)
    while pids and time.monotonic() < end:
        time.sleep(0.1)
        pids = our_processes(ctx.bin)
    for pid in pids:
        try:
            args = read(f"/proc/{pid}/cmdline") or b""
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue
        shown = args.replace(b"\0", b" ").decode(errors="replace")[:160]
        found.append(("UNEXPECTED", f"a cnnbench process outlived the case by 5 s (pid {pid}: {shown}); killed"))
    # Temporary files left in the case's folder (TMPDIR is inside it too).
    for dirpath, dirnames, filenames in os.walk(ctx.d):
        for n in filenames + dirnames:
            if TEMP_NAME.match(n) and n not in ctx.__dict__.get("own_temp_names", ()):
                rel = os.path.relpath(os.path.join(dirpath, n), ctx.d)
                found.append(("CLOBBER", f"temporary file left behind: {rel}"))
    return found


# ---------------------------------------------------------------------------
# Class 1: writing files
# ---------------------------------------------------------------------------

OLD = b'{"old": "contents that must survive"}\n'


@case(1)
def out_new_file(c: Ctx):
    """--out to a new file: valid JSON, complete, mode 0666 less the umask."""
    c.run(conv("--out", "o.json", "--format", "json"))
    c.valid_json(c.path("o.json"), complete=True, records=lambda n: n == 1, outcome="UNEXPECTED")
    m = stat.S_IMODE(os.stat(c.path("o.json")).st_mode) if os.path.exists(c.path("o.json")) else None
    c.expect(m == 0o644, "UNEXPECTED", f"new file has mode {m and oct(m)}, expected 0o644 (umask 022)")


@case(1)
def out_replace_bigger_file(c: Ctx):
    """An older, much bigger --out file is replaced whole (no old tail left)."""
    c.write("o.json", b"x" * 200_000)
    c.run(conv("--out", "o.json", "--format", "json"))
    c.valid_json(c.path("o.json"), complete=True)


for _mode in (0o600, 0o640, 0o755, 0o604):
    def _out_mode(c: Ctx, mode=_mode):
        c.write("o.json", OLD, mode=mode)
        c.run(conv("--out", "o.json", "--format", "json"))
        c.valid_json(c.path("o.json"), complete=True)
        m = stat.S_IMODE(os.stat(c.path("o.json")).st_mode)
        c.expect(m == mode, "CLOBBER", f"mode {oct(m)} after the run, was {oct(mode)}")
    add(f"out_mode_{_mode:04o}", 1, _out_mode, doc=f"an existing --out file of mode {_mode:04o} keeps it")


@case(1, who="root")
def out_readonly_file_as_root(c: Ctx):
    """Root writes a 0444 --out file (README: refused only when not root); mode kept."""
    c.write("o.json", OLD, mode=0o444)
    c.run(conv("--out", "o.json", "--format", "json"))
    c.valid_json(c.path("o.json"), complete=True)
    m = stat.S_IMODE(os.stat(c.path("o.json")).st_mode)
    c.expect(m == 0o444, "CLOBBER", f"mode {oct(m)}, was 0o444")


@case(1, who="user")
def out_readonly_file(c: Ctx):
    """A read-only --out file is refused before the run, in one line naming it."""
    p = c.write("o.json", OLD, mode=0o444)
    r = c.run(conv("--out", "o.json", "--format", "json"), allow=(2,))
    c.error_mentions(r, "o.json")
    c.unchanged(p, OLD)


@case(1, who="root")
def out_other_owner_kept(c: Ctx):
    """Root replacing a user's --out file keeps its owner and group."""
    p = c.write("o.json", OLD, mode=0o640, owner=(4242, 4343))
    c.run(conv("--out", "o.json", "--format", "json"))
    c.valid_json(p, complete=True)
    st = os.stat(p)
    c.expect((st.st_uid, st.st_gid) == (4242, 4343), "CLOBBER",
             f"owner {st.st_uid}:{st.st_gid}, was 4242:4343")
    c.expect(stat.S_IMODE(st.st_mode) == 0o640, "CLOBBER", f"mode {oct(stat.S_IMODE(st.st_mode))}")


@case(1)
def out_xattr_kept(c: Ctx):
    """An --out file's extended attribute (user.*) is kept."""
    p = c.write("o.json", OLD)
    try:
        os.setxattr(p, "user.hostile", b"kept")
    except OSError as e:
        raise Skip(f"no user xattrs here: {e}")
    c.run(conv("--out", "o.json", "--format", "json"))
    try:
        v = os.getxattr(p, "user.hostile")
    except OSError:
        v = None
    c.expect(v == b"kept", "CLOBBER", f"user.hostile is {v!r} after the run")


@case(1)
def out_hardlink(c: Ctx):
    """A hard-linked --out file: its other name keeps the old contents."""
    p = c.write("o.json", OLD)
    os.link(p, c.path("other-name.json"))
    c.run(conv("--out", "o.json", "--format", "json"))
    c.valid_json(p, complete=True)
    c.unchanged(c.path("other-name.json"), OLD, "the other hard link")


@case(1)
def out_symlink_to_file(c: Ctx):
    """--out onto a symlink to a regular file: the link stays, its target is written."""
    c.write("real.json", OLD)
    link = c.symlink("real.json", "o.json")
    c.run(conv("--out", "o.json", "--format", "json"))
    c.is_type(link, "symlink")
    c.valid_json(c.path("real.json"), complete=True)


@case(1)
def out_symlink_other_folder(c: Ctx):
    """A symlink to a file in another folder: link kept, target written, no temp file in either."""
    c.mkdir("elsewhere")
    c.write("elsewhere/real.json", OLD, mode=0o640)
    link = c.symlink("elsewhere/real.json", "o.json")
    c.run(conv("--out", "o.json", "--format", "json"))
    c.is_type(link, "symlink")
    c.valid_json(c.path("elsewhere/real.json"), complete=True)
    m = stat.S_IMODE(os.stat(c.path("elsewhere/real.json")).st_mode)
    c.expect(m == 0o640, "CLOBBER", f"target mode {oct(m)}, was 0o640")


@case(1)
def out_symlink_dangling(c: Ctx):
    """A dangling symlink: the link stays, its target is created (as a redirect)."""
    link = c.symlink("made.json", "o.json")
    c.run(conv("--out", "o.json", "--format", "json"))
    c.is_type(link, "symlink")
    c.valid_json(c.path("made.json"), complete=True, outcome="UNEXPECTED")


@case(1)
def out_symlink_chain(c: Ctx):
    """A chain of three symlinks: every link stays, the last target is written."""
    c.write("real.json", OLD)
    c.symlink("real.json", "c")
    c.symlink("c", "b")
    c.symlink("b", "o.json")
    c.run(conv("--out", "o.json", "--format", "json"))
    for n in ("o.json", "b", "c"):
        c.is_type(c.path(n), "symlink")
    c.valid_json(c.path("real.json"), complete=True)


@case(1)
def out_symlink_loop(c: Ctx):
    """A symlink loop: one line, exit 2, nothing created."""
    c.symlink("b", "o.json")
    c.symlink("o.json", "b")
    c.run(conv("--out", "o.json"), allow=(2,))
    c.is_type(c.path("o.json"), "symlink")


@case(1)
def out_symlink_to_dir(c: Ctx):
    """A symlink to a folder: refused in one line; link and folder untouched."""
    c.mkdir("folder")
    c.symlink("folder", "o.json")
    c.run(conv("--out", "o.json"), allow=(2,))
    c.is_type(c.path("o.json"), "symlink")
    c.expect(os.listdir(c.path("folder")) == [], "CLOBBER", "something was written into the folder")


@case(1)
def out_symlink_into_missing_folder(c: Ctx):
    """A symlink into a missing folder: refused in one line."""
    c.symlink("gone/o.json", "o.json")
    r = c.run(conv("--out", "o.json"), allow=(2,))
    c.error_mentions(r, "does not exist")


@case(1)
def out_symlink_to_dev_null(c: Ctx):
    """A symlink to /dev/null: link kept, /dev/null still the device."""
    before = os.stat("/dev/null")
    c.symlink("/dev/null", "o.json")
    c.run(conv("--out", "o.json", "--format", "json"))
    c.is_type(c.path("o.json"), "symlink")
    after = os.stat("/dev/null")
    c.expect(stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev and after.st_ino == before.st_ino,
             "CLOBBER", "/dev/null was replaced")


@case(1)
def out_symlink_to_dev_full(c: Ctx):
    """A symlink to /dev/full: one line, exit 2."""
    c.symlink("/dev/full", "o.json")
    c.run(conv("--out", "o.json", "--format", "json"), allow=(2,))
    c.is_type(c.path("o.json"), "symlink")


@case(1)
def out_symlink_sticky_other_user(c: Ctx):
    """Another user's symlink in a sticky world-writable folder is refused (protected_symlinks)."""
    c.mkdir("sticky", mode=0o1777, owner="root")
    victim = c.write("victim.txt", OLD, mode=0o666, owner="root")
    c.symlink(victim, "sticky/o.json", owner=(4242, 4242))
    r = c.run(conv("--out", "sticky/o.json", "--format", "json"), allow=(2,))
    c.error_mentions(r, "symlink")
    c.unchanged(victim, OLD, "the link's target")
    c.is_type(c.path("sticky/o.json"), "symlink")


@case(1)
def out_symlink_sticky_own(c: Ctx):
    """One's own symlink in a sticky world-writable folder is followed."""
    c.mkdir("sticky", mode=0o1777, owner="root")
    c.mkdir("mine")
    c.write("mine/real.json", OLD)
    c.symlink(c.path("mine/real.json"), "sticky/o.json")
    c.run(conv("--out", "sticky/o.json", "--format", "json"))
    c.is_type(c.path("sticky/o.json"), "symlink")
    c.valid_json(c.path("mine/real.json"), complete=True)


@case(1)
def out_fifo_reader(c: Ctx):
    """--out onto a FIFO with a reader: the reader gets one whole document; the FIFO stays."""
    f = c.mkfifo("o.fifo")
    rd = FifoReader(f)
    rd.start()
    c.run(conv("--out", "o.fifo", "--format", "json", problem=P), timeout=30)
    rd.join(5)
    rd.release()
    c.is_type(f, "fifo")
    try:
        doc = json.loads(rd.data or b"")
        c.expect(doc.get("complete") is True and len(doc.get("records", [])) == 1, "UNEXPECTED",
                 f"reader got complete={doc.get('complete')} with {len(doc.get('records', []))} records")
    except ValueError as e:
        c.bad("CLOBBER", f"the FIFO's reader got no single JSON document ({e}): {(rd.data or b'')[:120]!r}")


@case(1)
def out_fifo_reader_table_many(c: Ctx):
    """A FIFO reader of a 3-problem table run gets the table once, not a copy per record."""
    f = c.mkfifo("o.fifo")
    rd = FifoReader(f)
    rd.start()
    c.run(["conv", P, P2, P3, *FAST, "--no-save", "--out", "o.fifo"])
    rd.join(5)
    rd.release()
    data = rd.data or b""
    c.expect(data.count(b"# cnnbench") == 1 and data.count(b"\nmb1") == 3, "CLOBBER",
             "reader got %d preambles, %d rows" % (data.count(b"# cnnbench"), data.count(b"\nmb1")))


@case(1)
def out_fifo_fail_early_no_reader(c: Ctx):
    """A run that fails early with --out onto a FIFO nobody reads ends (exit 2), not hangs."""
    c.mkfifo("o.fifo")
    c.run(["conv", "mb1ic4ih8oc5g2", *FAST, "--no-save", "--out", "o.fifo"], allow=(2,), timeout=20)
    c.is_type(c.path("o.fifo"), "fifo")


@case(1)
def out_fifo_fail_early_reader(c: Ctx):
    """A run that fails early lets a FIFO's waiting reader go (README: it sees end-of-file)."""
    f = c.mkfifo("o.fifo")
    rd = FifoReader(f)
    rd.start()
    time.sleep(0.2)
    c.run(["conv", "mb1ic4ih8oc5g2", *FAST, "--no-save", "--out", "o.fifo"], allow=(2,), timeout=20)
    rd.join(3)
    if rd.release():
        c.bad("HANG", "the FIFO's reader was still waiting 3 s after cnnbench exited")


@case(1)
def out_fifo_fail_late_reader(c: Ctx):
    """A run that fails after the checks (--dump cannot be made) still releases a FIFO reader."""
    f = c.mkfifo("o.fifo")
    rd = FifoReader(f)
    rd.start()
    name = "n" * 300
    c.run(["conv", P, f'{P2}n"{name}"', *FAST, "--no-save", "--out", "o.fifo", "--dump", "d"],
          allow=(0, 2), timeout=20)
    rd.join(3)
    if rd.release():
        c.bad("HANG", "the FIFO's reader was still waiting 3 s after cnnbench exited")


@case(1)
def out_fifo_late_reader(c: Ctx):
    """A FIFO whose reader comes 2 s late still gets the whole document."""
    f = c.mkfifo("o.fifo")
    rd = FifoReader(f, delay=2.0)
    rd.start()
    c.run(conv("--out", "o.fifo", "--format", "json"), timeout=30)
    rd.join(5)
    rd.release()
    try:
        json.loads(rd.data or b"")
    except ValueError:
        c.bad("CLOBBER", f"late reader got {(rd.data or b'')[:100]!r}")


@case(1)
def out_fifo_no_reader_sigint(c: Ctx):
    """A finished run blocked opening an --out FIFO nobody reads: one SIGINT ends it (exit 130)."""
    c.mkfifo("o.fifo")
    pr = c.spawn(conv("--out", "o.fifo", "--format", "json"))
    time.sleep(2.0)
    pr.signal(signal.SIGINT)
    c.finish(pr, allow=(130,), timeout=10)


@case(1)
def out_fifo_reader_quits(c: Ctx):
    """An --out FIFO whose reader takes 10 bytes and quits: a write error in one line (exit 2), no crash."""
    f = c.mkfifo("o.fifo")

    def reader():
        with open(f, "rb") as r:
            r.read(10)
    t = threading.Thread(target=reader, daemon=True)
    t.start()
    # 150 records: a document of well over a pipe's 64 KiB, so the write
    # meets the closed end.
    c.write("batch.txt", (P + "\n") * 150)
    c.run(["conv", "--from", "batch.txt", *FAST, "--no-save", "--out", "o.fifo", "--format", "json"],
          allow=(2,), timeout=30)
    t.join(3)


@case(1)
def out_fifo_reader_model(c: Ctx):
    """model --out onto a FIFO with a reader: one whole JSON document."""
    f = c.mkfifo("o.fifo")
    rd = FifoReader(f)
    rd.start()
    c.run(["model", "resnet18", "--batch", "1", "--iters", "1", "--warmup", "0", "-q", "--no-save",
           "--out", "o.fifo", "--format", "json"], timeout=30)
    rd.join(5)
    rd.release()
    try:
        json.loads(rd.data or b"")
    except ValueError:
        c.bad("CLOBBER", f"reader got {(rd.data or b'')[:100]!r}")


@case(1)
def out_dev_null(c: Ctx):
    """--out /dev/null: exit 0, /dev/null still the same device."""
    before = os.stat("/dev/null")
    c.run(conv("--out", "/dev/null", "--format", "json"))
    after = os.stat("/dev/null")
    c.expect(stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino, "CLOBBER", "/dev/null replaced")


@case(1)
def out_dev_full(c: Ctx):
    """--out /dev/full: a write error is one line, exit 2."""
    r = c.run(conv("--out", "/dev/full", "--format", "json"), allow=(2,))
    c.error_mentions(r, "/dev/full")


@case(1)
def out_char_device(c: Ctx):
    """--out onto a character device node in the folder (a copy of /dev/null): it stays a device."""
    p = c.path("dev.json")
    try:
        os.mknod(p, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except OSError as e:
        raise Skip(f"mknod refused: {e}")
    c.chown(p)
    rdev = os.stat(p).st_rdev
    c.run(conv("--out", "dev.json", "--format", "json"))
    c.is_type(p, "chardev")
    c.expect(os.lstat(p).st_rdev == rdev, "CLOBBER", "device number changed")


def shell_args(args) -> str:
    return " ".join(shlex.quote(a) for a in args)


def pipe_doc(c: Ctx, out: str, redirect: str = ""):
    """Runs cnnbench --out OUT inside the runner's own shell, its output
    piped to cat, so the pipe belongs to the user running cnnbench (as
    `cnnbench ... | cat` typed by that user)."""
    script = f'"$CB" {shell_args(conv("--out", out, "--format", "json"))} {redirect} | cat'
    r = c.run(script, shell=True)
    try:
        json.loads(r.out)
    except ValueError:
        c.bad("UNEXPECTED", f"the pipe did not carry exactly one JSON document: {r.out[:120]!r}")


@case(1)
def out_dev_stdout_pipe(c: Ctx):
    """`cnnbench --out /dev/stdout | cat`: the pipe carries exactly one document."""
    pipe_doc(c, "/dev/stdout")


@case(1)
def out_proc_self_fd(c: Ctx):
    """`cnnbench --out /proc/self/fd/1 | cat`: the pipe carries exactly one document."""
    pipe_doc(c, "/proc/self/fd/1")


@case(1)
def out_dev_fd_3(c: Ctx):
    """`cnnbench --out /dev/fd/3 3>&1 >/dev/null | cat`: an inherited descriptor gets one document."""
    pipe_doc(c, "/dev/fd/3", "3>&1 >/dev/null")


@case(1, who="user")
def out_dev_stdout_foreign_pipe(c: Ctx):
    """`--out /dev/stdout` where stdout is a pipe root made (as under sudo -u): written, or refused in one line."""
    c.run(conv("--out", "/dev/stdout", "--format", "json"), allow=(0, 2))


@case(1)
def out_dev_stdout_appended_file(c: Ctx):
    """`cnnbench --out /dev/stdout >> log.txt`: the log's earlier lines survive, as with a shell redirect."""
    old = b"earlier log line 1\nearlier log line 2\n" * 20
    p = c.write("log.txt", old)
    c.run(f'"$CB" {shell_args(conv("--out", "/dev/stdout", "--format", "json"))} >> log.txt', shell=True)
    data = read(p) or b""
    if not data.startswith(old):
        c.bad("CLOBBER", f"log.txt (opened with >>) lost its earlier contents: now starts "
                         f"{data[:70]!r} ({len(data)} bytes; {len(old)} were there before)")
    else:
        try:
            json.loads(data[len(old):])
        except ValueError:
            c.bad("CLOBBER", "the appended document is not valid JSON")


@case(1)
def out_dev_stdout_after_header(c: Ctx):
    """`{ echo header; cnnbench --out /dev/stdout; } > log.txt`: the header line is kept."""
    c.run(f'{{ echo "# header"; "$CB" {shell_args(conv("--out", "/dev/stdout", "--format", "csv"))}; }} > log.txt',
          shell=True)
    data = read(c.path("log.txt")) or b""
    c.expect(data.startswith(b"# header\nproblem,"), "CLOBBER",
             f"the line written before cnnbench's output was overwritten: log.txt starts {data[:60]!r}")


@case(1)
def out_directory(c: Ctx):
    """--out onto a directory: refused before the run in one line naming it."""
    c.mkdir("outdir")
    r = c.run(conv("--out", "outdir"), allow=(2,))
    c.error_mentions(r, "outdir")
    c.expect(os.listdir(c.path("outdir")) == [], "CLOBBER", "files appeared in the directory")


@case(1)
def out_readonly_folder_new_file(c: Ctx):
    """A new --out file in a read-only folder: refused before the run (as root, written: the kernel lets root)."""
    c.mkdir("ro", mode=0o555)
    r = c.run(conv("--out", "ro/o.json"), allow=(0,) if c.root else (2,))
    if not c.root:
        c.error_mentions(r, "ro/o.json")


@case(1)
def out_readonly_folder_writable_file(c: Ctx):
    """A writable file in a read-only folder is rewritten in place (README), same inode."""
    c.mkdir("ro")
    p = c.write("ro/o.json", OLD)
    ino = os.stat(p).st_ino
    os.chmod(c.path("ro"), 0o555)
    c.run(conv("--out", "ro/o.json", "--format", "json"))
    c.valid_json(p, complete=True)
    if c.user:
        c.expect(os.stat(p).st_ino == ino, "UNEXPECTED", "replaced, not rewritten in place")


@case(1, who="user")
def out_sticky_other_users_file(c: Ctx):
    """Root's 0666 file in a sticky folder: nobody cannot rename over it; it is rewritten in place."""
    c.mkdir("sticky", mode=0o1777, owner="root")
    p = c.write("sticky/o.json", OLD, mode=0o666, owner="root")
    c.run(conv("--out", "sticky/o.json", "--format", "json"))
    c.valid_json(p, complete=True)
    st = os.stat(p)
    c.expect(st.st_uid == 0, "CLOBBER", f"owner became {st.st_uid}")


@case(1, who="user")
def out_other_users_readonly_file(c: Ctx):
    """Root's 0644 file in nobody's own folder: not writable, so refused (not renamed over)."""
    p = c.write("o.json", OLD, mode=0o644, owner="root")
    c.run(conv("--out", "o.json", "--format", "json"), allow=(2,))
    c.unchanged(p, OLD)


@case(1, who="user")
def out_other_users_writable_file(c: Ctx):
    """Root's 0666 file in nobody's folder: replaced, becomes nobody's (as sed -i), mode kept."""
    p = c.write("o.json", OLD, mode=0o666, owner="root")
    c.run(conv("--out", "o.json", "--format", "json"))
    c.valid_json(p, complete=True)
    m = stat.S_IMODE(os.stat(p).st_mode)
    c.expect(m == 0o666, "CLOBBER", f"mode {oct(m)}, was 0o666")


@case(1)
def out_missing_folder(c: Ctx):
    """--out into a missing folder: refused before the run, one line."""
    r = c.run(conv("--out", "no/such/o.json"), allow=(2,))
    c.error_mentions(r, "does not exist")


@case(1)
def out_parent_is_file(c: Ctx):
    """--out under a regular file (f.txt/o.json): one line, exit 2, f.txt untouched."""
    p = c.write("f.txt", OLD)
    c.run(conv("--out", "f.txt/o.json"), allow=(2,))
    c.unchanged(p, OLD)


@case(1)
def out_trailing_slash(c: Ctx):
    """--out new.json/ (trailing slash): one line, exit 2, no file made."""
    c.run(conv("--out", "new.json/"), allow=(2,))
    c.expect(ftype(c.path("new.json")) == "missing", "UNEXPECTED", f"new.json is a {ftype(c.path('new.json'))}")


@case(1)
def out_empty_path(c: Ctx):
    """--out '': one line, exit 2."""
    c.run(conv("--out", ""), allow=(2,))


@case(1)
def out_name_too_long(c: Ctx):
    """--out with a 300-byte file name: one line, exit 2, no temporary file left."""
    c.run(conv("--out", "x" * 300 + ".json"), allow=(2,))


for _label, _name in [("spaces", "my out file.json"), ("newline", "a\nb.json"),
                      ("unicode", "résumé ✓ 結果.json"), ("dash", "-o.json"),
                      ("nonutf8", b"out-\xff\xfe.json")]:
    def _out_name(c: Ctx, name=_name, label=_label):
        raw = name if isinstance(name, bytes) else name.encode()
        # `--out=NAME`, so that a name starting with '-' is a value, not an option.
        r = c.run(conv("--out=" + as_arg(raw), "--format", "json"), allow=(0, 2) if label == "nonutf8" else (0,))
        if r.rc == 0:
            data = read(os.path.join(c.d.encode(), raw))
            try:
                json.loads(data or b"")
            except ValueError:
                c.bad("UNEXPECTED", f"no valid JSON at {name!r}: {(data or b'')[:60]!r}")
    add(f"out_name_{_label}", 1, _out_name, doc=f"--out to a file named {_name!r}")


@case(1)
def out_socket(c: Ctx):
    """--out onto a Unix socket: one line, exit 2 (cannot be opened), socket kept."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(c.path("o.sock"))
        c.chown(c.path("o.sock"))
        os.chmod(c.path("o.sock"), 0o777)
        c.run(conv("--out", "o.sock"), allow=(2,))
        c.is_type(c.path("o.sock"), "socket")
    finally:
        s.close()


@case(1)
def out_bad_problem_keeps_old(c: Ctx):
    """A run refused for a bad problem leaves an older --out file as it was."""
    p = c.write("o.json", OLD)
    c.run(["conv", "mb1ic4ih8oc5g2", *FAST, "--no-save", "--out", "o.json"], allow=(2,))
    c.unchanged(p, OLD)


@case(1)
def out_late_failure_valid(c: Ctx):
    """A run that fails after its first record (its --dump folder name is too long) leaves --out valid."""
    p = c.write("o.json", OLD)
    c.run(["conv", P, f'{P2}n"{"n" * 300}"', *FAST, "--no-save", "--out", "o.json",
           "--format", "json", "--dump", "d"], allow=(0, 2))
    data = read(p)
    if data != OLD:
        c.valid_json(p)


@case(1)
def out_and_results_same_file(c: Ctx):
    """--out naming a file inside the results folder: both survive as valid JSON."""
    c.mkdir("results")
    c.run(conv("--out", "results/o.json", "--format", "json", save=True))
    for f in c.store():
        c.valid_json(f)


# -- results store --------------------------------------------------------

@case(1)
def store_new_nested(c: Ctx):
    """--results a/b/c (missing): made, one complete run file in it."""
    c.run(conv("--results", "a/b/c", save=True))
    files = c.store("a/b/c")
    c.expect(len(files) == 1, "UNEXPECTED", f"{len(files)} files in a/b/c")
    for f in files:
        c.valid_json(f, complete=True, records=lambda n: n == 1)


@case(1)
def store_is_file(c: Ctx):
    """--results onto a regular file: one line, exit 2, file untouched."""
    p = c.write("results", OLD)
    c.run(conv("--results", "results", save=True), allow=(2,))
    c.unchanged(p, OLD)


@case(1)
def store_env_is_file(c: Ctx):
    """CNNBENCH_RESULTS onto a regular file: one line naming it, exit 2."""
    p = c.write("store.txt", OLD)
    r = c.run(conv(save=True), env={"CNNBENCH_RESULTS": p}, allow=(2,))
    c.error_mentions(r, "store.txt")
    c.unchanged(p, OLD)


@case(1)
def store_readonly(c: Ctx):
    """A read-only results folder: refused before the run (root may write it)."""
    c.mkdir("results", mode=0o555)
    c.run(conv(save=True), allow=(0,) if c.root else (2,))


@case(1)
def store_missing_under_readonly(c: Ctx):
    """A results folder to be made under a read-only folder: refused before the run (root may make it)."""
    c.mkdir("ro", mode=0o555)
    c.run(conv("--results", "ro/results", save=True), allow=(0,) if c.root else (2,))


@case(1)
def store_symlink_to_dir(c: Ctx):
    """--results onto a symlink to a folder: the file lands in the target, the link stays."""
    c.mkdir("real")
    c.symlink("real", "results")
    c.run(conv(save=True))
    c.is_type(c.path("results"), "symlink")
    c.expect(len(c.store("real")) == 1, "UNEXPECTED", f"{len(c.store('real'))} files in the target")


@case(1)
def store_dangling_symlink(c: Ctx):
    """--results onto a dangling symlink: made through it or refused in one line; the link stays a link."""
    c.symlink("made", "results")
    c.run(conv(save=True), allow=(0, 2))
    c.is_type(c.path("results"), "symlink")


@case(1)
def store_others_untouched(c: Ctx):
    """Other files in the results folder (notes, an older run) are left alone."""
    c.mkdir("results")
    notes = c.write("results/notes.txt", OLD)
    old = c.copy_seed("results/20000101T000000Z-conv-old-1.json")
    before = read(old)
    c.run(conv(save=True))
    c.unchanged(notes, OLD)
    c.unchanged(old, before)
    c.expect(len(c.store()) == 2, "UNEXPECTED", f"{len(c.store())} run files")


@case(1)
def store_concurrent_runs(c: Ctx):
    """Two runs at once into one results folder: two valid files, none lost."""
    a = c.spawn(conv(save=True))
    b = c.spawn(conv(save=True))
    c.finish(a)
    c.finish(b)
    files = c.store()
    c.expect(len(files) == 2, "CLOBBER", f"{len(files)} run files after two concurrent runs")
    for f in files:
        c.valid_json(f, complete=True)


@case(1)
def store_newline_path(c: Ctx):
    """--results with a newline in the folder name works."""
    c.run(conv("--results", "res\nults", save=True))
    c.expect(len(c.store("res\nults")) == 1, "UNEXPECTED", "no run file")


# -- report --out / --charts -------------------------------------------------

def report_in(c: Ctx, rel="in"):
    c.mkdir(rel)
    c.copy_seed(f"{rel}/run.json")
    return rel


@case(1)
def report_out_symlink(c: Ctx):
    """report --out onto a symlink: the link stays, the target gets the report, mode kept."""
    report_in(c)
    c.write("real.md", OLD, mode=0o600)
    c.symlink("real.md", "r.md")
    c.run(["report", "in", "--out", "r.md"])
    c.is_type(c.path("r.md"), "symlink")
    data = read(c.path("real.md")) or b""
    c.expect(data.startswith(b"# cnnbench report"), "UNEXPECTED", f"target holds {data[:40]!r}")
    m = stat.S_IMODE(os.stat(c.path("real.md")).st_mode)
    c.expect(m == 0o600, "CLOBBER", f"mode {oct(m)}, was 0o600")


@case(1)
def report_out_fifo(c: Ctx):
    """report --out onto a FIFO with a reader: one whole report, FIFO kept."""
    report_in(c)
    f = c.mkfifo("r.fifo")
    rd = FifoReader(f)
    rd.start()
    c.run(["report", "in", "--out", "r.fifo"], timeout=30)
    rd.join(5)
    rd.release()
    c.is_type(f, "fifo")
    c.expect((rd.data or b"").count(b"# cnnbench report") == 1, "CLOBBER",
             f"reader got {(rd.data or b'')[:60]!r}")


@case(1)
def report_out_directory(c: Ctx):
    """report --out onto a folder: one line, exit 2."""
    report_in(c)
    c.mkdir("r.md")
    c.run(["report", "in", "--out", "r.md"], allow=(2,))


@case(1)
def report_out_readonly(c: Ctx):
    """report --out onto a 0444 file: one line, exit 2, untouched (as root: written, mode kept)."""
    report_in(c)
    p = c.write("r.md", OLD, mode=0o444)
    c.run(["report", "in", "--out", "r.md"], allow=(0,) if c.root else (2,))
    if c.root:
        m = stat.S_IMODE(os.stat(p).st_mode)
        c.expect(m == 0o444, "CLOBBER", f"mode {oct(m)}, was 0o444")
    else:
        c.unchanged(p, OLD)


@case(1)
def report_out_dev_full(c: Ctx):
    """report --out /dev/full: one line, exit 2."""
    report_in(c)
    c.run(["report", "in", "--out", "/dev/full"], allow=(2,))


@case(1)
def report_out_missing_folder(c: Ctx):
    """report --out into a missing folder: made, as the charts folder is (README)."""
    report_in(c)
    c.run(["report", "in", "--out", "no/such/r.md"])
    c.expect(os.path.isfile(c.path("no/such/r.md")), "UNEXPECTED", "the report was not written")


@case(1)
def report_out_hardlink(c: Ctx):
    """report --out onto a hard-linked file: the other name keeps the old contents."""
    report_in(c)
    p = c.write("r.md", OLD)
    os.link(p, c.path("other.md"))
    c.run(["report", "in", "--out", "r.md"])
    c.unchanged(c.path("other.md"), OLD, "the other hard link")


@case(1)
def report_fail_keeps_old_out(c: Ctx):
    """A report that fails (nothing readable) leaves an older --out as it was."""
    p = c.write("r.md", OLD)
    c.write("bad.json", b"{ torn")
    c.run(["report", "bad.json", "--out", "r.md"], allow=(2,))
    c.unchanged(p, OLD)


@case(1)
def report_out_dev_stdout_append(c: Ctx):
    """`cnnbench report in --out /dev/stdout >> log.md`: the log's earlier contents survive."""
    report_in(c)
    old = b"# earlier notes\n" * 50
    p = c.write("log.md", old)
    c.run('"$CB" report in --out /dev/stdout >> log.md', shell=True)
    data = read(p) or b""
    c.expect(data.startswith(old), "CLOBBER",
             f"log.md (opened with >>) lost its earlier contents: starts {data[:50]!r}")


@case(1)
def report_charts_onto_file(c: Ctx):
    """report --charts onto a regular file: one line, exit 2, file untouched."""
    report_in(c)
    p = c.write("charts", OLD)
    c.run(["report", "in", "--charts", "charts"], allow=(2,))
    c.unchanged(p, OLD)


@case(1)
def report_charts_readonly(c: Ctx):
    """report --charts into a read-only folder: one line, exit 2 (root may write it)."""
    report_in(c)
    c.mkdir("charts", mode=0o555)
    c.run(["report", "in", "--charts", "charts"], allow=(0,) if c.root else (2,))


@case(1)
def report_charts_symlink(c: Ctx):
    """report --charts onto a symlink to a folder: charts land in the target, the link stays."""
    report_in(c)
    c.mkdir("real")
    c.symlink("real", "charts")
    c.run(["report", "in", "--charts", "charts", "--out", "r.md"])
    c.is_type(c.path("charts"), "symlink")
    c.expect(any(n.endswith(".svg") for n in os.listdir(c.path("real"))), "UNEXPECTED", "no SVG written")


# -- --dump ---------------------------------------------------------------

@case(1)
def dump_new(c: Ctx):
    """--dump into a new folder: .npy files and problem.json."""
    c.run(conv("--dump", "d"))
    names = set(os.listdir(c.path("d"))) if os.path.isdir(c.path("d")) else set()
    c.expect({"problem.json", "src.npy", "wei.npy", "dst.npy"} <= names, "UNEXPECTED", f"dump holds {sorted(names)}")


@case(1)
def dump_stale_files(c: Ctx):
    """--dump onto an earlier dump: its stale .npy files go, other files stay."""
    c.mkdir("d")
    for n in ("diff_src.npy", "diff_wei.npy", "diff_bias.npy", "problem.json"):
        c.write(f"d/{n}", b"stale")
    notes = c.write("d/notes.txt", OLD)
    c.run(conv("--dump", "d"))
    names = set(os.listdir(c.path("d")))
    c.expect(not ({"diff_src.npy", "diff_wei.npy", "diff_bias.npy"} & names), "CLOBBER",
             f"stale tensors left beside a new problem.json: {sorted(names)}")
    c.unchanged(notes, OLD, "an unrelated file in the dump folder")
    try:
        doc = load_json(c.path("d/problem.json"))
        c.expect(P.split("kh")[0] in json.dumps(doc), "UNEXPECTED", "problem.json is not this problem's")
    except Exception as e:
        c.bad("CLOBBER", f"problem.json unreadable: {e}")


@case(1)
def dump_onto_file(c: Ctx):
    """--dump onto a regular file: refused before the run, file untouched."""
    p = c.write("d", OLD)
    c.run(conv("--dump", "d"), allow=(2,))
    c.unchanged(p, OLD)


@case(1)
def dump_readonly_dir(c: Ctx):
    """--dump into a read-only folder: refused before the run (root may write it)."""
    c.mkdir("d", mode=0o555)
    c.run(conv("--dump", "d"), allow=(0,) if c.root else (2,))


@case(1)
def dump_symlinked_tensor(c: Ctx):
    """A stale src.npy that is a symlink to a file elsewhere: the link is replaced, the file it names is not written."""
    c.mkdir("d")
    victim = c.write("victim.bin", OLD)
    c.symlink("../victim.bin", "d/src.npy")
    c.run(conv("--dump", "d"))
    c.unchanged(victim, OLD, "the file a stale dump link pointed to")


@case(1)
def dump_symlink_dir(c: Ctx):
    """--dump onto a symlink to a folder: files land in the target, the link stays."""
    c.mkdir("real")
    c.symlink("real", "d")
    c.run(conv("--dump", "d"))
    c.is_type(c.path("d"), "symlink")
    c.expect("problem.json" in os.listdir(c.path("real")), "UNEXPECTED", "no problem.json in the target")


@case(1)
def dump_multi_problems(c: Ctx):
    """--dump with two problems: one subfolder each, nothing outside the dump folder."""
    c.run(["conv", f'{P}n"../../escape"', P2, *FAST, "--no-save", "--dump", "d"])
    subs = sorted(os.listdir(c.path("d"))) if os.path.isdir(c.path("d")) else []
    c.expect(len(subs) == 2, "UNEXPECTED", f"dump holds {subs}")
    outside = sorted(set(os.listdir(c.d)) - {"d", "tmp"})
    c.expect(not outside, "CLOBBER", f"files outside the dump folder: {outside}")


@case(1)
def dump_into_results(c: Ctx):
    """--dump into the results folder itself: the run file stays beside the tensors."""
    c.run(conv("--dump", "results", save=True))
    c.expect(len(c.store()) >= 2, "CLOBBER", f"results holds {sorted(os.listdir(c.path('results')))}")
    for f in c.store():
        if not f.endswith("problem.json"):
            c.valid_json(f, complete=True)


@case(1)
def dump_dev_null(c: Ctx):
    """--dump /dev/null: refused before the run, /dev/null untouched."""
    c.run(conv("--dump", "/dev/null"), allow=(2,))
    c.expect(stat.S_ISCHR(os.stat("/dev/null").st_mode), "CLOBBER", "/dev/null is no longer a device")


@case(1)
def dump_parent_is_file(c: Ctx):
    """--dump f.txt/sub: refused before the run."""
    p = c.write("f.txt", OLD)
    c.run(conv("--dump", "f.txt/sub"), allow=(2,))
    c.unchanged(p, OLD)


# ---------------------------------------------------------------------------
# Class 2: signals, pipes, write errors
# ---------------------------------------------------------------------------

def stop_mid_run(c: Ctx, sig, args=None, out=None, second=None, wait_records=True,
                 rel="results", allow=None):
    """Starts a long run, waits for its first record in the store, sends
    `sig` (and `second` after that many seconds), and checks what is kept."""
    args = list(args or LONG) + ["--results", c.path(rel)]
    if out:
        args += ["--out", out, "--format", "json"]
    pr = c.spawn(args)
    if wait_records:
        got = c.wait_until(lambda: c.store_records(rel) >= 1, 25)
        c.expect(got, "UNEXPECTED", "no finished record in the store after 25 s")
    else:
        time.sleep(1.0)
    pr.signal(sig)
    if second is not None:
        time.sleep(second)
        pr.signal(sig)
    code = 128 + sig
    r = c.finish(pr, allow=allow or (code,), timeout=20)
    return r


def kept_records(c: Ctx, rel="results", at_least=1):
    files = c.store(rel)
    c.expect(files, "CLOBBER", "no run file in the store")
    for f in files:
        c.valid_json(f, complete=False, records=lambda n: n >= at_least)


for _sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    def _stop(c: Ctx, sig=_sig):
        r = stop_mid_run(c, sig, out="o.json")
        kept_records(c)
        c.valid_json(c.path("o.json"), complete=False, records=lambda n: n >= 1)
        word = b"interrupted" if sig == signal.SIGINT else f"stopped by {signal.Signals(sig).name}".encode()
        c.expect(word in r.err, "UNEXPECTED", f"stderr does not say {word.decode()!r}: {first_lines(r.err)}")
    add(f"sig_{signal.Signals(_sig).name.lower()}_conv", 2, _stop,
        doc=f"{signal.Signals(_sig).name} mid-run: exit {128 + _sig}, finished records kept (complete: false)")


@case(2)
def sig_int_gemm(c: Ctx):
    """SIGINT mid-way through several GEMMs: exit 130, finished records kept."""
    stop_mid_run(c, signal.SIGINT, args=["gemm", "64x64x64", "96x96x96", "128x128x128", "160x160x160",
                                          "--device", "cpu", "--min-time", "1", "-q"])
    kept_records(c)


@case(2)
def sig_term_model(c: Ctx):
    """SIGTERM during a model run: exit 143 within seconds, the run file says complete: false."""
    stop_mid_run(c, signal.SIGTERM, args=["model", "resnet18", "alexnet", "--batch", "1",
                                           "--min-time", "5", "-q"], wait_records=False)
    files = c.store()
    c.expect(files, "CLOBBER", "no run file in the store")
    for f in files:
        c.valid_json(f, complete=False)


@case(2)
def sig_int_model_out(c: Ctx):
    """SIGINT during a two-model run with --out: exit 130, --out valid with the finished model."""
    pr = c.spawn(["model", "resnet18", "alexnet", "--batch", "1", "--min-time", "2", "-q",
                  "--results", c.path("results"), "--out", "o.json", "--format", "json"])
    c.wait_until(lambda: c.store_records() >= 1, 30)
    pr.signal(signal.SIGINT)
    c.finish(pr, allow=(130,), timeout=20)
    c.valid_json(c.path("o.json"), complete=False, records=lambda n: n >= 1)


@case(2)
def sig_int_check(c: Ctx):
    """SIGINT during check: it stops after the model being checked, exit 130."""
    pr = c.spawn(["check", "--model", "alexnet", "--batch", "1"])
    time.sleep(1.0)
    pr.signal(signal.SIGINT)
    c.finish(pr, allow=(130,), timeout=40)


@case(2)
def sig_double_int(c: Ctx):
    """Two SIGINTs 50 ms apart: the process ends at once (130); store and --out valid, no temp file."""
    r = stop_mid_run(c, signal.SIGINT, out="o.json", second=0.05)
    c.expect(r.secs < 30, "UNEXPECTED", f"took {r.secs:.1f} s")
    for f in c.store():
        c.valid_json(f)
    c.valid_json(c.path("o.json"))


@case(2)
def sig_double_term_burst(c: Ctx):
    """A burst of 20 SIGTERMs: exit 143, store and --out valid, no temp file."""
    pr = c.spawn(LONG + ["--results", c.path("results"), "--out", "o.json", "--format", "json"])
    c.wait_until(lambda: c.store_records() >= 1, 25)
    for _ in range(20):
        pr.signal(signal.SIGTERM)
        time.sleep(0.001)
    c.finish(pr, allow=(143,), timeout=20)
    for f in c.store():
        c.valid_json(f)
    c.valid_json(c.path("o.json"))


@case(2)
def sig_int_at_start(c: Ctx):
    """SIGINT right after the process starts: exit 130 (or killed by SIGINT before the handlers), nothing torn."""
    pr = c.spawn(LONG + ["--results", c.path("results")])
    time.sleep(0.02)
    pr.signal(signal.SIGINT)
    c.finish(pr, allow=(130, -signal.SIGINT), timeout=20)
    for f in c.store():
        c.valid_json(f)


@case(2)
def sig_stop_cont(c: Ctx):
    """SIGSTOP then SIGCONT mid-run: the run finishes normally (exit 0)."""
    pr = c.spawn(["conv", P, "--device", "cpu", "--algo", "direct", "--dir", "fwd", "--min-time", "1",
                  "-q", "--no-save"])
    time.sleep(0.5)
    pr.signal(signal.SIGSTOP)
    time.sleep(0.5)
    pr.signal(signal.SIGCONT)
    c.finish(pr, timeout=30)


@case(2)
def sig_int_fifo_reader(c: Ctx):
    """SIGINT with --out onto a FIFO: the reader gets one document with complete: false."""
    f = c.mkfifo("o.fifo")
    rd = FifoReader(f)
    rd.start()
    stop_mid_run(c, signal.SIGINT, out="o.fifo")
    rd.join(5)
    rd.release()
    try:
        doc = json.loads(rd.data or b"")
        c.expect(doc.get("complete") is False and len(doc.get("records", [])) >= 1, "UNEXPECTED",
                 f"reader got complete={doc.get('complete')}, {len(doc.get('records', []))} records")
    except ValueError:
        c.bad("CLOBBER", f"reader got {(rd.data or b'')[:100]!r}")


SWEEP = ["conv", P, P2, P3, "--device", "cpu", "--algo", "direct", "--min-time", "1",
         "-q", "--threads", "1,2"]
COMPARE = ["compare", "--variant", "a:CNNBENCH_THREADS=1", "--variant", "b:CNNBENCH_THREADS=2", "-q",
           "--", "conv", P, P2, P3, "--device", "cpu", "--algo", "direct", "--min-time", "1"]


def stop_children(c: Ctx, args, sig, second=None, group=False, allow=None):
    pr = c.spawn(args + ["--results", c.path("results")])
    c.wait_until(lambda: c.store_records() >= 1, 25)
    if group:
        os.killpg(pr.pid, sig)
    else:
        pr.signal(sig)
    if second is not None:
        time.sleep(second)
        pr.signal(sig)
    r = c.finish(pr, allow=allow or (128 + sig,), timeout=25)
    return r


@case(2)
def sig_int_sweep(c: Ctx):
    """SIGINT during a --threads 1,2 sweep: exit 130, no child left, child's records kept."""
    stop_children(c, SWEEP, signal.SIGINT)
    kept_records(c)


@case(2)
def sig_term_compare(c: Ctx):
    """SIGTERM during compare: exit 143, no child left."""
    stop_children(c, COMPARE, signal.SIGTERM)
    kept_records(c)


@case(2)
def sig_hup_compare(c: Ctx):
    """SIGHUP during compare: exit 129, no child left."""
    stop_children(c, COMPARE, signal.SIGHUP)


@case(2)
def sig_int_group_compare(c: Ctx):
    """Ctrl-C as a terminal sends it (to the whole process group): exit 130, no child left."""
    stop_children(c, COMPARE, signal.SIGINT, group=True)


@case(2)
def sig_double_int_compare(c: Ctx):
    """Two SIGINTs 2 ms apart during compare: the parent ends at once; its child must not run on."""
    stop_children(c, COMPARE, signal.SIGINT, second=0.002)


@case(2)
def sig_double_int_sweep(c: Ctx):
    """Two SIGINTs 2 ms apart during a sweep: the parent ends at once; its child must not run on."""
    stop_children(c, SWEEP, signal.SIGINT, second=0.002)


def closed_pipe(c: Ctx, args, allow=(0, 141), **kw):
    """Runs with stdout a pipe whose reader is already gone."""
    rfd, wfd = os.pipe()
    os.close(rfd)
    try:
        pr = c.spawn(args, stdout=wfd, **kw)
    finally:
        os.close(wfd)
    return c.finish(pr, allow=allow, quiet_ok=True)


for _label, _args in [
    ("conv", conv("--format", "json")),
    ("conv_table_many", ["conv", P, P2, P3, *FAST, "--no-save"]),
    ("gemm", ["gemm", "8x8x8", "--device", "cpu", "--iters", "1", "--warmup", "0", "-q", "--no-save"]),
    ("info", ["info", "--format", "json"]),
    ("model_describe_all", ["model", "all", "--describe"]),
    ("help", ["conv", "--help"]),
    ("sweep", ["conv", P, *FAST, "--no-save", "--threads", "1,2"]),
    ("compare", ["compare", "--variant", "a:CNNBENCH_THREADS=1", "--variant", "b:CNNBENCH_THREADS=2", "-q",
                 "--", *conv()]),
]:
    def _closed(c: Ctx, args=_args):
        closed_pipe(c, args)
    add(f"pipe_closed_{_label}", 2, _closed,
        doc=f"stdout's reader already gone ({_label}): exit 141 or 0, nothing on stderr")


@case(2)
def pipe_closed_report(c: Ctx):
    """report with stdout's reader already gone: exit 141 or 0, nothing said."""
    report_in(c)
    closed_pipe(c, ["report", "in"])


for _label, _args in [("conv_json", 'conv %s --format json' % " ".join([P] + FAST + ["--no-save"])),
                      ("model_describe", "model all --describe"),
                      ("info", "info")]:
    def _head(c: Ctx, args=_args):
        script = f'( "$CB" {args} 2>"{c.path("err")}"; echo $? >"{c.path("rc")}" ) | head -c 10 >/dev/null'
        c.run(script, shell=True)
        rc = int((read(c.path("rc")) or b"-1").strip() or -1)
        err = read(c.path("err")) or b""
        c.expect(rc in (0, 141), "UNEXPECTED", f"cnnbench exited {rc} under `| head -c 10`: {first_lines(err)}")
        if any(m in err for m in PANIC_MARKS):
            c.bad("PANIC", f"under `| head -c 10`: {first_lines(err)}")
        if rc in (134, 139):
            c.bad("ABORT", f"under `| head -c 10`: exit {rc}")
        c.expect(not err.strip(), "UNEXPECTED", f"said something under `| head -c 10`: {first_lines(err)}")
    add(f"pipe_head_{_label}", 2, _head, doc=f"`cnnbench {_args} | head -c 10`: quiet exit 141 or 0")


for _label, _args in [("conv", conv()), ("conv_json", conv("--format", "json")),
                      ("info", ["info"]), ("model_describe", ["model", "resnet18", "--describe"]),
                      ("report", None), ("help", ["conv", "--help"]), ("version", ["--version"]),
                      ("compare", ["compare", "--variant", "a:CNNBENCH_THREADS=1", "--variant",
                                   "b:CNNBENCH_THREADS=2", "-q", "--", *conv()])]:
    def _full(c: Ctx, args=_args):
        if args is None:
            args = ["report", report_in(c)]
        with open("/dev/full", "wb") as full:
            c.run(args, stdout=full, allow=(2,))
    add(f"stdout_dev_full_{_label}", 2, _full, doc=f"`cnnbench {_label} > /dev/full`: one line, exit 2")


@case(2)
def stdout_dev_full_with_out(c: Ctx):
    """stdout on /dev/full but the output goes to --out: exit 0, file valid."""
    with open("/dev/full", "wb") as full:
        c.run(conv("--out", "o.json", "--format", "json"), stdout=full)
    c.valid_json(c.path("o.json"), complete=True)


@case(2)
def stderr_closed_error(c: Ctx):
    """A bad problem with stderr closed (2>&-): exit 2, no crash."""
    c.run(f'exec "$CB" conv mb1ic4ih8oc5g2 --device cpu 2>&-', shell=True, allow=(2,), one_line=False)


@case(2)
def stderr_closed_out_file(c: Ctx):
    """With stderr closed, a file cnnbench opens may become fd 2: --out and the store must still hold pure JSON."""
    args = " ".join(shlex.quote(a) for a in conv("--out", "o.json", "--format", "json", save=True))
    c.run(f'exec "$CB" {args} 2>&-', shell=True, one_line=False)
    c.valid_json(c.path("o.json"), complete=True)
    for f in c.store():
        c.valid_json(f, complete=True)


@case(2)
def stdout_closed_store(c: Ctx):
    """With stdout closed (>&-), the table must not land in the store file that took fd 1."""
    args = " ".join(shlex.quote(a) for a in conv(save=True))
    c.run(f'exec "$CB" {args} >&-', shell=True, allow=(0, 2, 141))
    files = c.store()
    c.expect(files, "UNEXPECTED", "no store file")
    for f in files:
        c.valid_json(f, complete=True)


@case(2)
def stdout_closed_out_file(c: Ctx):
    """With stdout closed (>&-), --out o.json holds pure JSON."""
    args = " ".join(shlex.quote(a) for a in conv("--out", "o.json", "--format", "json"))
    c.run(f'exec "$CB" {args} >&-', shell=True, allow=(0, 2, 141))
    c.valid_json(c.path("o.json"), complete=True)


@case(2)
def stdin_closed(c: Ctx):
    """stdin closed (<&-): a normal run, exit 0."""
    args = " ".join(shlex.quote(a) for a in conv())
    c.run(f'exec "$CB" {args} <&-', shell=True)


@case(2)
def stderr_dev_full_error(c: Ctx):
    """A bad problem with stderr on /dev/full: exit 2, no crash."""
    with open("/dev/full", "wb") as full:
        c.run(["conv", "mb1ic4ih8oc5g2", "--device", "cpu"], stderr=full, allow=(2,), one_line=False)


@case(2)
def stderr_pipe_closed_error(c: Ctx):
    """A bad problem with stderr a pipe nobody reads: exit 2, no crash (SIGPIPE)."""
    rfd, wfd = os.pipe()
    os.close(rfd)
    try:
        pr = c.spawn(["conv", "mb1ic4ih8oc5g2", "--device", "cpu"], stderr=wfd)
    finally:
        os.close(wfd)
    c.finish(pr, allow=(2,), one_line=False)


@case(2)
def stderr_closed_signal(c: Ctx):
    """SIGINT mid-run with stderr closed: still exit 130 and records kept (the closing lines cannot crash it)."""
    args = " ".join(shlex.quote(a) for a in LONG + ["--results", c.path("results")])
    pr = c.spawn(f'exec "$CB" {args} 2>&-', shell=True)
    c.wait_until(lambda: c.store_records() >= 1, 25)
    pr.signal(signal.SIGINT)
    c.finish(pr, allow=(130,), timeout=20, one_line=False)
    kept_records(c)


@case(2)
def stderr_closed_sweep_error(c: Ctx):
    """A sweep whose child fails, with stderr closed: exit 2, no crash."""
    c.run('exec "$CB" conv mb1ic4ih8oc4oh8kh3ph1 --device cpu --iters 1 --threads 1,2 --isa bogus,avx2 2>&-',
          shell=True, allow=(2,), one_line=False)


def fsize(c: Ctx, args, limit, allow=(2,)):
    """Runs with RLIMIT_FSIZE `limit` and SIGXFSZ ignored, so writes past it fail with EFBIG."""
    cmd = " ".join(shlex.quote(a) for a in args)
    return c.run(f'trap "" XFSZ; exec "$CB" {cmd}', shell=True, limits={"fsize": limit}, allow=allow)


@case(2)
def write_error_out_keeps_old(c: Ctx):
    """--out write fails (file size limit): one line, exit 2, the older file intact, no temp file."""
    p = c.write("o.json", OLD)
    fsize(c, conv("--out", "o.json", "--format", "json"), 600)
    c.unchanged(p, OLD)


@case(2)
def write_error_store(c: Ctx):
    """The store's write fails (file size limit): one line, exit 2, no temp file."""
    c.mkdir("results")
    fsize(c, conv(save=True), 600)


@case(2)
def write_error_dump(c: Ctx):
    """--dump's writes fail (file size limit): one line, exit 2."""
    fsize(c, ["conv", "mb2ic16ih16oc16kh3ph1", *FAST, "--no-save", "--dump", "d"], 2000)


@case(2)
def write_error_report_out(c: Ctx):
    """report --out write fails (file size limit): one line, exit 2, older report intact."""
    report_in(c)
    p = c.write("r.md", OLD)
    fsize(c, ["report", "in", "--out", "r.md"], 300)
    c.unchanged(p, OLD)


# ---------------------------------------------------------------------------
# Class 3: memory and limits
# ---------------------------------------------------------------------------

@case(3)
def mem_conv_huge_batch(c: Ctx):
    """conv with a huge batch under ulimit -v 1 GiB: refused in one line, exit 2."""
    r = c.run(["conv", "mb100000ic64ih56oc64kh3ph1", *FAST, "--no-save"], limits={"as": GiB}, allow=(2,))
    c.error_mentions(r, "memory")


for _mb in (1800, 1950):
    def _near(c: Ctx, mb=_mb):
        c.run(["conv", f"mb{mb}ic16ih32oc16kh3ph1", *FAST, "--no-save"], limits={"as": 512 * MiB}, allow=(0, 2))
    add(f"mem_conv_near_limit_mb{_mb}", 3, _near,
        doc=f"conv mb{_mb}ic16ih32oc16kh3ph1 under ulimit -v 512 MiB (just under the estimate's limit): runs or one line, never an abort")


@case(3)
def mem_conv_near_limit_all_dirs(c: Ctx):
    """conv in all directions with im2col near a 512 MiB ulimit -v: runs or one line, never an abort."""
    c.run(["conv", "mb1900ic16ih32oc16kh3ph1", "--device", "cpu", "--iters", "1", "--warmup", "0",
           "--algo", "im2col_gemm", "-q", "--no-save"], limits={"as": 512 * MiB}, allow=(0, 2))


@case(3)
def mem_conv_data_limit(c: Ctx):
    """conv near a 512 MiB ulimit -d (RLIMIT_DATA): runs or one line, never an abort."""
    c.run(["conv", "mb1900ic16ih32oc16kh3ph1", *FAST, "--no-save"], limits={"data": 512 * MiB}, allow=(0, 2))


@case(3)
def mem_conv_batch_max(c: Ctx):
    """--batch max under ulimit -v 1 GiB: picks a batch that really fits (exit 0)."""
    c.run(conv("--batch", "max"), limits={"as": GiB})


@case(3)
def mem_conv_tiny_as(c: Ctx):
    """A tiny problem under ulimit -v 24 MiB: runs or one line, never an abort."""
    c.run(conv(), limits={"as": 24 * MiB}, allow=(0, 2))


@case(3)
def mem_gemm_near_limit(c: Ctx):
    """gemm 6000^3 under ulimit -v 512 MiB: runs or one line, never an abort."""
    c.run(["gemm", "6000x6000x6000", "--device", "cpu", "--iters", "1", "--warmup", "0", "-q", "--no-save"],
          limits={"as": 512 * MiB}, allow=(0, 2))


@case(3)
def mem_gemm_huge(c: Ctx):
    """gemm 100000^3: refused in one line (memory), exit 2."""
    c.run(["gemm", "100000x100000x100000", "--device", "cpu", "--iters", "1", "-q", "--no-save"], allow=(2,))


@case(3)
def mem_gemm_overflow(c: Ctx):
    """gemm with u64::MAX dimensions: one line, exit 2."""
    c.run(["gemm", "18446744073709551615x18446744073709551615x2", "--device", "cpu", "--no-save"], allow=(2,))


@case(3)
def mem_model_huge_batch(c: Ctx):
    """model resnet50 --batch 100000 under ulimit -v 2 GiB: an OOM row (exit 0) or one line."""
    c.run(["model", "resnet50", "--batch", "100000", "--iters", "1", "--warmup", "0", "-q", "--no-save"],
          limits={"as": 2 * GiB}, allow=(0, 2))


@case(3)
def mem_model_near_limit(c: Ctx):
    """model resnet18 --batch 9 under ulimit -v 900 MiB (at the estimate's edge): never an abort."""
    c.run(["model", "resnet18", "--batch", "9", "--iters", "1", "--warmup", "0", "-q", "--no-save"],
          limits={"as": 900 * MiB}, allow=(0, 2))


@case(3)
def mem_model_batch_u64(c: Ctx):
    """model --batch u64::MAX: one line or an OOM row, never an abort."""
    c.run(["model", "resnet18", "--batch", "18446744073709551615", "--iters", "1", "-q", "--no-save"],
          allow=(0, 2))


@case(3)
def mem_check_huge_batch(c: Ctx):
    """check --batch 100000: refused in one line, exit 2."""
    c.run(["check", "--model", "resnet50", "--batch", "100000"], allow=(2,))


@case(3)
def mem_check_as_limit(c: Ctx):
    """check under ulimit -v 1 GiB: refused in one line, exit 2."""
    c.run(["check", "--model", "alexnet", "--batch", "2"], limits={"as": GiB}, allow=(2,))


@case(3)
def mem_info_tiny_as(c: Ctx):
    """info under ulimit -v 32 MiB: runs or one line, never an abort."""
    c.run(["info"], limits={"as": 32 * MiB}, allow=(0, 2))


@case(3, who="user")
def lim_nproc_threads(c: Ctx):
    """--threads 64 with RLIMIT_NPROC 3 (as nobody): one line, exit 2."""
    c.run(conv("--threads", "64"), limits={"nproc": 3}, allow=(2,))


@case(3, who="user")
def lim_nproc_sweep(c: Ctx):
    """A sweep with RLIMIT_NPROC 2 (as nobody): runs or one line, never a crash."""
    c.run(conv("--threads", "1,2"), limits={"nproc": 2}, allow=(0, 2))


@case(3)
def lim_nofile(c: Ctx):
    """A sweep with RLIMIT_NOFILE 12: runs or one line."""
    c.run(conv("--threads", "1,2"), limits={"nofile": 12}, allow=(0, 2))


BAD_VALUES = [
    ("threads_0", conv("--threads", "0")),
    ("threads_huge", conv("--threads", "100000")),
    ("threads_u64_overflow", conv("--threads", "18446744073709551616")),
    ("iters_0", conv("--iters", "0")),
    ("iters_cap", ["conv", P, "--device", "cpu", "--iters", "1000001", "-q", "--no-save"]),
    ("iters_u64", ["conv", P, "--device", "cpu", "--iters", "18446744073709551615", "-q", "--no-save"]),
    ("warmup_cap", conv("--warmup", "1000001")),
    ("min_time_nan", ["conv", P, "--device", "cpu", "--min-time", "nan", "-q", "--no-save"]),
    ("min_time_inf", ["conv", P, "--device", "cpu", "--min-time", "inf", "-q", "--no-save"]),
    ("min_time_1e309", ["conv", P, "--device", "cpu", "--min-time", "1e309", "-q", "--no-save"]),
    ("min_time_cap", ["conv", P, "--device", "cpu", "--min-time", "86401", "-q", "--no-save"]),
    ("min_time_word", ["conv", P, "--device", "cpu", "--min-time", "1s", "-q", "--no-save"]),
    ("seed_overflow", conv("--seed", "18446744073709551616")),
    ("batch_0", conv("--batch", "0")),
    ("batch_u64", conv("--batch", "18446744073709551615")),
    ("batch_overflow", conv("--batch", "18446744073709551616")),
    ("workspace_word", conv("--workspace-limit", "lots")),
    ("workspace_overflow", conv("--workspace-limit", "99999999999999999999G")),
    ("workspace_suffix_overflow", conv("--workspace-limit", "18446744073709551615G")),
    ("price_nan", conv("--price-per-hour", "nan")),
    ("price_inf", conv("--price-per-hour", "inf")),
    ("desc_mb_overflow", conv(problem="mb99999999999999999999ic4ih8oc4kh3")),
    ("desc_ih_u64", conv(problem="mb1ic4ih18446744073709551615oc4kh3")),
    ("desc_kh_huge", conv(problem="mb1ic4ih8oc4kh99999999999")),
    ("desc_ph_u64", conv(problem="mb1ic4ih8oc4kh3ph18446744073709551615")),
    ("desc_dh_u64", conv(problem="mb1ic4ih8oc4kh3dh18446744073709551615")),
    ("desc_g_u64", conv(problem="g18446744073709551615mb1ic4ih8oc4kh3")),
    ("desc_huge_tensor", conv(problem="mb65536ic65536ih65536oc65536kh3")),
    ("gemm_zero", ["gemm", "0x8x8", "--device", "cpu", "--no-save"]),
    ("model_batch_0", ["model", "resnet18", "--batch", "0", "--no-save"]),
    ("check_batch_0", ["check", "--model", "resnet18", "--batch", "0"]),
    ("info_threads_0", ["info", "--threads", "0"]),
    ("model_name_100k", ["model", "m" * 100_000, "--no-save"]),
    ("desc_100k", conv(problem="z" * 100_000)),
]
for _label, _args in BAD_VALUES:
    def _badval(c: Ctx, args=_args):
        c.run(args, allow=(2,))
    add(f"lim_{_label}", 3, _badval, doc="refused in one line (cut at 400 characters), exit 2: " +
        " ".join(a if len(a) < 40 else a[:20] + "..." for a in _args))


@case(3)
def lim_instance_unknown(c: Ctx):
    """--instance naming no instance of the (real) price list: one line, exit 2."""
    c.mkdir("results")
    shutil.copyfile(os.path.join(REPO, "results", "instances.toml"), c.path("results/instances.toml"))
    r = c.run(conv("--instance", "no-such-instance", save=True), allow=(2,))
    c.error_mentions(r, "no-such-instance")


for _label, _opt in [("epochs_nan", ["--epochs", "nan"]), ("epochs_0", ["--epochs", "0"]),
                     ("epochs_huge", ["--epochs", "18446744073709551616"]),
                     ("images_0", ["--dataset-images", "0"]), ("price_nan", ["--price-per-hour", "NaN"])]:
    def _repbad(c: Ctx, opt=_opt):
        report_in(c)
        c.run(["report", "in", *opt], allow=(2,))
    add(f"lim_report_{_label}", 3, _repbad, doc=f"report {' '.join(_opt)}: one line, exit 2")


OK_EDGE = [
    ("iters_at_cap", ["gemm", "1x1x1", "--iters", "1000000", "--warmup", "0", "--device", "cpu", "-q",
                      "--no-save"], (0,)),
    ("min_time_past_cap", ["conv", "mb1ic1ih1oc1kh1", "--min-time", "5", "--device", "cpu", "--dir", "fwd",
                           "--algo", "direct", "-q", "--no-save"], (0,)),
    ("seed_u64_max", conv("--seed", "18446744073709551615"), (0,)),
    ("min_time_0", ["conv", P, "--device", "cpu", "--algo", "direct", "--dir", "fwd", "--min-time", "0",
                    "-q", "--no-save"], (0, 2)),
    ("min_time_tiny", ["conv", P, "--device", "cpu", "--algo", "direct", "--dir", "fwd", "--min-time",
                       "1e-300", "-q", "--no-save"], (0, 2)),
    ("workspace_0", conv("--workspace-limit", "0"), (0, 2)),
    ("name_100k", conv(problem=P + 'n"' + "x" * 100_000 + '"'), (0, 2)),
    ("desc_sh_u64", conv(problem="mb1ic4ih8oc4kh3sh18446744073709551615"), (0, 2)),
    ("threads_64_per_cpu", conv("--threads", str(64 * (os.cpu_count() or 1))), (0, 2)),
]
for _label, _args, _allow in OK_EDGE:
    def _edge(c: Ctx, args=_args, allow=_allow):
        c.run(args, allow=allow)
    add(f"lim_{_label}", 3, _edge, doc=f"edge value accepted or refused in one line (allowed {_allow})")


# ---------------------------------------------------------------------------
# Class 4: validation up front
# ---------------------------------------------------------------------------

ENV_BAD = [
    ("threads_word", "CNNBENCH_THREADS", "abc"),
    ("threads_0", "CNNBENCH_THREADS", "0"),
    ("threads_neg", "CNNBENCH_THREADS", "-1"),
    ("threads_empty", "CNNBENCH_THREADS", ""),
    ("threads_space", "CNNBENCH_THREADS", " 2"),
    ("threads_huge", "CNNBENCH_THREADS", "100000"),
    ("threads_float", "CNNBENCH_THREADS", "1.5"),
    ("threads_nonutf8", "CNNBENCH_THREADS", b"\xff\xfe"),
    ("threads_control", "CNNBENCH_THREADS", "2\x1b[31m"),
    ("isa_bogus", "CNNBENCH_ISA", "avx9000"),
    ("isa_empty", "CNNBENCH_ISA", ""),
    ("isa_nonutf8", "CNNBENCH_ISA", b"avx\xff"),
    ("isa_case", "CNNBENCH_ISA", "AVX2 "),
]
for _label, _var, _val in ENV_BAD:
    def _envbad(c: Ctx, var=_var, val=_val):
        r = c.run(conv(), env={var: val}, allow=(2,))
        c.error_mentions(r, var)
    add(f"env_{_label}", 4, _envbad, doc=f"{_var}={_val!r}: one line naming {_var}, exit 2")


for _sub, _args in [("model", ["model", "resnet18", "--batch", "1", "--iters", "1", "--no-save"]),
                    ("check", ["check", "--model", "resnet18", "--batch", "1"]),
                    ("gemm", ["gemm", "8x8x8", "--device", "cpu", "--iters", "1", "--no-save"]),
                    ("sweep", conv("--batch", "1,2")),
                    ("compare", ["compare", "--variant", "a:X=1", "--variant", "b:X=2", "--", *conv()])]:
    def _envsub(c: Ctx, args=_args):
        r = c.run(args, env={"CNNBENCH_THREADS": "abc"}, allow=(2,))
        c.error_mentions(r, "CNNBENCH_THREADS")
    add(f"env_threads_bad_{_sub}", 4, _envsub, doc=f"CNNBENCH_THREADS=abc with {_sub}: one line naming it")


@case(4)
def env_threads_list(c: Ctx):
    """CNNBENCH_THREADS=1,2: runs (a sweep) or one line naming the variable."""
    r = c.run(conv(), env={"CNNBENCH_THREADS": "1,2"}, allow=(0, 2))
    if r.rc == 2:
        c.error_mentions(r, "CNNBENCH_THREADS")


@case(4)
def env_results_nonutf8(c: Ctx):
    """CNNBENCH_RESULTS with invalid UTF-8: the store is made there, or one line."""
    c.run(conv(save=True), env={"CNNBENCH_RESULTS": c.d.encode() + b"/res\xff"}, allow=(0, 2))


@case(4)
def env_results_parent_file(c: Ctx):
    """CNNBENCH_RESULTS under a regular file: one line naming the path, exit 2."""
    c.write("f.txt", OLD)
    r = c.run(conv(save=True), env={"CNNBENCH_RESULTS": c.path("f.txt/results")}, allow=(2,))
    c.error_mentions(r, "f.txt")


@case(4)
def env_label_control(c: Ctx):
    """CNNBENCH_LABEL with control characters: the run file stays valid JSON, the report one table."""
    c.run(conv(save=True), env={"CNNBENCH_LABEL": "evil\n| x |\x1b[31m\r"})
    for f in c.store():
        c.valid_json(f, complete=True)
    c.run(["report", "results"])


@case(4)
def env_label_huge(c: Ctx):
    """CNNBENCH_LABEL of 100000 characters: the run works."""
    c.run(conv(save=True), env={"CNNBENCH_LABEL": "L" * 100_000})


@case(4)
def env_label_nonutf8(c: Ctx):
    """CNNBENCH_LABEL with invalid UTF-8: runs or one line."""
    c.run(conv(save=True), env={"CNNBENCH_LABEL": b"lab\xffel"}, allow=(0, 2))


@case(4)
def env_tmpdir_missing_sweep(c: Ctx):
    """A sweep with TMPDIR naming a missing folder (children report through a temporary file): one line or a run."""
    c.run(conv("--threads", "1,2"), env={"TMPDIR": c.path("gone")}, allow=(0, 2))


@case(4)
def env_tmpdir_file_compare(c: Ctx):
    """compare with TMPDIR naming a regular file: one line or a run, no crash."""
    c.write("tmpfile", OLD)
    c.run(["compare", "--variant", "a:X=1", "--variant", "b:X=2", "-q", *CMP], env={"TMPDIR": c.path("tmpfile")},
          allow=(0, 2))


@case(4)
def env_tmpdir_readonly_sweep(c: Ctx):
    """A sweep with a read-only TMPDIR: one line (as root: a run)."""
    ro = c.mkdir("rotmp", mode=0o555)
    c.run(conv("--threads", "1,2"), env={"TMPDIR": ro}, allow=(0,) if c.root else (2,))


@case(4)
def env_gpu_required(c: Ctx):
    """CNNBENCH_GPU=required and CNNBENCH_GPU_LIBS=required (test-only variables): a CPU run is unaffected."""
    c.run(conv(), env={"CNNBENCH_GPU": "required", "CNNBENCH_GPU_LIBS": "required"})


@case(4)
def env_device_auto_gpu_required(c: Ctx):
    """--device auto with CNNBENCH_GPU=required: picks a device or one line, never a panic."""
    c.run(["conv", P, "--device", "auto", "--iters", "1", "--warmup", "0", "--dir", "fwd", "-q", "--no-save"],
          env={"CNNBENCH_GPU": "required", "CNNBENCH_GPU_LIBS": "required"}, allow=(0, 2))


SWEEP_BAD = [
    ("threads_word", ["--threads", "1,abc"], "abc"),
    ("threads_empty_item", ["--threads", "1,,2"], "--threads"),
    ("threads_trailing", ["--threads", "1,"], "--threads"),
    ("threads_zero", ["--threads", "0,1"], "--threads"),
    ("batch_zero", ["--batch", "1,0"], "--batch"),
    ("batch_word", ["--batch", "1,big"], "big"),
    ("dtype", ["--dtype", "f32,f99"], "f99"),
    ("layout", ["--layout", "nhwc,xyz"], "xyz"),
    ("isa", ["--isa", "avx2,bogus"], "bogus"),
    ("control", ["--threads", "1,\x1b[2J"], "--threads"),
]
for _label, _opt, _word in SWEEP_BAD:
    def _sweepbad(c: Ctx, opt=_opt, word=_word):
        r = c.run(["conv", P, "--device", "cpu", "--iters", "1", "--warmup", "0", "-q", *opt], allow=(2,))
        c.error_mentions(r, word)
        c.expect(not c.store(), "UNEXPECTED", "a child ran before the bad item was found")
    add(f"sweep_bad_{_label}", 4, _sweepbad, doc=f"sweep {' '.join(_opt)!r}: one line naming the item, before any child")


@case(4)
def sweep_bad_problem(c: Ctx):
    """A sweep over a bad problem: one line, before the first child runs."""
    c.run(["conv", "mb1ic4ih8oc5g2", "--device", "cpu", "--iters", "1", "-q", "--threads", "1,2"], allow=(2,))
    c.expect(not c.store(), "UNEXPECTED", "a child ran")


@case(4, who="user")
def sweep_out_readonly(c: Ctx):
    """A sweep with a read-only --out: refused before the first child runs, file untouched."""
    p = c.write("o.json", OLD, mode=0o444)
    c.run(["conv", P, *FAST, "--threads", "1,2", "--out", "o.json"], allow=(2,))
    c.unchanged(p, OLD)
    c.expect(not c.store(), "UNEXPECTED", "a child ran")


@case(4)
def sweep_out_directory(c: Ctx):
    """A sweep with --out onto a folder: refused before the first child runs."""
    c.mkdir("o")
    c.run(["conv", P, *FAST, "--threads", "1,2", "--out", "o"], allow=(2,))
    c.expect(not c.store(), "UNEXPECTED", "a child ran")


@case(4)
def sweep_out_fifo_reader(c: Ctx):
    """A sweep with --out onto a FIFO: the reader gets one sweep document."""
    f = c.mkfifo("o.fifo")
    rd = FifoReader(f)
    rd.start()
    c.run(["conv", P, *FAST, "--no-save", "--threads", "1,2", "--out", "o.fifo", "--format", "json"])
    rd.join(5)
    rd.release()
    try:
        doc = json.loads(rd.data or b"")
        c.expect(len(doc.get("sweep", [])) == 2, "UNEXPECTED", f"{len(doc.get('sweep', []))} configs")
    except (ValueError, AttributeError):
        c.bad("CLOBBER", f"reader got {(rd.data or b'')[:100]!r}")


@case(4)
def sweep_duplicate_items(c: Ctx):
    """--threads 1,1: runs or one line."""
    c.run(["conv", P, *FAST, "--no-save", "--threads", "1,1"], allow=(0, 2))


NEG = [
    ("batch", conv("--batch", "-1")),
    ("iters", conv("--iters", "-5")),
    ("threads", conv("--threads", "-1")),
    ("min_time", conv("--min-time", "-0.5")),
    ("warmup", conv("--warmup", "-1")),
    ("seed", conv("--seed", "-1")),
    ("workspace", conv("--workspace-limit", "-1")),
    ("price", conv("--price-per-hour", "-1")),
    ("batch_list", conv("--batch", "-1,2")),
    ("gemm_size", ["gemm", "-8x8x8", "--device", "cpu", "--no-save"]),
    ("gemm_iters", ["gemm", "8x8x8", "--iters", "-1", "--no-save"]),
    ("model_batch", ["model", "resnet18", "--batch", "-1", "--no-save"]),
    ("check_batch", ["check", "--model", "resnet18", "--batch", "-1"]),
    ("info_threads", ["info", "--threads", "-1"]),
    ("report_epochs", ["report", "--epochs", "-1", "x"]),
    ("report_images", ["report", "--dataset-images", "-5", "x"]),
    ("report_price", ["report", "--price-per-hour", "-1e3", "x"]),
    ("desc_value", conv(problem="mb-1ic4ih8oc4kh3")),
]
for _label, _args in NEG:
    def _neg(c: Ctx, args=_args):
        r = c.run(args, allow=(2,))
        c.expect(b"tip:" not in r.err and b"Usage:" not in r.err, "MULTILINE", "clap's tip/usage text")
    add(f"neg_{_label}", 4, _neg, doc=f"a negative value: one line, exit 2, no clap tip: {' '.join(_args[:8])}")


CTL = [  # (label, args, text after the control character that the error must still show)
    ("desc_escape", conv(problem="mb1ic4\x1b[31mih8oc4kh3"), "ih8oc4kh3"),
    ("desc_newline", conv(problem="mb1ic4\nih8oc4kh3"), "ih8oc4kh3"),
    ("desc_cr", conv(problem="mb1ic4ih8oc4kh3\rOK"), "OK"),
    ("desc_bidi", conv(problem="mb1ic4\u202eih8oc4kh3"), "ih8oc4kh3"),
    ("model_escape", ["model", "res\x1b]0;pwned\x07net", "--no-save"], "net"),
    ("format_escape", conv("--format", "js\non"), "on'"),
    ("out_missing_escape", conv("--out", "no\nsuch/\x1b[2Jo.json"), "o.json"),
    ("dump_missing_escape", conv("--dump", "f.txt/\nsub"), "sub"),
    ("variant_escape", ["compare", "--variant", "a\x1b[1m", "--", *conv()], "[1m"),
    ("desc_long_line", conv(problem="mb1ic4ih8oc4kh3" + "q" * 5000), "more characters"),
    ("gemm_escape", ["gemm", "8x8\x1bx8", "--no-save"], "x8"),
    ("isa_newline", conv("--isa", "avx\n2"), "2'"),
    ("dir_newline", conv("--dir", "fwd\nbwd"), "bwd"),
]
for _label, _args, _tail in CTL:
    def _ctl(c: Ctx, args=_args, tail=_tail, label=_label):
        if label == "dump_missing_escape":
            c.write("f.txt", OLD)
        r = c.run(args, allow=(2,))
        c.expect(tail.encode() in r.err, "UNEXPECTED",
                 f"the error line stops at the control character instead of escaping it "
                 f"(no {tail!r} after it): {first_lines(r.err)}")
    add(f"ctl_{_label}", 4, _ctl, doc="control characters / long input: one line, escaped (not cut at the character), exit 2")


def batch_file(c: Ctx, data: bytes, allow=(0,), **kw):
    c.write("batch.txt", data)
    return c.run(["conv", "--from", "batch.txt", *FAST[:-1], "-q", "--no-save"], allow=allow, **kw)


@case(4)
def from_bom(c: Ctx):
    """A UTF-8 BOM at the start of a --from file is accepted."""
    batch_file(c, b"\xef\xbb\xbf" + P.encode() + b"\n")


@case(4)
def from_bom_comment(c: Ctx):
    """A BOM followed by a comment line, then a problem: accepted."""
    batch_file(c, b"\xef\xbb\xbf# resnet layer\n" + P.encode() + b"\n")


@case(4)
def from_crlf(c: Ctx):
    """CRLF line ends in a --from file: accepted or one line."""
    batch_file(c, P.encode() + b"\r\n" + P2.encode() + b"\r\n", allow=(0, 2))


@case(4)
def from_empty(c: Ctx):
    """An empty --from file: one line, exit 2."""
    batch_file(c, b"", allow=(2,))


@case(4)
def from_only_comments(c: Ctx):
    """A --from file of comments only: one line, exit 2."""
    batch_file(c, b"# one\n\n   # two\n", allow=(2,))


@case(4)
def from_missing(c: Ctx):
    """--from a missing file: one line, exit 2."""
    c.run(["conv", "--from", "nope.txt", "--device", "cpu"], allow=(2,))


@case(4)
def from_directory(c: Ctx):
    """--from a folder: one line, exit 2."""
    c.mkdir("dir")
    c.run(["conv", "--from", "dir", "--device", "cpu"], allow=(2,))


@case(4)
def from_dev_null(c: Ctx):
    """--from /dev/null: one line, exit 2."""
    c.run(["conv", "--from", "/dev/null", "--device", "cpu"], allow=(2,))


@case(4)
def from_nonutf8(c: Ctx):
    """A --from file with invalid UTF-8: one line, exit 2."""
    batch_file(c, P.encode() + b"\n\xff\xfe\xfd\n", allow=(2,))


@case(4)
def from_nul(c: Ctx):
    """A --from file with NUL bytes: one line, exit 2."""
    batch_file(c, P.encode() + b"\0\n", allow=(2,))


@case(4)
def from_bad_line_named(c: Ctx):
    """A bad problem on line 3 of a --from file: one line naming it."""
    r = batch_file(c, f"{P}\n{P2}\nmb1ic4ih8oc5g2\n".encode(), allow=(2,))
    c.error_mentions(r, "oc5g2")


@case(4)
def from_huge_line(c: Ctx):
    """A 1 MB line in a --from file: one cut line, exit 2."""
    batch_file(c, b"mb1" + b"x" * 1_000_000 + b"\n", allow=(2,))


@case(4)
def from_fifo_writer(c: Ctx):
    """--from a FIFO that a writer fills: read like a file."""
    f = c.mkfifo("batch.fifo")

    def writer():
        with open(f, "wb") as w:
            w.write(P.encode() + b"\n")
    t = threading.Thread(target=writer, daemon=True)
    t.start()
    c.run(["conv", "--from", "batch.fifo", *FAST, "--no-save"])
    if t.is_alive():
        try:
            os.close(os.open(f, os.O_RDONLY | os.O_NONBLOCK))
        except OSError:
            pass


@case(4)
def from_builtin_unknown(c: Ctx):
    """--from builtin:nope: one line, exit 2."""
    c.run(["conv", "--from", "builtin:nope", "--device", "cpu"], allow=(2,))


ARGS_BAD = [
    ("nonutf8_desc", conv(problem=b"mb1ic4\xffih8".decode("utf-8", "surrogateescape"))),
    ("nonutf8_model", ["model", b"res\xffnet".decode("utf-8", "surrogateescape"), "--no-save"]),
    ("nonutf8_format", conv("--format", b"js\xffon".decode("utf-8", "surrogateescape"))),
    ("unknown_option", conv("--bogus")),
    ("unknown_subcommand", ["convolve", P]),
    ("format_bad", conv("--format", "xml")),
    ("format_benchdnn", conv("--format", "benchdnn")),
    ("dir_bad", conv("--dir", "sideways")),
    ("dir_empty", ["conv", P, "--device", "cpu", "--dir", "", "--no-save"]),
    ("algo_bad", ["conv", P, "--device", "cpu", "--algo", "magic", "--no-save"]),
    ("algo_gpu_name", ["conv", P, "--device", "cpu", "--algo", "fft_tiling", "--no-save"]),
    ("algo_winograd_stride2", ["conv", "mb1ic4ih8oc4oh4kh3sh2ph1", "--device", "cpu", "--algo", "winograd", "--no-save"]),
    ("algo_winograd_panels_bwd_w", ["conv", "mb1ic4ih8oc4kh3ph1", "--device", "cpu", "--algo", "winograd_panels", "--no-save"]),
    ("device_gpu", ["conv", P, "--device", "gpu", "--no-save"]),
    ("dtype_f16_cpu", ["conv", P, "--device", "cpu", "--dtype", "f16", "--no-save"]),
    ("layout_nchw_cpu", ["conv", P, "--device", "cpu", "--layout", "nchw", "--no-save"]),
    ("isa_bad", conv("--isa", "avx1024")),
    ("trans_bad", ["gemm", "8x8x8", "--trans", "XY", "--no-save"]),
    ("gemm_two_dims", ["gemm", "8x8", "--no-save"]),
    ("gemm_word", ["gemm", "axbxc", "--no-save"]),
    ("model_bad", ["model", "resnet19", "--no-save"]),
    ("model_update_bad", ["model", "resnet18", "--update", "adam", "--no-save"]),
    ("model_format_benchdnn_run", ["model", "resnet18", "--format", "benchdnn", "--no-save"]),
    ("check_model_bad", ["check", "--model", "lenet"]),
    ("repeated_out", conv("--out", "a", "--out", "b")),
    ("iters_float", conv("--iters", "1.5")),
    ("desc_oh_mismatch", conv(problem="mb1ic4ih8oc4oh9kh3ph1")),
    ("desc_groups", conv(problem="g3mb1ic4ih8oc4kh3")),
    ("desc_zero_ic", conv(problem="mb1ic0ih8oc4kh3")),
    ("desc_unknown_key", conv(problem="mb1ic4ih8oc4kh3zz5")),
    ("desc_unterminated_name", conv(problem='mb1ic4ih8oc4kh3n"abc')),
    ("desc_empty", conv(problem="")),
    ("desc_underscore", conv(problem="_")),
    ("desc_empty_output", conv(problem="mb1ic4ih2oc4kh5")),
    ("conv_no_problem", ["conv", "--device", "cpu"]),
    ("price_and_instance", conv("--price-per-hour", "1", "--instance", "aws-c5.2xlarge")),
    ("report_no_results", ["report"]),
]
for _label, _args in ARGS_BAD:
    def _argbad(c: Ctx, args=_args):
        c.run(args, allow=(2,))
    add(f"arg_{_label}", 4, _argbad, doc="bad input: one line, exit 2")


@case(4)
def arg_no_arguments(c: Ctx):
    """No arguments at all: clap's help on stderr, exit 2 (help text, not an error line: not counted as MULTILINE)."""
    c.run([], allow=(0, 2), one_line=False)


@case(4)
def arg_nonutf8_out_path(c: Ctx):
    """--out with invalid UTF-8 in its name: written, or one line."""
    c.run(conv("--out", b"o\xff.json".decode("utf-8", "surrogateescape")), allow=(0, 2))


# ---------------------------------------------------------------------------
# Class 5: report and compare inputs
# ---------------------------------------------------------------------------

def runs_count(r: R) -> int | None:
    m = re.search(rb"(\d+) runs, (\d+) records", r.out)
    return int(m.group(1)) if m else None


@case(5)
def report_empty_folder(c: Ctx):
    """report over an empty folder: one line, exit 2."""
    c.mkdir("in")
    c.run(["report", "in"], allow=(2,))


@case(5)
def report_symlink_cycle(c: Ctx):
    """A folder with a symlink cycle: the walk ends, the run is counted once."""
    report_in(c)
    c.mkdir("in/sub")
    c.symlink("..", "in/sub/up")
    c.symlink(c.path("in"), "in/sub/again")
    r = c.run(["report", "in"], timeout=30)
    c.expect(runs_count(r) == 1, "UNEXPECTED", f"counted {runs_count(r)} runs")


@case(5)
def report_same_file_two_paths(c: Ctx):
    """One file reached by a symlink, by name, and through the folder twice: counted once."""
    report_in(c)
    c.symlink("run.json", "in/alias.json")
    r = c.run(["report", "in", "in/run.json", "in/alias.json", "in/"])
    c.expect(runs_count(r) == 1, "UNEXPECTED", f"counted {runs_count(r)} runs")


@case(5)
def report_hardlink(c: Ctx):
    """The same file under two hard-linked names: counted once (README: however many paths lead to it)."""
    report_in(c)
    os.link(c.path("in/run.json"), c.path("in/hard.json"))
    r = c.run(["report", "in"])
    c.expect(runs_count(r) == 1, "UNEXPECTED", f"counted {runs_count(r)} runs")


@case(5)
def report_unreadable_file(c: Ctx):
    """A chmod 000 results file: named on stderr and under '## Not read', exit 1 (root reads it: exit 0)."""
    report_in(c)
    c.copy_seed("in/locked.json")
    os.chmod(c.path("in/locked.json"), 0)
    r = c.run(["report", "in"], allow=(0,) if c.root else (1,))
    if not c.root:
        c.expect(b"## Not read" in r.out and b"locked.json" in r.err, "UNEXPECTED", "the unreadable file is not named")


@case(5, who="user")
def report_unreadable_folder(c: Ctx):
    """A chmod 000 folder among the inputs: named, exit 1."""
    report_in(c)
    c.mkdir("in/locked", mode=0)
    r = c.run(["report", "in"], allow=(1,))
    c.expect(b"locked" in r.err, "UNEXPECTED", "the unreadable folder is not named")


for _label, _data in [("truncated", None), ("empty", b""), ("binary", bytes(range(256)) * 8),
                      ("wrong_shape", b'{"a": 1}'), ("array", b"[]"), ("null", b"null"),
                      ("newer_format", b'{"format_version": 999, "records": []}'),
                      ("deep_nesting", b"[" * 200_000), ("nan_tokens", None),
                      ("whitespace_5mb", b" " * 5_000_000)]:
    def _rep(c: Ctx, data=_data, label=_label):
        report_in(c)
        seed = read(c.runner.seed)
        if label == "truncated":
            data = seed[: len(seed) // 2]
        if label == "nan_tokens":
            data = re.sub(rb'"median":\s*[0-9.e+-]+', b'"median": NaN', seed)
        c.write("in/bad.json", data)
        r = c.run(["report", "in"], allow=(1,))
        c.expect(b"bad.json" in r.err, "UNEXPECTED", "the bad file is not named on stderr")
    add(f"report_bad_{_label}", 5, _rep, doc=f"a {_label.replace('_', ' ')} results file beside a good one: named, exit 1")


@case(5)
def report_garbage_csv(c: Ctx):
    """A garbage peer CSV beside a good run: named, exit 1."""
    report_in(c)
    c.write("in/peer.csv", b"a,b,c\n1,2\n\xff\xfe,,,,\n")
    c.run(["report", "in"], allow=(1,))


@case(5)
def report_interrupted_run(c: Ctx):
    """A run file with complete: false is marked as stopped early."""
    c.mkdir("in")
    doc = load_json(c.runner.seed)
    doc["complete"] = False
    c.write("in/run.json", json.dumps(doc))
    r = c.run(["report", "in"])
    c.expect(b"stopped early" in r.out, "UNEXPECTED", "not marked as stopped early")


@case(5)
def report_many_files(c: Ctx):
    """2000 results files: the report ends within the time limit, exit 0."""
    c.mkdir("in")
    seed = read(c.runner.seed)
    for i in range(2000):
        with open(c.path(f"in/run{i:04d}.json"), "wb") as f:
            f.write(seed)
    if c.user:
        for n in os.listdir(c.path("in")):
            os.chown(c.path("in", n), *c.user)
    c.run(["report", "in", "--out", "r.md"])


@case(5)
def report_deep_folders(c: Ctx):
    """Results 600 folders deep (paths past PATH_MAX): the walk ends, exit 0 or 1."""
    report_in(c)
    fd = os.open(c.path("in"), os.O_RDONLY)
    try:
        for _ in range(600):
            os.mkdir("dddddddddd", dir_fd=fd)
            if c.user:
                os.chown("dddddddddd", *c.user, dir_fd=fd)
            nfd = os.open("dddddddddd", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nfd
        with open(os.open("deep.json", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "wb") as f:
            f.write(read(c.runner.seed))
    finally:
        os.close(fd)
    c.run(["report", "in"], allow=(0, 1))


@case(5)
def report_fifo_in_folder(c: Ctx):
    """A FIFO named *.json among the results (nobody writes it): the report must not wait forever."""
    report_in(c)
    c.mkfifo("in/stuck.json")
    c.run(["report", "in"], allow=(0, 1), timeout=20)


@case(5)
def report_dev_zero_link(c: Ctx):
    """A *.json symlink to /dev/zero among the results (under ulimit -v 2 GiB): named as unreadable, no hang or abort."""
    report_in(c)
    c.symlink("/dev/zero", "in/zero.json")
    c.run(["report", "in"], allow=(0, 1), timeout=30, limits={"as": 2 * GiB})


@case(5)
def report_dangling_link(c: Ctx):
    """A dangling *.json symlink: named, exit 1."""
    report_in(c)
    c.symlink("gone.json", "in/dangling.json")
    c.run(["report", "in"], allow=(0, 1))


@case(5)
def report_missing_path_only(c: Ctx):
    """report over a path that does not exist: one line, exit 2."""
    c.run(["report", "nope"], allow=(2,))


@case(5)
def report_missing_plus_valid(c: Ctx):
    """report over a missing path and a good folder: exit 1 (named) or 2 (one line)."""
    report_in(c)
    c.run(["report", "in", "nope"], allow=(1, 2))


@case(5)
def report_price_list_garbage(c: Ctx):
    """report --instance with a garbage price list: one line, exit 2."""
    report_in(c)
    c.write("prices.toml", b"[[instance\x00\xff = = \n")
    c.run(["report", "in", "--instance", "x", "--price-list", "prices.toml"], allow=(2,))


@case(5)
def report_price_list_missing(c: Ctx):
    """report --instance with a missing price list: one line, exit 2."""
    report_in(c)
    c.run(["report", "in", "--instance", "x", "--price-list", "nope.toml"], allow=(2,))


@case(5)
def report_baseline_unknown(c: Ctx):
    """report --baseline naming no run: runs (saying so) or one line."""
    report_in(c)
    c.run(["report", "in", "--baseline", "threads=999"], allow=(0, 2))


CMP = ["--", *conv(save=True)]


@case(5)
def compare_cudnn_missing(c: Ctx):
    """compare --cudnn with a missing folder: one line, before any run."""
    c.run(["compare", "--cudnn", "nope1", "--cudnn", "nope2", *CMP], allow=(2,))
    c.expect(not c.store(), "UNEXPECTED", "a run happened")


@case(5)
def compare_cudnn_no_lib(c: Ctx):
    """compare --cudnn with folders holding no libcudnn: one line, before any run."""
    c.mkdir("a")
    c.mkdir("b")
    c.write("b/libcublas.so.12", b"")
    c.run(["compare", "--cudnn", "a", "--cudnn", "b", *CMP], allow=(2,))
    c.expect(not c.store(), "UNEXPECTED", "a run happened")


@case(5)
def compare_cudnn_file(c: Ctx):
    """compare --cudnn onto a regular file: one line."""
    c.write("f", OLD)
    c.run(["compare", "--cudnn", "f", "--cudnn", "f", *CMP], allow=(2,))


@case(5)
def compare_cudnn_fake_lib(c: Ctx):
    """compare --cudnn with a fake (garbage) libcudnn.so.9: one line or a run on the CPU, no crash."""
    for d in ("a", "b"):
        c.mkdir(d)
        c.write(f"{d}/libcudnn.so.9", b"\x7fELF garbage" * 10)
    c.run(["compare", "--cudnn", "a", "--cudnn", "b", *CMP], allow=(0, 2))


@case(5, who="user")
def compare_cudnn_unreadable(c: Ctx):
    """compare --cudnn with a chmod 000 folder: one line."""
    c.mkdir("a", mode=0)
    c.mkdir("b", mode=0)
    c.run(["compare", "--cudnn", "a", "--cudnn", "b", *CMP], allow=(2,))


@case(5)
def compare_duplicate_names(c: Ctx):
    """Two variants with one name: one line, before any run."""
    c.run(["compare", "--variant", "a:X=1", "--variant", "a:X=2", *CMP], allow=(2,))
    c.expect(not c.store(), "UNEXPECTED", "a run happened")


for _label, _spec in [("no_colon", "a"), ("no_env", "a:"), ("no_name", ":X=1"), ("no_equals", "a:X"),
                      ("empty_key", "a:=1"), ("empty", ""), ("trailing_comma", "a:X=1,")]:
    def _cmpv(c: Ctx, spec=_spec):
        c.run(["compare", "--variant", spec, "--variant", "b:X=2", *CMP], allow=(2,))
        c.expect(not c.store(), "UNEXPECTED", "a run happened")
    add(f"compare_variant_{_label}", 5, _cmpv, doc=f"--variant {_spec!r}: one line, before any run")


@case(5)
def compare_variant_bad_threads(c: Ctx):
    """A variant with CNNBENCH_THREADS=abc: one line (naming the variable)."""
    r = c.run(["compare", "--variant", "a:CNNBENCH_THREADS=abc", "--variant", "b:CNNBENCH_THREADS=1", *CMP],
              allow=(2,))
    c.error_mentions(r, "CNNBENCH_THREADS")


@case(5)
def compare_variant_bad_results(c: Ctx):
    """A variant whose CNNBENCH_RESULTS is a file: one line."""
    c.write("f", OLD)
    c.run(["compare", "--variant", f"a:CNNBENCH_RESULTS={c.path('f')}", "--variant", "b:X=1",
           "--", "conv", P, *FAST], allow=(2,))


@case(5)
def compare_no_separator(c: Ctx):
    """compare without `--` before the benchmark: one line."""
    c.run(["compare", "--variant", "a:X=1", "--variant", "b:X=2", "conv", P], allow=(2,))


@case(5)
def compare_model(c: Ctx):
    """compare -- model: an unknown model is refused in one line; a small one runs twice."""
    c.run(["compare", "--variant", "a:X=1", "--variant", "b:X=2", "--", "model", "resnet1800"], allow=(2,))
    c.run(["compare", "--variant", "a:X=1", "--variant", "b:X=2", "--", "model", "mnist-mlp",
           "--batch", "2", "--iters", "1", "--warmup", "0"], allow=(0,))


@case(5)
def compare_unknown_kind(c: Ctx):
    """compare -- sweep ...: refused in one line (conv, gemm, model or info only)."""
    c.run(["compare", "--variant", "a:X=1", "--variant", "b:X=2", "--", "sweep", "x"], allow=(2,))


@case(5)
def compare_child_bad_problem(c: Ctx):
    """compare over a bad problem: one line, exit 2."""
    c.run(["compare", "--variant", "a:X=1", "--variant", "b:X=2", "--", "conv", "mb1ic4ih8oc5g2",
           "--device", "cpu"], allow=(2,))


@case(5)
def compare_no_runs(c: Ctx):
    """compare with no --cudnn or --variant: one line."""
    c.run(["compare", *CMP], allow=(2,))


@case(5)
def compare_single_variant(c: Ctx):
    """compare with one variant: runs or one line."""
    c.run(["compare", "--variant", "a:X=1", *CMP], allow=(0, 2))


for _fmt in ("table", "csv", "json", "md"):
    def _cmpf(c: Ctx, fmt=_fmt):
        r = c.run(["compare", "--variant", "a:CNNBENCH_THREADS=1", "--variant", "b:CNNBENCH_THREADS=2",
                   "--format", fmt, "-q", *CMP])
        if fmt == "json":
            try:
                doc = json.loads(r.out, parse_constant=lambda x: (_ for _ in ()).throw(ValueError(x)))
                c.expect(isinstance(doc, list) and doc, "UNEXPECTED", "not a non-empty array")
            except ValueError as e:
                c.bad("UNEXPECTED", f"--format json is not strict JSON: {e}")
        c.expect(len(c.store()) == 2, "UNEXPECTED", f"{len(c.store())} run files, expected 2")
        for f in c.store():
            doc = c.valid_json(f, complete=True)
            if doc:
                c.expect(doc.get("environment", {}).get("label") in ("a", "b"), "UNEXPECTED",
                         f"label {doc.get('environment', {}).get('label')!r}")
    add(f"compare_format_{_fmt}", 5, _cmpf, doc=f"compare --format {_fmt}: valid output; runs labelled in the store")


@case(5)
def compare_format_bad(c: Ctx):
    """compare --format xml: one line."""
    c.run(["compare", "--variant", "a:X=1", "--variant", "b:X=2", "--format", "xml", *CMP], allow=(2,))


@case(5)
def compare_gemm(c: Ctx):
    """compare over gemm: exit 0."""
    c.run(["compare", "--variant", "a:CNNBENCH_THREADS=1", "--variant", "b:CNNBENCH_THREADS=2", "-q",
           "--", "gemm", "8x8x8", "--device", "cpu", "--iters", "1", "--no-save"])


@case(5)
def compare_child_out_option(c: Ctx):
    """compare -- conv ... --out o.json: runs (the option goes nowhere or to a file) or one line; no temp file."""
    c.run(["compare", "--variant", "a:X=1", "--variant", "b:X=2", "-q", "--", *conv("--out", "o.json")],
          allow=(0, 2))


# ---------------------------------------------------------------------------
# Class 6: garbage everywhere
# ---------------------------------------------------------------------------

def garbage(seed, n, printable=False, no_nul=True) -> bytes:
    rnd = random.Random(seed)
    if printable:
        return bytes(rnd.randrange(32, 127) for _ in range(n))
    return bytes(rnd.choice(range(1, 256)) if no_nul else rnd.randrange(256) for _ in range(n))


def garbage_text(seed, n) -> str:
    """Random valid UTF-8: control characters (no NUL), ASCII, accents,
    bidi marks, combining marks, CJK and emoji."""
    rnd = random.Random(seed)
    ranges = [(1, 31), (32, 126), (127, 160), (0xC0, 0x17F), (0x300, 0x36F), (0x200B, 0x202E),
              (0x4E00, 0x4FFF), (0x1F600, 0x1F64F), (0xFFF0, 0xFFFD)]
    return "".join(chr(rnd.randrange(a, b + 1)) for a, b in (rnd.choice(ranges) for _ in range(n)))


def as_arg(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


for _i in range(6):
    def _gdesc(c: Ctx, i=_i):
        c.run(conv(problem=as_arg(garbage(100 + i, 64 + 300 * i))), allow=(2,))
    add(f"garbage_desc_{_i}", 6, _gdesc, doc="random bytes as a descriptor: one escaped line, exit 2")

for _i in range(4):
    def _gdesct(c: Ctx, i=_i):
        c.run(conv(problem=garbage_text(150 + i, 40 + 500 * i)), allow=(2,))
    add(f"garbage_desc_text_{_i}", 6, _gdesct, doc="random Unicode text as a descriptor: one escaped line, exit 2")

for _i in range(4):
    def _gfrom(c: Ctx, i=_i):
        batch_file(c, garbage(200 + i, 200 + 4000 * i, no_nul=False), allow=(2,))
    add(f"garbage_from_{_i}", 6, _gfrom, doc="random bytes as a --from batch file: one line, exit 2")

for _i in range(4):
    def _gres(c: Ctx, i=_i):
        report_in(c)
        c.write("in/junk.json", garbage(300 + i, 100 + 10000 * i, no_nul=False))
        c.run(["report", "in"], allow=(1,))
    add(f"garbage_results_{_i}", 6, _gres, doc="random bytes as a results file beside a good one: exit 1")


@case(6)
def garbage_results_only(c: Ctx):
    """Only random-byte results files: one line per file named, exit 2."""
    c.mkdir("in")
    for i in range(3):
        c.write(f"in/junk{i}.json", garbage(400 + i, 500, no_nul=False))
    c.run(["report", "in"], allow=(2,))


@case(6)
def garbage_csv(c: Ctx):
    """Random printable text as a peer CSV beside a good run: exit 0 or 1."""
    report_in(c)
    c.write("in/peer.csv", garbage(500, 3000, printable=True).replace(b";", b"\n"))
    c.run(["report", "in"], allow=(0, 1))


for _label, _mk in [
    ("model_name", lambda g: ["model", g, "--no-save"]),
    ("gemm_size", lambda g: ["gemm", g, "--no-save"]),
    ("variant", lambda g: ["compare", "--variant", g, "--variant", "b:X=1", *CMP]),
    ("format", lambda g: conv("--format", g)),
    ("dir", lambda g: conv("--dir", g)),
    ("threads", lambda g: conv("--threads", g)),
    ("batch", lambda g: conv("--batch", g)),
    ("instance", lambda g: conv("--instance", g)),
]:
    def _garg(c: Ctx, mk=_mk, label=_label):
        c.run(mk(as_arg(garbage(sum(label.encode()), 300))), allow=(2,))
    add(f"garbage_{_label}", 6, _garg, doc=f"random bytes as {_label.replace('_', ' ')}: one line, exit 2")

    def _gargt(c: Ctx, mk=_mk, label=_label):
        c.run(mk(garbage_text(sum(label.encode()) + 7, 300)), allow=(2,))
    add(f"garbage_text_{_label}", 6, _gargt, doc=f"random Unicode text as {_label.replace('_', ' ')}: one line, exit 2")


@case(6)
def garbage_env_threads(c: Ctx):
    """Random bytes in CNNBENCH_THREADS: one line naming it."""
    r = c.run(conv(), env={"CNNBENCH_THREADS": garbage(600, 100)}, allow=(2,))
    c.error_mentions(r, "CNNBENCH_THREADS")


@case(6)
def garbage_text_env_threads(c: Ctx):
    """Random Unicode text in CNNBENCH_THREADS: one line naming it."""
    r = c.run(conv(), env={"CNNBENCH_THREADS": garbage_text(602, 100)}, allow=(2,))
    c.error_mentions(r, "CNNBENCH_THREADS")


@case(6)
def garbage_text_batch_file(c: Ctx):
    """Random Unicode text lines as a --from batch file: one line, exit 2."""
    batch_file(c, "\n".join(garbage_text(603 + i, 80) for i in range(50)).encode(), allow=(2,))


GPU_LIBS = ["libcuda.so", "libcuda.so.1", "libcudnn.so", "libcudnn.so.9", "libcublas.so", "libcublas.so.12",
            "libcublas.so.13", "libcublasLt.so", "libcublasLt.so.12", "libcublasLt.so.13", "libnvrtc.so",
            "libnvrtc.so.12", "libnvrtc.so.13"]


def fake_gpu_libs(c: Ctx, kind: str) -> str:
    """A folder of files named as the CUDA libraries: random bytes, or a
    real but unrelated shared library (libm) that lacks every CUDA symbol."""
    d = c.mkdir("fakelibs")
    if kind == "random":
        for i, n in enumerate(GPU_LIBS):
            c.write(f"fakelibs/{n}", garbage(1000 + i, 5000, no_nul=False))
        return d
    for cand in ("/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6", "/lib64/libm.so.6",
                 "/usr/lib64/libm.so.6", "/lib/aarch64-linux-gnu/libm.so.6", "/usr/lib/libm.so.6"):
        if os.path.exists(cand):
            for n in GPU_LIBS:
                shutil.copyfile(cand, c.path("fakelibs", n))
                c.chown(c.path("fakelibs", n))
            return d
    raise Skip("no libm.so.6 found to stand in for the CUDA libraries")


for _kind in ("random", "wrong_elf"):
    for _label, _args, _allow in [
        ("conv_auto", ["conv", P, "--device", "auto", "--iters", "1", "--warmup", "0", "--dir", "fwd", "-q",
                       "--no-save"], (0, 2)),
        ("conv_gpu", ["conv", P, "--device", "gpu", "--iters", "1", "-q", "--no-save"], (2,)),
        ("gemm_auto", ["gemm", "8x8x8", "--iters", "1", "-q", "--no-save"], (0, 2)),
        ("model_gpu", ["model", "resnet18", "--device", "gpu", "--batch", "1", "-q", "--no-save"], (2,)),
        ("info", ["info"], (0,)),
    ]:
        def _libs(c: Ctx, kind=_kind, args=_args, allow=_allow):
            d = fake_gpu_libs(c, kind)
            c.run(args, env={"LD_LIBRARY_PATH": d}, allow=allow)
        add(f"garbage_libs_{_kind}_{_label}", 6, _libs,
            doc=f"CUDA libraries on LD_LIBRARY_PATH that are {'random bytes' if _kind == 'random' else 'another library (libm) without CUDA symbols'}: "
                f"the CPU, or one line naming what is missing; never a panic")


@case(6)
def garbage_env_label(c: Ctx):
    """Random bytes in CNNBENCH_LABEL: the run works or one line; the store file is valid JSON."""
    c.run(conv(save=True), env={"CNNBENCH_LABEL": garbage(601, 200)}, allow=(0, 2))
    for f in c.store():
        c.valid_json(f)


@case(6)
def garbage_instances_toml(c: Ctx):
    """Random bytes as the store's instances.toml with --instance: one line, exit 2."""
    c.mkdir("results")
    c.write("results/instances.toml", garbage(700, 2000, no_nul=False))
    c.run(conv("--instance", "aws-c5.2xlarge", save=True), allow=(2,))


@case(6)
def garbage_out_name(c: Ctx):
    """Random bytes (no '/') as an --out file name: written, or one line."""
    name = garbage(800, 60).replace(b"/", b"_")
    c.run(conv("--out", as_arg(name)), allow=(0, 2))


KEYS = ["g", "mb", "ic", "ih", "iw", "oc", "oh", "ow", "kh", "kw", "sh", "sw", "ph", "pw", "dh", "dw"]
for _i in range(10):
    def _fuzz(c: Ctx, i=_i):
        rnd = random.Random(900 + i)
        parts = []
        for _ in range(rnd.randrange(1, 9)):
            k = rnd.choice(KEYS)
            v = rnd.choice([str(rnd.randrange(0, 5)), str(rnd.randrange(1, 9)), str(2 ** rnd.randrange(31, 70)),
                            str(rnd.randrange(10 ** 12, 10 ** 20)), "-3", ""])
            parts.append(k + v)
        if rnd.random() < 0.3:
            parts.append('n"' + garbage(i, 10, printable=True).decode().replace('"', "'") + '"')
        c.run(["conv", "".join(parts), *FAST, "--no-save"], allow=(0, 2), limits={"as": 2 * GiB})
    add(f"fuzz_desc_{_i}", 6, _fuzz, doc="a random mix of descriptor keys and extreme values: runs or one line")


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------

def select(pattern: str | None) -> list[Case]:
    if not pattern:
        return list(CASES)
    pats = [p.strip() for p in pattern.split(",") if p.strip()]
    out = []
    for c in CASES:
        for p in pats:
            if p.isdigit():
                hit = p == str(c.cls)
            else:
                hit = fnmatch.fnmatchcase(c.name, p) or p == CLASSES[c.cls] \
                    or (not any(ch in p for ch in "*?[") and p in c.name)
            if hit:
                out.append(c)
                break
    return out


def make_seed(bin_path, path, base):
    d = tempfile.mkdtemp(dir=base)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CNNBENCH_")}
    env["TMPDIR"] = d
    r = subprocess.run([bin_path, "conv", P, P2, *FAST, "--results", os.path.join(d, "r")],
                       env=env, cwd=d, capture_output=True, timeout=60)
    files = os.listdir(os.path.join(d, "r")) if os.path.isdir(os.path.join(d, "r")) else []
    if r.returncode != 0 or len(files) != 1:
        sys.exit(f"cannot make a seed results file with {bin_path}: exit {r.returncode}: {r.stderr[-500:]!r}")
    shutil.copyfile(os.path.join(d, "r", files[0]), path)
    os.chmod(path, 0o644)
    shutil.rmtree(d)


def print_table(results):
    w = max([len(r["name"]) for r in results] + [4])
    print(f"{'case':<{w}}  {'class':<14}  {'user':<6}  {'outcome':<10}  {'secs':>5}  detail")
    print("-" * (w + 60))
    for r in results:
        detail = r.get("detail", "")
        print(f"{r['name']:<{w}}  {r['class_name']:<14}  {r['user']:<6}  {r['outcome']:<10}  "
              f"{r.get('secs', 0):>5.1f}  {detail[:240]}")


# Multi-GPU options and launcher variables (issue 17): without a GPU here,
# every one is one line and exit 2, never a hang waiting for ranks.
def _launch_case(name, args, env, doc):
    def fn(c: Ctx):
        c.run(args, env=env, allow=(2,))
    fn.__doc__ = doc
    add(name, 4, fn, doc=doc)


_TORCH = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29555"}
for _n, _args, _env in [
    ("gpus_garbage", ["model", "resnet18", "--gpus", "1,,x"], {}),
    ("gpus_huge", ["model", "resnet18", "--gpus", "99999999999999999999"], {}),
    ("gpus_many", ["model", "resnet18", "--gpus", "64"], {}),
    ("project_gpus_garbage", ["model", "resnet18", "--project-gpus", "2,-4", "--no-save"], {}),
    ("project_gpus_zero_per_node", ["model", "resnet18", "--project-gpus", "8", "--gpus-per-node", "0"], {}),
    ("interconnect_garbage", ["model", "resnet18", "--project-gpus", "8", "--interconnect", "warp9"], {}),
    ("interconnect_nan", ["model", "resnet18", "--project-gpus", "8", "--interconnect", "nan:inf"], {}),
    ("allreduce_sizes_garbage", ["allreduce", "--sizes", "1e9"], {}),
    ("allreduce_min_time", ["allreduce", "--min-time", "1"], {}),
    ("launcher_rank_garbage", ["model", "resnet18", "--launcher", "torchrun"], {**_TORCH, "RANK": "zero"}),
    ("launcher_rank_past_world", ["model", "resnet18", "--launcher", "torchrun"], {**_TORCH, "RANK": "2"}),
    ("launcher_port_zero", ["model", "resnet18", "--launcher", "torchrun"], {**_TORCH, "MASTER_PORT": "0"}),
    ("launcher_addr_newline", ["model", "resnet18", "--launcher", "torchrun"], {**_TORCH, "MASTER_ADDR": "a\nb"}),
    ("launcher_world_huge", ["model", "resnet18", "--launcher", "torchrun"],
     {**_TORCH, "WORLD_SIZE": "18446744073709551616"}),
    ("slurm_nodelist_broken", ["model", "resnet18", "--launcher", "slurm"],
     {"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_LOCALID": "0", "SLURM_JOB_NODELIST": "gpu[01-"}),
    ("slurm_nonutf8", ["allreduce", "--launcher", "auto"],
     {"SLURM_PROCID": b"\xff", "SLURM_NTASKS": "2", "SLURM_LOCALID": "0", "SLURM_JOB_NODELIST": "n1"}),
    ("rendezvous_timeout_nan", ["model", "resnet18", "--launcher", "torchrun", "--rendezvous-timeout", "nan"],
     _TORCH),
]:
    _launch_case(_n, _args, _env, f"{' '.join(_args)} with {sorted(_env)}: one line, exit 2, no wait for ranks")


# Input data (issue 16): trees that fight back. Each case writes a tiny
# synthetic tree with the binary itself, then spoils it; every bad file is
# skipped and counted (never read forever, never a hang), and every bad
# tree or option is one line and exit 2.
def _tiny_tree(c: Ctx, rel="tree", images=4, classes=2) -> str:
    d = c.path(rel)
    c.run(["data", "synth", d, "--images", str(images), "--classes", str(classes),
           "--width", "40", "--height", "30", "--quiet"])
    return d


def _bench(d, *extra):
    return ["data", "bench", d, "--batch", "2", "--images", "4", "--size", "16",
            "--loader-threads", "1", "--quiet", "--no-save", *extra]


@case(1)
def data_fifo_in_tree(c: Ctx):
    """a FIFO named like a JPEG in a class folder: skipped and counted, never opened and waited on"""
    d = _tiny_tree(c)
    c.mkfifo("tree/class_000/fifo.jpg")
    r = c.run(_bench(d, "--format", "json"))
    c.expect(b"fifo.jpg" in r.err or b'"skipped": 0' not in r.out, "UNEXPECTED",
             f"the FIFO was not counted as skipped: {first_lines(r.err)}")


@case(1)
def data_link_to_dev_zero(c: Ctx):
    """a class file linked to /dev/zero: skipped (not a regular file), not read forever"""
    d = _tiny_tree(c)
    c.symlink("/dev/zero", "tree/class_001/zero.jpg")
    c.run(_bench(d))


@case(1)
def data_dir_link_loop(c: Ctx):
    """a class folder holding a link to itself: walked once"""
    d = _tiny_tree(c)
    c.symlink("..", "tree/class_000/loop")
    c.run(_bench(d))


@case(1, who="user")
def data_unreadable_file(c: Ctx):
    """a JPEG the user may not read: skipped and counted"""
    d = _tiny_tree(c)
    jpgs = sorted(os.listdir(c.path("tree/class_000")))
    os.chmod(c.path("tree/class_000", jpgs[0]), 0)
    c.run(_bench(d))


@case(6)
def data_truncated_and_garbage(c: Ctx):
    """truncated JPEGs, a PNG header alone, random bytes, an empty file: all skipped, the run goes on"""
    d = _tiny_tree(c, images=6)
    jpgs = sorted(os.listdir(c.path("tree/class_000")))
    full = read(c.path("tree/class_000", jpgs[0]))
    c.write("tree/class_000/cut.jpg", full[: len(full) // 2])
    c.write("tree/class_000/header.png", b"\x89PNG\r\n\x1a\n" + b"\0" * 8)
    c.write("tree/class_001/noise.jpeg", os.urandom(4096))
    c.write("tree/class_001/empty.jpg", b"")
    c.write("tree/class_001/bomb.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\x7f\xff\xff\xff\x7f\xff\xff\xff\x08\x02\0\0\0")
    c.run(_bench(d))


@case(6)
def data_all_garbage(c: Ctx):
    """a tree whose every file is broken: one line naming one, exit 2, no hang"""
    c.mkdir("tree/a")
    for k in range(3):
        c.write(f"tree/a/{k}.jpg", b"\xff\xd8\xff" + os.urandom(64))
    c.run(_bench(c.path("tree")), allow=(2,))


@case(4)
def data_model_nonutf8_tree(c: Ctx):
    """--data with a non-UTF-8 folder name: works, the name printed lossily"""
    d = _tiny_tree(c, rel="tr\udcffee")
    c.run(["model", "resnet18", "--batch", "1", "--iters", "1", "--data", d, "--loader-threads", "1",
           "--quiet", "--no-save"])


for _n, _args in [
    ("data_tree_missing", ["model", "resnet18", "--data", "/nonexistent/tree"]),
    ("data_tree_is_file", ["data", "bench", "/etc/hostname"]),
    ("data_tree_no_classes", ["data", "bench", "/dev/shm"]),
    ("data_loader_threads_zero", ["data", "bench", ".", "--loader-threads", "0"]),
    ("data_loader_threads_garbage", ["data", "bench", ".", "--loader-threads", "2,,x"]),
    ("data_prefetch_huge", ["model", "resnet18", "--data", ".", "--prefetch", "99999999999999999999"]),
    ("data_prefetch_without_data", ["model", "resnet18", "--prefetch", "2"]),
    ("data_size_zero", ["data", "bench", ".", "--size", "0"]),
    ("data_dump_index_huge", ["data", "dump", ".", "--index", "18446744073709551615", "--out", "x.npy"]),
    ("data_synth_zero", ["data", "synth", "new", "--images", "0"]),
    ("data_synth_quality", ["data", "synth", "new", "--quality", "101"]),
    ("data_synth_huge_side", ["data", "synth", "new", "--width", "1000000", "--height", "2"]),
    ("data_synth_into_file", ["data", "synth", "/etc/hostname", "--images", "2"]),
    ("data_with_gpus", ["model", "resnet18", "--data", ".", "--gpus", "1"]),
]:
    _launch_case(_n, _args, {}, f"{' '.join(_args)}: one line, exit 2")

# Classes kept in files of their own beside this one: each registers its
# cases with this module's `add` (issue 31's stops: cases_stops.py; its
# limits: cases_limits.py).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cases_stops  # noqa: E402
import cases_limits  # noqa: E402

cases_stops.register(sys.modules[__name__])
cases_limits.register(sys.modules[__name__])


def summary(results):
    users = sorted({r["user"] for r in results})
    print()
    print("Summary (per class and outcome):")
    cols = OUTCOMES + ["SKIP"]
    for u in users:
        rs = [r for r in results if r["user"] == u]
        print(f"\nas {u}:")
        print(f"  {'class':<16}" + "".join(f"{o:>11}" for o in cols) + f"{'total':>8}")
        for k, name in CLASSES.items():
            row = [r for r in rs if r["class"] == k]
            print(f"  {name:<16}" + "".join(f"{sum(r['outcome'] == o for r in row):>11}" for o in cols)
                  + f"{len(row):>8}")
        print(f"  {'all':<16}" + "".join(f"{sum(r['outcome'] == o for r in rs):>11}" for o in cols)
              + f"{len(rs):>8}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="target/release/cnnbench", help="the cnnbench binary (copied before the run)")
    ap.add_argument("--as-user", metavar="USER", help="run each case's commands as USER (setpriv; needs root)")
    ap.add_argument("--both", action="store_true", help="run every case as root, then as nobody")
    ap.add_argument("--timeout", type=float, default=60.0, help="hard limit per case, seconds (default 60)")
    ap.add_argument("--only", metavar="PATTERN", help="comma list of name globs, substrings or class numbers")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--json", metavar="FILE", help="write every result to FILE")
    ap.add_argument("--keep", action="store_true", help="keep the case folders")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each case's commands")
    a = ap.parse_args()

    cases = select(a.only)
    if a.list:
        for c in cases:
            mark = {"root": " [root-only]", "user": " [user-only]"}.get(c.who, "")
            print(f"{c.name:<40} {c.cls} {CLASSES[c.cls]:<15}{mark}  {c.doc}")
        counts = {CLASSES[k]: sum(c.cls == k for c in cases) for k in CLASSES}
        print(f"\n{len(cases)} cases: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
        return 0
    if not cases:
        sys.exit("no case matches --only")

    users: list[tuple[int, int] | None] = []
    if a.both or a.as_user:
        if os.geteuid() != 0:
            sys.exit("--as-user and --both need root (setpriv changes user)")
        if shutil.which("setpriv") is None:
            sys.exit("setpriv not found")
        name = a.as_user or "nobody"
        try:
            pw = pwd.getpwnam(name)
            target = (pw.pw_uid, pw.pw_gid)
        except KeyError:
            target = (65534, 65534)
        users = [None, target] if a.both else [target]
    else:
        users = [None]

    src = os.path.abspath(a.bin)
    if not os.access(src, os.X_OK):
        sys.exit(f"not an executable: {src}")
    os.umask(0o022)
    base = tempfile.mkdtemp(prefix="cnnbench-hostile-")
    os.chmod(base, 0o755)
    bin_copy = os.path.join(base, "cnnbench")
    shutil.copy2(src, bin_copy)
    os.chmod(bin_copy, 0o755)
    seed = os.path.join(base, "seed.json")
    make_seed(bin_copy, seed, base)

    results = []
    try:
        for u in users:
            runner = Runner(bin_copy, base, u, a.timeout, a.keep)
            print(f"== {len(cases)} cases as {runner.label}, binary {src} (copied to {bin_copy})", flush=True)
            for i, c in enumerate(cases):
                res = runner.run_case(c, i)
                results.append(res)
                mark = "" if res["outcome"] in ("OK", "SKIP") else "  <-- " + res.get("detail", "")[:200]
                print(f"  [{runner.label}] {c.name:<40} {res['outcome']:<10} {res.get('secs', 0):5.1f}s{mark}",
                      flush=True)
                if a.verbose:
                    for run in res.get("runs", []):
                        print(f"        $ {run['cmd'][:300]}  -> {run['rc']}")
    finally:
        if not a.keep:
            shutil.rmtree(base, ignore_errors=True)

    print()
    print_table(results)
    summary(results)
    bad = [r for r in results if r["outcome"] not in ("OK", "SKIP")]
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"binary": src, "timeout": a.timeout, "results": results}, f, indent=1, default=str)
    print(f"\n{len(bad)} non-OK of {len(results)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
