"""Hostile cases of issue 31, sections 2, 4 and 6: every long phase stops
on the first signal (data synth, data bench's warm-up, model --data, rnn,
compare and sweeps), inputs cnnbench wrote itself and pipes (report of a
FIFO, a pipe, its own projections; interconnects whose projections are not
finite), and report's time over many records.

Registered from run.py (`cases_stops.register(module)`); each case uses
run.py's Ctx and checks. The rendezvous (section 6) needs a GPU and NCCL
to be reached from the binary; its tag, version and stops are tested in
src/dist/rendezvous/tests.rs instead.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time

SIGS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _name(sig) -> str:
    return signal.Signals(sig).name.lower()


def _stopped_word(sig) -> bytes:
    return b"interrupted" if sig == signal.SIGINT else f"stopped by {signal.Signals(sig).name}".encode()


def register(m):
    """Adds this file's cases to run.py's registry (`m` is run.py)."""
    add, first_lines, read = m.add, m.first_lines, m.read

    # -- data synth ------------------------------------------------------
    def tree_files(c, rel):
        jpgs, parts = [], []
        for dirpath, _, files in os.walk(c.path(rel)):
            for f in files:
                (parts if f.endswith(".part") else jpgs).append(os.path.join(dirpath, f))
        return jpgs, parts

    def check_tree(c, rel, r, sig, line=True):
        jpgs, parts = tree_files(c, rel)
        c.expect(not parts, "CLOBBER", f"partial files left: {[os.path.basename(p) for p in parts][:3]}")
        for j in jpgs:
            b = read(j) or b""
            if not (b.startswith(b"\xff\xd8") and b.endswith(b"\xff\xd9")):
                c.bad("CLOBBER", f"{os.path.relpath(j, c.d)} is not a whole JPEG ({len(b)} bytes)")
                break
        # After a second signal the process may end at once, without it.
        if r.rc == 128 + sig and line:
            c.expect(_stopped_word(sig) in r.err and f"kept the {len(jpgs)} whole JPEGs".encode() in r.err,
                     "UNEXPECTED", f"stderr does not say {len(jpgs)} JPEGs were kept: {first_lines(r.err)}")

    def synth_stop(c, sig, delay, extra=(), second=None, group=False):
        pr = c.spawn(["data", "synth", c.path("t"), "--images", "3000", "--classes", "4", "-q", *extra])
        time.sleep(delay)
        (os.killpg if group else os.kill)(pr.pid, sig)
        if second is not None:
            time.sleep(second)
            pr.signal(sig)
        r = c.finish(pr, allow=(128 + sig,), timeout=30)
        c.expect(r.secs < delay + 10, "UNEXPECTED", f"took {r.secs:.1f} s to stop")
        check_tree(c, "t", r, sig, line=second is None)

    for sig in SIGS:
        for delay in (0.3, 0.8, 1.5):
            add(f"stop_synth_{_name(sig)}_{int(delay * 10)}", 2,
                lambda c, s=sig, d=delay: synth_stop(c, s, d),
                doc=f"data synth --images 3000, {signal.Signals(sig).name} after {delay} s: exit "
                    f"{128 + sig}, whole JPEGs only, one line with how many were kept")
        add(f"stop_synth_{_name(sig)}_twice", 2, lambda c, s=sig: synth_stop(c, s, 0.8, second=0.3),
            doc=f"data synth, {signal.Signals(sig).name} twice 0.3 s apart: no partial file")
        add(f"stop_synth_{_name(sig)}_group", 2, lambda c, s=sig: synth_stop(c, s, 0.8, group=True),
            doc=f"data synth, {signal.Signals(sig).name} to the process group (a terminal's way)")
        add(f"stop_synth_{_name(sig)}_large", 2,
            lambda c, s=sig: synth_stop(c, s, 1.0, extra=("--width", "1600", "--height", "1200")),
            doc=f"data synth of 1600x1200 images, {signal.Signals(sig).name}: stops between images")

    def synth_done_before(c):
        """a synth that finished before the signal: exit 0, a whole tree"""
        r = c.run(["data", "synth", c.path("t"), "--images", "2", "--classes", "2", "--width", "16",
                   "--height", "16", "-q"])
        jpgs, parts = tree_files(c, "t")
        c.expect(len(jpgs) == 2 and not parts and r.rc == 0, "UNEXPECTED", f"{len(jpgs)} files, {parts}")
    add("stop_synth_finished_first", 2, synth_done_before, doc=synth_done_before.__doc__)

    def synth_then_bench(c):
        """a tree kept by a stopped synth is a tree data bench reads"""
        pr = c.spawn(["data", "synth", c.path("t"), "--images", "3000", "--classes", "2", "-q",
                      "--width", "64", "--height", "48"])
        c.wait_until(lambda: len(tree_files(c, "t")[0]) >= 8, 20)
        pr.signal(signal.SIGINT)
        c.finish(pr, allow=(130, 0), timeout=30)
        c.run(["data", "bench", c.path("t"), "--batch", "2", "--images", "4", "--size", "16",
               "--loader-threads", "1", "-q", "--no-save"])
    add("stop_synth_tree_usable", 2, synth_then_bench, doc=synth_then_bench.__doc__)

    # -- data bench and model --data ------------------------------------
    def tiny_tree(c):
        c.run(["data", "synth", c.path("tree"), "--images", "8", "--classes", "2", "--width", "40",
               "--height", "30", "-q"])
        return c.path("tree")

    def bench_stop(c, sig, out=None, reader=False, group=False):
        d = tiny_tree(c)
        args = ["data", "bench", d, "--batch", "2", "--images", "4", "--size", "16", "--warmup", "100000",
                "--loader-threads", "1", "-q", "--results", c.path("results")]
        rd = None
        if out:
            if reader:
                rd = m.FifoReader(c.mkfifo(out))
                rd.start()
            args += ["--out", out, "--format", "json"]
        pr = c.spawn(args)
        time.sleep(1.0)
        (os.killpg if group else os.kill)(pr.pid, sig)
        r = c.finish(pr, allow=(128 + sig,), timeout=20)
        c.expect(r.secs < 8, "UNEXPECTED", f"the warm-up took {r.secs:.1f} s to stop")
        c.expect(_stopped_word(sig) in r.err, "UNEXPECTED", f"stderr: {first_lines(r.err)}")
        if rd is not None:
            rd.join(5)
            rd.release()
            try:
                doc = json.loads(rd.data or b"")
                c.expect(doc.get("complete") is False, "UNEXPECTED", f"reader got complete={doc.get('complete')}")
            except ValueError:
                c.bad("CLOBBER", f"the FIFO's reader got {(rd.data or b'')[:80]!r}")
        elif out:
            c.valid_json(c.path(out), complete=False)

    for sig in SIGS:
        n = signal.Signals(sig).name
        add(f"stop_bench_warmup_{_name(sig)}", 2, lambda c, s=sig: bench_stop(c, s),
            doc=f"data bench --warmup 100000, {n} in the warm-up: exit {128 + sig} at once")
        add(f"stop_bench_warmup_{_name(sig)}_out", 2, lambda c, s=sig: bench_stop(c, s, out="o.json"),
            doc=f"data bench warm-up, {n}, --out: the file is valid JSON, complete: false")
        add(f"stop_bench_warmup_{_name(sig)}_fifo", 2,
            lambda c, s=sig: bench_stop(c, s, out="o.fifo", reader=True),
            doc=f"data bench warm-up, {n}, --out a FIFO with a reader: one document, complete: false")
        add(f"stop_bench_warmup_{_name(sig)}_group", 2, lambda c, s=sig: bench_stop(c, s, group=True),
            doc=f"data bench warm-up, {n} to the process group")

        def model_data(c, s=sig):
            d = tiny_tree(c)
            pr = c.spawn(["model", "alexnet", "--batch", "2", "--data", d, "--loader-threads", "1",
                          "--min-time", "30", "-q", "--results", c.path("results")])
            time.sleep(2.0)
            pr.signal(s)
            r = c.finish(pr, allow=(128 + s,), timeout=30)
            c.expect(r.secs < 25, "UNEXPECTED", f"took {r.secs:.1f} s to stop")
        add(f"stop_model_data_{_name(sig)}", 2, model_data,
            doc=f"model --data (real input, the loader running), {n}: exit {128 + sig}")

        def rnn_stop(c, s=sig):
            pr = c.spawn(["rnn", "l1t10mb4sic32", "l1t12mb4sic32", "--cell", "lstm", "--device", "cpu",
                          "--min-time", "3", "-q",
                          "--results", c.path("results")])
            time.sleep(1.5)
            pr.signal(s)
            r = c.finish(pr, allow=(128 + s, 2), timeout=30)
            if r.rc == 2:
                c.bad("UNEXPECTED", f"rnn refused the problem: {first_lines(r.err)}")
            c.expect(r.secs < 10, "UNEXPECTED", f"took {r.secs:.1f} s to stop")
        add(f"stop_rnn_{_name(sig)}", 2, rnn_stop, doc=f"rnn mid-run, {n}: exit {128 + sig}")

    # -- compare and sweeps ------------------------------------------------
    def compare_stop(c, sig, delay=None, group=False, second=None):
        pr = c.spawn(m.COMPARE + ["--results", c.path("results")])
        if delay is None:
            c.wait_until(lambda: c.store_records() >= 1, 25)
        else:
            time.sleep(delay)
        (os.killpg if group else os.kill)(pr.pid, sig)
        if second is not None:
            time.sleep(second)
            pr.signal(sig)
        r = c.finish(pr, allow=(128 + sig, -sig) if delay is not None and delay < 0.2 else (128 + sig,),
                     timeout=25)
        if second is None and r.rc == 128 + sig:
            c.expect(b"kept " in r.err and b" runs whole" in r.err, "UNEXPECTED",
                     f"compare does not say what it kept: {first_lines(r.err, 4)}")
            c.expect(b"not run: b" in r.err or b"b stopped early" in r.err or b"(a, b)" in r.err,
                     "UNEXPECTED", f"compare does not name the runs: {first_lines(r.err, 4)}")

    for sig in SIGS:
        n = signal.Signals(sig).name
        add(f"stop_compare_{_name(sig)}_says_kept", 2, lambda c, s=sig: compare_stop(c, s),
            doc=f"compare mid-run, {n}: one line says which runs were kept, stopped, not run")
        add(f"stop_compare_{_name(sig)}_group_says_kept", 2, lambda c, s=sig: compare_stop(c, s, group=True),
            doc=f"compare mid-run, {n} to the group: the same line")
        add(f"stop_compare_{_name(sig)}_at_start", 2, lambda c, s=sig: compare_stop(c, s, delay=0.5),
            doc=f"compare, {n} half a second in: exit {128 + sig}, no child left")

        def sweep_stop(c, s=sig):
            r = m.stop_children(c, m.SWEEP, s)
            c.expect(b"kept " in r.err, "UNEXPECTED", f"the sweep does not say what it kept: {first_lines(r.err)}")
        add(f"stop_sweep_{_name(sig)}_says_kept", 2, sweep_stop,
            doc=f"a --threads sweep, {n}: exit {128 + sig}, one line with what was kept")
    for sig in (signal.SIGINT, signal.SIGTERM):
        add(f"stop_compare_{_name(sig)}_twice", 2, lambda c, s=sig: compare_stop(c, s, second=0.3),
            doc=f"compare, {signal.Signals(sig).name} twice: the parent ends, no child outlives it")

    # -- report: FIFOs, pipes, its own files --------------------------------
    def fifo_writer(path, data, delay):
        def go():
            time.sleep(delay)
            try:
                with open(path, "wb") as f:
                    f.write(data)
            except OSError:
                pass
        t = threading.Thread(target=go, daemon=True)
        t.start()
        return t

    def report_fifo(c, delay, name="run.fifo"):
        f = c.mkfifo(name)
        fifo_writer(f, read(c.runner.seed), delay)
        r = c.run(["report", f], timeout=20)
        c.expect(b"# cnnbench report" in r.out, "UNEXPECTED", f"no report from the FIFO: {first_lines(r.err)}")

    for delay in (0.0, 0.5, 1.5):
        add(f"report_fifo_writer_{int(delay * 10)}", 5, lambda c, d=delay: report_fifo(c, d),
            doc=f"report FIFO, its writer {delay} s late: read once, a report, no hang")
    add("report_fifo_csv_name", 5, lambda c: report_fifo(c, 0.2, "run.json"),
        doc="report of a FIFO named .json, its writer present: read once")

    def report_fifo_twice(c):
        """the same FIFO named twice: read once (the same file), no hang"""
        f = c.mkfifo("run.fifo")
        fifo_writer(f, read(c.runner.seed), 0.2)
        r = c.run(["report", f, f], timeout=20)
        c.expect(b"# cnnbench report" in r.out, "UNEXPECTED", first_lines(r.err))
    add("report_fifo_named_twice", 5, report_fifo_twice, doc=report_fifo_twice.__doc__)

    def report_fifo_garbage(c):
        """a FIFO whose writer sends garbage: one line, exit 2, no hang"""
        f = c.mkfifo("run.fifo")
        fifo_writer(f, os.urandom(5000), 0.2)
        c.run(["report", f], allow=(2,), timeout=20)
    add("report_fifo_garbage", 5, report_fifo_garbage, doc=report_fifo_garbage.__doc__)

    for sig in SIGS:
        def no_writer(c, s=sig):
            f = c.mkfifo("run.fifo")
            pr = c.spawn(["report", f])
            time.sleep(0.7)
            pr.signal(s)
            r = c.finish(pr, allow=(128 + s,), timeout=10)
            c.expect(r.secs < 5, "UNEXPECTED", f"took {r.secs:.1f} s")
            c.error_mentions(r, "while waiting for a writer")
        add(f"report_fifo_no_writer_{_name(sig)}", 2, no_writer,
            doc=f"report of a FIFO nobody writes, then {signal.Signals(sig).name}: one line, exit {128 + sig}")

    def report_pipe_fd(c):
        """report /dev/fd/3 (a pipe the shell opened): read once, a report"""
        seed = c.copy_seed("seed.json")
        r = c.run(f'cat {seed} | "$CB" report /dev/stdin', shell=True, timeout=20)
        c.expect(b"# cnnbench report" in r.out, "UNEXPECTED", first_lines(r.err))
    add("report_stdin_pipe", 5, report_pipe_fd, doc=report_pipe_fd.__doc__)

    def report_process_substitution(c):
        """report <(cat run.json) (bash): read once, a report"""
        if not os.path.exists("/bin/bash"):
            raise m.Skip("no bash")
        seed = c.copy_seed("seed.json")
        r = c.run(f'bash -c \'"$CB" report <(cat {seed})\'', shell=True, timeout=20)
        c.expect(b"# cnnbench report" in r.out, "UNEXPECTED", first_lines(r.err))
    add("report_process_substitution", 5, report_process_substitution,
        doc=report_process_substitution.__doc__)

    def report_own_projection(c, links):
        r = c.run(["model", "alexnet", "--batch", "1", "--iters", "1", "--warmup", "0", "-q",
                   "--project-gpus", "2,64", "--interconnect", links, "--results", c.path("results")],
                  timeout=60)
        if r.rc == 0:
            r2 = c.run(["report", c.path("results")], timeout=30)
            c.expect(b"alexnet" in r2.out, "UNEXPECTED", f"report of its own run: {first_lines(r2.err)}")
    for links in ("nvlink4", "0.001:100000", "1e6:0.001", "nvlink4,eth100"):
        add(f"report_own_projection_{links.replace(':', '_').replace(',', '_').replace('.', '')}", 5,
            lambda c, l=links: report_own_projection(c, l),
            doc=f"model --project-gpus 2,64 --interconnect {links}, then report of that run: read")

    # -- interconnects whose projections are not finite ------------------------
    for i, links in enumerate(["1e-308:1e308", "1e-308:1", "1:1e308", "nvlink4,1e-300:1",
                               "1e-320:5", "5e-324:1", "1e-310:1e-310", "1e-300:1e300",
                               "ib-ndr,1e-308:1", "1e-308:1e308,nvlink4", "1e-305:1",
                               "2e-308:3e300"]):
        def refused(c, l=links):
            r = c.run(["model", "resnet18", "--project-gpus", "64", "--gpus-per-node", "8",
                       "--interconnect", l, "--no-save"], allow=(2,), timeout=20)
            c.expect(r.secs < 10, "UNEXPECTED", f"refused only after {r.secs:.1f} s (after running?)")
            c.error_mentions(r, "--interconnect")
        add(f"interconnect_not_finite_{i:02d}", 4, refused,
            doc=f"--interconnect {links} --project-gpus 64: refused up front in one line")

    # -- report over many records -----------------------------------------------
    def report_many(c, n=20_000):
        """report over 20,000 records in 2,000 files: done within 60 s (was quadratic)"""
        seed = json.loads(read(c.runner.seed))
        rec = seed["records"][0]
        os.makedirs(c.path("many"), exist_ok=True)
        for i in range(n // 10):
            doc = dict(seed)
            doc["environment"] = dict(seed["environment"], host=f"h{i // 3}", threads=1 << (i % 3))
            doc["records"] = [dict(rec, problem=f"mb{1 + (i * 10 + k) % 997}ic8ih9oc16oh7kh3")
                              for k in range(10)]
            with open(c.path("many", f"r{i}.json"), "w") as f:
                json.dump(doc, f)
        r = c.run(["report", c.path("many")], timeout=60)
        c.expect(r.secs < 60, "UNEXPECTED", f"report of {n} records took {r.secs:.1f} s")
    add("report_20k_records", 5, report_many, doc=report_many.__doc__, timeout=90)
