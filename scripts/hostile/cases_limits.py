"""Hostile cases of issue 31, sections 1, 3, 5 and 7: sizes checked before
anything is allocated or read, SIGXFSZ, up-front validation across a list
of models, and the smaller ones (messages, compare's checks, unreadable
class folders, --describe's batch).

Registered from run.py (`register(run_module)`), which owns the runner,
the classes and the judging; every case here runs as root and as nobody.
Cases that refuse something run twice where a runaway read or allocation
could hide: under a 4 GiB address-space cap and without one. Each case
takes well under a few seconds on a release build.
"""

from __future__ import annotations

import os
import signal
import struct
import threading
import time

GiB = 1 << 30
MiB = 1 << 20
AS_CAP = {"as": 4 * GiB}
U64_MAX = "18446744073709551615"
TWO_64 = "18446744073709551616"


def register(h):
    """Adds this file's cases to run.py's registry (`h` is run.py)."""
    add, Ctx, Skip = h.add, h.Ctx, h.Skip
    FAST = h.FAST

    def tree(c: Ctx, rel="tree", images=4, classes=2) -> str:
        d = c.path(rel)
        c.run(["data", "synth", d, "--images", str(images), "--classes", str(classes),
               "--width", "16", "--height", "16", "--quiet"])
        return d

    def twice(c: Ctx, args, allow=(2,), words=(), env=None, secs=None):
        """`args` under the 4 GiB address-space cap and without one: each
        the same one-line outcome, within `secs` when given."""
        rs = []
        for limits in (AS_CAP, None):
            r = c.run(args, allow=allow, limits=limits, env=env)
            if words:
                c.error_mentions(r, *words)
            if secs is not None:
                c.expect(r.secs < secs, "HANG", f"`{r.cmd}` took {r.secs:.1f} s (more than {secs} s)")
            rs.append(r)
        return rs

    # -- 1. counts past their caps: one line, exit 2, before anything -----
    def refused(name, cls, args_of, words=(), doc="", secs=10):
        def fn(c: Ctx):
            d = tree(c) if any("{tree}" in a for a in args_of) else None
            args = [a.replace("{tree}", d) if d else a for a in args_of]
            twice(c, args, words=words, secs=secs)
        add(name, cls, fn, doc=doc or f"{' '.join(args_of)}: one line, exit 2, under 4 GiB and without")

    bench = ["data", "bench", "{tree}", "--quiet", "--no-save"]
    for n, extra, words in [
        ("images_u64max", ["--images", U64_MAX], ["--images", "10000000"]),
        ("images_1e12", ["--images", "1000000000000"], ["--images"]),
        ("images_2p64", ["--images", TWO_64], ["--images"]),
        ("images_zero", ["--images", "0"], ["--images"]),
        ("images_past_cap", ["--images", "10000001"], ["--images"]),
        ("warmup_1e9", ["--warmup", "1000000000"], ["--warmup", "1000000"]),
        ("warmup_u64max", ["--warmup", U64_MAX], ["--warmup"]),
        ("warmup_past_cap", ["--warmup", "1000001"], ["--warmup"]),
        ("batch_zero", ["--batch", "0"], ["--batch"]),
        ("batch_past_cap", ["--batch", "4097"], ["--batch"]),
        ("batch_u64max", ["--batch", U64_MAX], ["--batch"]),
        ("prefetch_zero", ["--prefetch", "0"], ["--prefetch"]),
        ("prefetch_past_cap", ["--prefetch", "65"], ["--prefetch"]),
        ("prefetch_2p64", ["--prefetch", TWO_64], ["--prefetch"]),
        ("loader_threads_65_counts", ["--loader-threads", ",".join(["1"] * 65)], ["--loader-threads"]),
        ("loader_threads_past_cap", ["--loader-threads", "1025"], ["--loader-threads"]),
        ("loader_threads_u64max", ["--loader-threads", f"1,{U64_MAX}"], ["--loader-threads"]),
        ("size_past_cap", ["--size", "4097"], ["--size"]),
        ("size_u64max", ["--size", U64_MAX], ["--size"]),
    ]:
        refused(f"limits_data_bench_{n}", 3, bench + extra, words)
    for n, extra, words in [
        ("images_past_cap", ["--images", "10000001"], ["--images"]),
        ("images_u64max", ["--images", U64_MAX], ["--images"]),
        ("images_2p64", ["--images", TWO_64], ["--images"]),
        ("classes_past_images", ["--images", "4", "--classes", "5"], ["--classes"]),
        ("classes_u64max", ["--classes", U64_MAX], ["--classes"]),
        ("side_past_cap", ["--width", "8193", "--height", "8"], ["--width"]),
        ("side_u64max", ["--width", U64_MAX, "--height", "8"], ["--width"]),
        ("quality_past_cap", ["--quality", "256"], ["--quality"]),
    ]:
        refused(f"limits_data_synth_{n}", 3, ["data", "synth", "new", "--quiet", *extra], words)
    for n, extra, words in [
        ("size_past_cap", ["--size", "4097"], ["--size"]),
        ("size_zero", ["--size", "0"], ["--size"]),
        ("index_2p64", ["--index", TWO_64], ["--index"]),
        ("index_u64max", ["--index", U64_MAX], ["--index"]),
    ]:
        refused(f"limits_data_dump_{n}", 3, ["data", "dump", "{tree}", "--out", "x.npy", *extra], words)

    timed = {
        "conv": ["conv", h.P, "--device", "cpu", "--no-save", "-q"],
        "gemm": ["gemm", "8x8x8", "--device", "cpu", "--no-save", "-q"],
        "rnn": ["rnn", "l1t2mb1sic4", "--device", "cpu", "--no-save", "-q"],
        "model": ["model", "resnet18", "--device", "cpu", "--no-save", "-q"],
    }
    for sub, base in timed.items():
        for n, extra, words in [
            ("iters_past_cap", ["--iters", "1000001"], ["--iters", "1000000"]),
            ("warmup_u64max", ["--warmup", U64_MAX], ["--warmup"]),
            ("iters_2p64", ["--iters", TWO_64], ["--iters"]),
            ("threads_u64max", ["--threads", U64_MAX], ["--threads"]),
            ("min_time_past_cap", ["--min-time", "86401"], ["--min-time"]),
        ]:
            refused(f"limits_{sub}_{n}", 3, base + extra, words)
    for n, args, words in [
        ("model_batch_zero", ["model", "resnet18", "--batch", "0", "--no-save"], ["--batch"]),
        ("model_batch_2p64", ["model", "resnet18", "--batch", TWO_64, "--no-save"], ["--batch"]),
        ("model_loader_threads_past_cap", ["model", "resnet18", "--data", "{tree}", "--loader-threads", "1025"],
         ["--loader-threads"]),
        ("model_prefetch_u64max", ["model", "resnet18", "--data", "{tree}", "--prefetch", U64_MAX], ["--prefetch"]),
        ("allreduce_sizes_past_cap", ["allreduce", "--sizes", "2147483649"], ["--sizes"]),
        ("allreduce_sizes_u64max", ["allreduce", "--sizes", f"1,{U64_MAX}"], ["--sizes"]),
        ("info_threads_2p64", ["info", "--threads", TWO_64], ["--threads"]),
        ("check_threads_u64max", ["check", "--model", "alexnet", "--threads", U64_MAX], ["--threads"]),
    ]:
        refused(f"limits_{n}", 3, args, words)

    # -- 1. reads capped while reading ------------------------------------
    for sub in ("conv", "rnn"):
        for dev in ("/dev/zero", "/dev/urandom"):
            refused(f"limits_{sub}_from_{os.path.basename(dev)}", 3,
                    [sub, "--from", dev, "--device", "cpu", "--no-save", "-q"], ["16 MiB"],
                    doc=f"{sub} --from {dev}: one line within seconds, memory bounded (4 GiB cap and none)")

    def from_sparse(sub):
        def fn(c: Ctx):
            p = c.write("big.txt", b"")
            os.truncate(p, 17 * MiB)
            twice(c, [sub, "--from", "big.txt", "--device", "cpu", "--no-save", "-q"],
                  words=["big.txt", "16 MiB"], secs=5)
        add(f"limits_{sub}_from_17mib_file", 3, fn,
            doc=f"{sub} --from a 17 MiB file: refused before reading it, one line")

    def from_endless_fifo(sub):
        def fn(c: Ctx):
            p = c.mkfifo("endless.txt")
            stop = threading.Event()

            def feed():
                # A writer that never ends: descriptors, forever.
                try:
                    fd = os.open(p, os.O_WRONLY)
                except OSError:
                    return
                line = (b"mb1ic4ih8oc4kh3\n" if sub == "conv" else b"l1t2mb1sic4\n") * 4096
                try:
                    while not stop.is_set():
                        os.write(fd, line)
                except OSError:
                    pass
                finally:
                    os.close(fd)
            t = threading.Thread(target=feed, daemon=True)
            t.start()
            r = c.run([sub, "--from", "endless.txt", "--device", "cpu", "--no-save", "-q"],
                      allow=(2,), limits=AS_CAP, timeout=30)
            c.error_mentions(r, "16 MiB")
            stop.set()
            # Unblock a writer still waiting for a reader.
            try:
                fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
                os.close(fd)
            except OSError:
                pass
            t.join(2)
        add(f"limits_{sub}_from_endless_fifo", 3, fn,
            doc=f"{sub} --from a FIFO fed forever: stops at 16 MiB, one line")

    for sub in ("conv", "rnn"):
        from_sparse(sub)
        from_endless_fifo(sub)

    def report_huge_results(c: Ctx):
        """report on a 300 MiB results file (sparse): refused before reading it; the report goes on."""
        c.mkdir("in")
        c.copy_seed("in/run.json")
        p = c.write("in/huge.json", b"")
        os.truncate(p, 300 * MiB)
        for limits in (AS_CAP, None):
            r = c.run(["report", "in"], allow=(1,), limits=limits, timeout=30)
            c.expect(b"huge.json" in r.err, "UNEXPECTED", f"huge.json not named: {h.first_lines(r.err)}")
    add("limits_report_huge_results_file", 3, report_huge_results, doc=report_huge_results.__doc__)

    # -- 3. SIGXFSZ: ignored by cnnbench itself, the write fails (EFBIG) --
    def fsize_run(c: Ctx, args, limit, allow=(2,)):
        """`args` under RLIMIT_FSIZE `limit`, SIGXFSZ left at its default
        (cnnbench must ignore it itself): never killed by it (153)."""
        r = c.run(args, limits={"fsize": limit}, allow=allow)
        c.expect(r.rc != 128 + signal.SIGXFSZ and r.rc != -signal.SIGXFSZ, "ABORT",
                 f"`{r.cmd}` killed by SIGXFSZ (exit {r.rc})")
        return r

    def no_parts(c: Ctx, top="."):
        for dirpath, _, files in os.walk(c.path(top)):
            for f in files:
                if f.endswith(".part"):
                    c.bad("CLOBBER", f"partial file left: {os.path.relpath(os.path.join(dirpath, f), c.d)}")

    def npy_whole(c: Ctx, folder):
        """Every .npy in `folder` is whole: its header's shape times 4 bytes follows the header."""
        d = c.path(folder)
        if not os.path.isdir(d):
            return
        for dirpath, _, files in os.walk(d):
            for f in files:
                if not f.endswith(".npy"):
                    continue
                p = os.path.join(dirpath, f)
                data = h.read(p) or b""
                ok = False
                if data[:6] == b"\x93NUMPY" and len(data) >= 10:
                    hlen = struct.unpack("<H", data[8:10])[0]
                    header = data[10:10 + hlen].decode("latin1", "replace")
                    try:
                        shape = header.split("'shape':")[1].split(")")[0].strip(" (")
                        n = 1
                        for s in shape.split(","):
                            if s.strip():
                                n *= int(s)
                        ok = len(data) == 10 + hlen + 4 * n
                    except (IndexError, ValueError):
                        ok = False
                c.expect(ok, "CLOBBER", f"truncated .npy left: {os.path.relpath(p, c.d)} ({len(data)} bytes)")

    def fsize_out(name, args, limit):
        def fn(c: Ctx):
            if "{tree}" in args:
                d = tree(c)
                a = [x.replace("{tree}", d) for x in args]
            else:
                a = list(args)
            p = c.write("o.json", h.OLD)
            r = fsize_run(c, a + ["--out", "o.json", "--format", "json"], limit)
            c.unchanged(p, h.OLD)
            c.error_mentions(r, "o.json")
        add(f"xfsz_{name}_out", 2, fn,
            doc=f"{name} --out past `ulimit -f` (SIGXFSZ not trapped): one line, exit 2, old file kept, no temp file")

    for name, args, limit in [
        ("conv", ["conv", h.P, *FAST, "--no-save"], 600),
        ("gemm", ["gemm", "8x8x8", "--device", "cpu", "--iters", "1", "--warmup", "0", "-q", "--no-save"], 400),
        ("rnn", ["rnn", "l1t2mb1sic4", "--device", "cpu", "--iters", "1", "--warmup", "0", "-q", "--no-save"], 600),
        ("model", ["model", "mnist-mlp", "--device", "cpu", "--iters", "1", "--warmup", "0", "-q", "--no-save"], 600),
        ("data_bench", ["data", "bench", "{tree}", "--images", "2", "--batch", "2", "--size", "16",
                        "--loader-threads", "1", "-q", "--no-save"], 300),
        ("conv_sweep", ["conv", h.P, *FAST, "--no-save", "--threads", "1,2"], 600),
    ]:
        fsize_out(name, args, limit)

    def fsize_store(name, args):
        def fn(c: Ctx):
            c.mkdir("results")
            fsize_run(c, args + ["--results", "results"], 300)
            for f in c.store():
                c.valid_json(f)
        add(f"xfsz_{name}_store", 2, fn,
            doc=f"{name}'s store past `ulimit -f`: one line, exit 2, no temp file, no torn run file")

    fsize_store("conv", ["conv", h.P, *FAST])
    fsize_store("rnn", ["rnn", "l1t2mb1sic4", "--device", "cpu", "--iters", "1", "--warmup", "0", "-q"])
    fsize_store("model", ["model", "mnist-mlp", "--device", "cpu", "--iters", "1", "--warmup", "0", "-q"])

    def xfsz_conv_dump(c: Ctx):
        """conv --dump past `ulimit -f`: one line, exit 2, no truncated .npy left."""
        fsize_run(c, ["conv", "mb2ic16ih16oc16kh3ph1", *FAST, "--no-save", "--dump", "d"], 3000)
        npy_whole(c, "d")
    add("xfsz_conv_dump", 2, xfsz_conv_dump, doc=xfsz_conv_dump.__doc__)

    def xfsz_rnn_dump(c: Ctx):
        """rnn --dump past `ulimit -f`: one line, exit 2, no truncated .npy left."""
        fsize_run(c, ["rnn", "l1t4mb2sic32", "--device", "cpu", "--iters", "1", "--warmup", "0", "-q",
                      "--no-save", "--dump", "d"], 3000)
        npy_whole(c, "d")
    add("xfsz_rnn_dump", 2, xfsz_rnn_dump, doc=xfsz_rnn_dump.__doc__)

    def xfsz_data_dump(c: Ctx):
        """data dump past `ulimit -f`: one line naming x.npy once, exit 2, no file left."""
        d = tree(c)
        r = fsize_run(c, ["data", "dump", d, "--out", "x.npy"], 1000)
        c.expect(r.err.count(b"x.npy") == 1, "UNEXPECTED", f"x.npy named {r.err.count(b'x.npy')} times: "
                 f"{h.first_lines(r.err)}")
        c.expect(not os.path.exists(c.path("x.npy")), "CLOBBER", "a truncated x.npy was left")
    add("xfsz_data_dump", 2, xfsz_data_dump, doc=xfsz_data_dump.__doc__)

    def xfsz_data_synth(c: Ctx):
        """data synth past `ulimit -f`: one line, exit 2, no .part file left."""
        r = fsize_run(c, ["data", "synth", "t", "--images", "8", "--classes", "2", "--quality", "100", "-q"], 2000)
        no_parts(c)
    add("xfsz_data_synth", 2, xfsz_data_synth, doc=xfsz_data_synth.__doc__)

    def xfsz_report_out(c: Ctx):
        """report --out past `ulimit -f` (SIGXFSZ not trapped): one line, exit 2, older report kept."""
        h.report_in(c)
        p = c.write("r.md", h.OLD)
        fsize_run(c, ["report", "in", "--out", "r.md"], 300)
        c.unchanged(p, h.OLD)
    add("xfsz_report_out", 2, xfsz_report_out, doc=xfsz_report_out.__doc__)

    def xfsz_describe_out(c: Ctx):
        """model --describe --out past `ulimit -f`: one line, exit 2, no temp file."""
        fsize_run(c, ["model", "resnet50", "--describe", "--out", "d.txt"], 500)
    add("xfsz_describe_out", 2, xfsz_describe_out, doc=xfsz_describe_out.__doc__)

    # -- 5. every named model checked before the first runs --------------
    for n, models, word in [
        ("mlp", ["resnet18", "mnist-mlp"], "mnist-mlp"),
        ("bilstm", ["alexnet", "imdb-bilstm"], "imdb-bilstm"),
        ("fasttext_first", ["imdb-fasttext", "resnet18"], "imdb-fasttext"),
        ("mnist_cnn", ["resnet18", "mnist-cnn"], "mnist-cnn"),
        ("lstm_text", ["vgg16", "lstm-text"], "lstm-text"),
    ]:
        def fn(c: Ctx, models=models, word=word):
            d = tree(c)
            r = c.run(["model", *models, "--data", d, "--device", "cpu", "--iters", "1", "--warmup", "0",
                       "--no-save", "-q"], allow=(2,))
            c.error_mentions(r, word)
            c.expect(r.secs < 5, "HANG", f"refused after {r.secs:.1f} s: a model ran first")
        add(f"upfront_data_{n}", 4, fn,
            doc=f"model {' '.join(models)} --data DIR: {word} refused before any model runs")

    def upfront_all_data(c: Ctx):
        """model all --data DIR: the models --data cannot feed are left out (named), before any runs."""
        d = tree(c)
        r = c.run(["model", "all", "--data", d, "--device", "cpu", "--batch", "100000000000",
                   "--no-save", "--format", "csv"], timeout=30)
        c.error_mentions(r, "leaving out", "mnist-mlp")
        c.expect(b"mnist-mlp" not in r.out, "UNEXPECTED", "mnist-mlp has a row")
        c.expect(r.secs < 10, "HANG", f"took {r.secs:.1f} s")
    add("upfront_all_data", 4, upfront_all_data, doc=upfront_all_data.__doc__)

    def upfront_all_oom(c: Ctx):
        """model all at an absurd batch: every model's OOM said before the first, all rows OOM, fast."""
        r = c.run(["model", "all", "--device", "cpu", "--batch", "1000000000", "--no-save", "--format", "csv"],
                  timeout=30)
        rows = [l for l in r.out.decode(errors="replace").splitlines()[1:] if l.strip()]
        c.expect(rows and all(",OOM," in l or ",OOM" in l for l in rows), "UNEXPECTED",
                 f"not every row is OOM: {rows[:2]}")
        c.expect(b"90%" in r.err, "UNEXPECTED", f"the OOM line does not state the 90% rule: {h.first_lines(r.err)}")
    add("upfront_all_oom", 4, upfront_all_oom, doc=upfront_all_oom.__doc__)

    def upfront_nchw_sequences(c: Ctx):
        """model resnet18 lstm-text --layout nchw: refused before resnet18 runs."""
        r = c.run(["model", "resnet18", "lstm-text", "--layout", "nchw", "--device", "cpu", "--no-save", "-q"],
                  allow=(2,))
        c.expect(r.secs < 5, "HANG", f"refused after {r.secs:.1f} s")
    add("upfront_nchw_sequences", 4, upfront_nchw_sequences, doc=upfront_nchw_sequences.__doc__)

    # -- 7. the smaller ones ---------------------------------------------
    for n, batch, fmt in [("benchdnn_u64max", U64_MAX, "benchdnn"), ("json_2p62", str(1 << 62), "json"),
                          ("csv_u64max", U64_MAX, "csv"), ("benchdnn_2p61", str(1 << 61), "benchdnn")]:
        refused(f"describe_batch_{n}", 4,
                ["model", "resnet18", "--describe", "--format", fmt, "--batch", batch], ["--batch", "2^63"])

    def describe_batch_fine(c: Ctx):
        """--describe at a large batch that holds: its descriptors are ones conv reads."""
        r = c.run(["model", "resnet18", "--describe", "--format", "benchdnn", "--batch", "1000000"])
        c.write("d.txt", r.out)
        c.run(["conv", "--from", "d.txt", "--device", "cpu", "--no-save", "--batch", "1", *FAST[2:]])
    add("describe_batch_fine", 4, describe_batch_fine, doc=describe_batch_fine.__doc__)

    for n, extra, word in [
        ("out", ["--out", "x.json"], "--out"),
        ("out_equals", ["--out=x.json"], "--out"),
    ]:
        def fn(c: Ctx, extra=extra, word=word):
            r = c.run(["compare", "--variant", "a:CNNBENCH_THREADS=1", "--variant", "b:CNNBENCH_THREADS=2", "--",
                       "conv", h.P, *FAST, *extra], allow=(2,))
            c.error_mentions(r, word)
            c.expect(not os.path.exists(c.path("x.json")), "UNEXPECTED", "a child wrote x.json")
        add(f"compare_child_{n}", 5, fn, doc=f"compare -- conv ... {' '.join(extra)}: refused in one line")

    for n, name in [("newline", "a\nb"), ("carriage_return", "a\rb"), ("escape", "a\x1b[31mb"), ("tab", "a\tb")]:
        def fn(c: Ctx, name=name):
            c.run(["compare", "--variant", f"{name}:CNNBENCH_THREADS=1", "--variant", "b:CNNBENCH_THREADS=2",
                   "--", "info"], allow=(2,))
        add(f"compare_variant_name_{n}", 5, fn, doc=f"a variant name with a {n.replace('_', ' ')}: refused")

    def unreadable_class_folder(c: Ctx):
        """As nobody, an unreadable class folder is named on stderr and counted as skipped."""
        d = tree(c, images=6, classes=3)
        os.chmod(os.path.join(d, sorted(os.listdir(d))[1]), 0)
        r = c.run(["data", "bench", d, "--images", "2", "--batch", "2", "--size", "16", "--loader-threads", "1",
                   "--format", "json", "--no-save", "-q"])
        c.expect(b"could not be read" in r.err and b"class_001" in r.err, "UNEXPECTED",
                 f"the folder is not named: {h.first_lines(r.err)}")
        try:
            rec = h.json.loads(r.out)["records"][0]
            c.expect(rec.get("skipped", 0) >= 1, "UNEXPECTED", f"skipped {rec.get('skipped')}")
        except (ValueError, KeyError, IndexError) as e:
            c.bad("UNEXPECTED", f"no record: {e}")
    add("unreadable_class_folder", 4, unreadable_class_folder, who="user", doc=unreadable_class_folder.__doc__)

    def unreadable_only_class(c: Ctx):
        """As nobody, a tree whose only images are unreadable: one line naming why, exit 2."""
        d = tree(c, images=2, classes=1)
        os.chmod(os.path.join(d, "class_000"), 0)
        r = c.run(["data", "bench", d, "--no-save", "-q"], allow=(2,))
        c.error_mentions(r, "could not be read")
    add("unreadable_only_class", 4, unreadable_only_class, who="user", doc=unreadable_only_class.__doc__)

    def unreadable_class_model(c: Ctx):
        """As nobody, model --data with an unreadable class folder: named on stderr, the run goes on."""
        d = tree(c, images=6, classes=3)
        os.chmod(os.path.join(d, "class_002"), 0)
        r = c.run(["model", "mnist-cnn", "alexnet", "--data", d, "--device", "cpu", "--batch", "1", "--iters", "1",
                   "--warmup", "0", "--no-save", "-q", "--loader-threads", "1"], allow=(2,))
        c.error_mentions(r, "mnist-cnn")
    add("unreadable_class_model", 4, unreadable_class_model, who="user", doc=unreadable_class_model.__doc__)

    def rendezvous_timeout_zero(c: Ctx):
        """--rendezvous-timeout 0: the message states the real lower bound."""
        r = c.run(["model", "resnet18", "--launcher", "torchrun", "--rendezvous-timeout", "0"], allow=(2,))
        c.error_mentions(r, "more than 0")
    add("msg_rendezvous_timeout_zero", 4, rendezvous_timeout_zero, doc=rendezvous_timeout_zero.__doc__)

    def world_size_too_large(c: Ctx):
        """WORLD_SIZE=2^64: said too large, not 'not a whole number'."""
        env = dict(h._TORCH, WORLD_SIZE=TWO_64)
        r = c.run(["allreduce", "--launcher", "torchrun"], env=env, allow=(2,))
        c.error_mentions(r, "too large")
        c.expect(b"not a whole number" not in r.err, "UNEXPECTED", "called not a whole number")
    add("msg_world_size_too_large", 4, world_size_too_large, doc=world_size_too_large.__doc__)

    def rnn_dump_into_file(c: Ctx):
        """rnn --dump onto a regular file: says it is not a folder."""
        c.write("afile", b"x")
        r = c.run(["rnn", "l1t2mb1sic4", "--device", "cpu", "--dump", "afile", "--no-save", "-q"], allow=(2,))
        c.error_mentions(r, "not a folder")
        c.unchanged(c.path("afile"), b"x")
    add("msg_rnn_dump_into_file", 4, rnn_dump_into_file, doc=rnn_dump_into_file.__doc__)

    def data_dump_path_once(c: Ctx):
        """data dump --out into a missing folder: the path is named once."""
        d = tree(c)
        r = c.run(["data", "dump", d, "--out", "nowhere/x.npy"], allow=(2,))
        c.expect(r.err.count(b"nowhere/x.npy") == 1, "UNEXPECTED", f"named {r.err.count(b'nowhere/x.npy')} times")
    add("msg_data_dump_path_once", 4, data_dump_path_once, doc=data_dump_path_once.__doc__)
