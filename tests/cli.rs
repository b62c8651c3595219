//! The `cnnbench` binary as users and other tools see it: the output
//! contract, exit codes, one-line errors, dumps and interrupted runs.

use serde_json::Value;
use std::process::{Command, Output};

/// The binary, with its results store in a temporary folder so tests do
/// not write into the checkout.
fn bin() -> Command {
    let store = std::env::temp_dir().join(format!("cnnbench-tests-{}", std::process::id()));
    let mut c = Command::new(env!("CARGO_BIN_EXE_cnnbench"));
    c.env("CNNBENCH_RESULTS", store);
    c
}

fn cnnbench(args: &[&str]) -> Output {
    bin().args(args).output().expect("running cnnbench")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Exit 2 with one stderr line that says `has`.
fn one_line(o: &Output, has: &str) {
    assert_eq!(o.status.code(), Some(2), "{}", stderr(o));
    let err = stderr(o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(has), "{err}");
}

/// Quick timing options so tests stay fast; timing itself is not tested here.
const QUICK: [&str; 4] = ["--iters", "2", "--warmup", "0"];

#[test]
fn resnet_layer_checks_and_honours_the_json_contract() {
    let mut args = vec![
        "conv",
        "mb16ic64ih56oc64oh56kh3ph1",
        "--check",
        "--format",
        "json",
    ];
    args.extend(QUICK);
    let o = cnnbench(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: Value = serde_json::from_str(&stdout(&o)).expect("stdout is JSON");
    let env = &doc["environment"];
    for key in ["cpu", "threads", "isa", "cnnbench"] {
        assert!(!env[key].is_null(), "environment.{key} missing");
    }
    let records = doc["records"].as_array().unwrap();
    let dirs: Vec<&str> = records.iter().map(|r| r["dir"].as_str().unwrap()).collect();
    assert_eq!(dirs, ["fwd", "bwd-data", "bwd-filter"]);
    for r in records {
        assert_eq!(r["problem"], "mb16ic64ih56oc64oh56kh3ph1");
        assert_eq!(
            (
                r["device"].as_str(),
                r["dtype"].as_str(),
                r["layout"].as_str()
            ),
            (Some("cpu"), Some("f32"), Some("nhwc"))
        );
        assert!(r["algo"].is_string());
        let ms = &r["ms"];
        let (min, med, max) = (
            ms["min"].as_f64().unwrap(),
            ms["median"].as_f64().unwrap(),
            ms["max"].as_f64().unwrap(),
        );
        assert!(0.0 < min && min <= med && med <= max);
        assert!(ms["mean"].is_f64() && ms["stddev"].is_f64());
        assert_eq!(r["runs"], 2);
        // 2*16*56*56*64*64*9 FLOPs over the median.
        let want_gflops = 2.0 * 16.0 * 56.0 * 56.0 * 64.0 * 64.0 * 9.0 / (med * 1e-3) / 1e9;
        assert!((r["gflops"].as_f64().unwrap() / want_gflops - 1.0).abs() < 1e-9);
        assert!(r["peak_fraction"].as_f64().unwrap() > 0.0);
        assert_eq!(r["check"]["passed"], true);
        assert!(r["check"]["rel_err"].as_f64().unwrap() < 1e-5);
    }
}

#[test]
fn csv_has_a_fixed_header_and_one_row_per_algorithm() {
    let mut args = vec![
        "conv",
        "mb2ic8ih9oc16kh3ph1",
        "--algo",
        "all",
        "--dir",
        "fwd",
        "--format",
        "csv",
    ];
    args.extend(QUICK);
    let o = cnnbench(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    let mut lines = text.lines();
    assert_eq!(
        lines.next().unwrap(),
        "problem,dir,device,dtype,layout,algo,ms_min,ms_median,ms_max,ms_mean,ms_stddev,runs,gflops,peak_fraction,check_rel_err,check_passed,kernel,bias,workspace_bytes,cudnn_find_ms"
    );
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), cnnbench_kernels::conv::algorithms().len());
    assert!(rows
        .iter()
        .all(|r| r.starts_with("mb2ic8ih9oc16oh9kh3ph1,fwd,cpu,f32,nhwc,")));
}

#[test]
fn exact_iterations_and_named_algorithms() {
    let o = cnnbench(&[
        "conv",
        "mb1ic4ih6oc4kh3",
        "--algo",
        "ref",
        "--iters",
        "7",
        "--dir",
        "BWD_D",
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let r = &doc["records"][0];
    assert_eq!(
        (r["runs"].as_u64(), r["algo"].as_str(), r["dir"].as_str()),
        (Some(7), Some("ref"), Some("bwd-data"))
    );
    assert!(r["check"].is_null());
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let cases: &[(&[&str], &str)] = &[
        (&["conv", "mb2ic8ih9oc16kh3zz1"], "unknown token 'zz'"),
        (&["conv", "mb2ic0ih9oc16kh3"], "'ic' must be at least 1"),
        (&["conv", "mb2ic8ih9oc16kh3ph-1"], "non-negative number"),
        (&["conv", "g3mb2ic8ih9oc18kh3"], "not divisible by g3"),
        (&["conv", "mb2ic8ih2oc16kh5"], "would be empty"),
        (&["conv", "mb2ic8ih9oc16oh8kh3ph1"], "oh8 does not match"),
        (
            &["conv", "mb100000ic4096ih4096oc4096kh3ph1"],
            "GiB of memory",
        ),
        (
            &["conv", "mb2ic8ih9oc16kh3", "--dir", "up"],
            "unknown direction",
        ),
        (
            &[
                "conv",
                "mb2ic8ih9oc16kh3",
                "--device",
                "cpu",
                "--algo",
                "fft",
            ],
            "unknown algorithm",
        ),
        (
            &[
                "conv",
                "mb2ic8ih9oc16kh3",
                "--device",
                "cpu",
                "--isa",
                "neon",
            ],
            "unknown ISA",
        ),
        (
            &[
                "conv",
                "mb2ic8ih9oc16kh3",
                "--device",
                "cpu",
                "--dtype",
                "f16",
            ],
            "the CPU path runs f32 in nhwc only",
        ),
        (
            &[
                "conv",
                "mb2ic8ih9oc16kh3",
                "--device",
                "cpu",
                "--layout",
                "nchw",
            ],
            "the CPU path runs f32 in nhwc only",
        ),
        (
            &["conv", "mb2ic8ih9oc16kh3", "--dtype", "f64"],
            "unknown dtype 'f64'",
        ),
        (
            &["conv", "mb2ic8ih9oc16kh3", "--layout", "chwn"],
            "unknown layout",
        ),
        (
            &["conv", "mb2ic8ih9oc16kh3", "--workspace-limit", "4Q"],
            "bad byte count",
        ),
        (&["gemm", "10x10"], "bad GEMM size"),
        (&["gemm", "8x8x8", "--trans", "XY"], "bad --trans 'XY'"),
        (
            &["gemm", "8x8x8", "--device", "cpu", "--dtype", "f16"],
            "f32 only",
        ),
        (&["gemm", "8x8x8", "--iters", "0"], "at least 1"),
        (
            &["conv", "mb2ic8ih9oc16kh3", "--threads", "0"],
            "at least 1",
        ),
        (&["conv", "mb2ic8ih9oc16kh3", "--iters", "0"], "at least 1"),
        (
            &["conv", "mb2ic8ih9oc16kh3", "--threads", "100000"],
            "64 per logical CPU",
        ),
        (&["info", "--threads", "100000"], "64 per logical CPU"),
        (&["conv", "--from", "/nonexistent/list.txt"], "cannot read"),
        (&["conv", "--from", "builtin:lenet"], "unknown built-in"),
        (&["conv"], "no problem given"),
    ];
    for (args, needle) in cases {
        let o = cnnbench(args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(
            err.lines().count(),
            1,
            "{args:?} printed more than one line: {err}"
        );
        assert!(
            err.starts_with("cnnbench: error: ") && err.contains(needle),
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"));
    }
}

/// Without a GPU, `--device gpu` says in one line what is missing, and
/// `--device auto` says it fell back to the CPU. (On a GPU machine both
/// use the GPU, and this test checks only that auto says so.)
#[test]
fn no_gpu_is_one_line_and_auto_falls_back_to_the_cpu() {
    let o = cnnbench(&[
        "conv",
        "mb2ic8ih9oc16kh3",
        "--device",
        "gpu",
        "--iters",
        "1",
    ]);
    let err = stderr(&o);
    let auto = cnnbench(&["conv", "mb2ic8ih9oc16kh3", "--iters", "1", "--warmup", "0"]);
    let auto_err = stderr(&auto);
    assert_eq!(auto.status.code(), Some(0), "{auto_err}");
    if o.status.code() == Some(2) {
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("cnnbench: error: --device gpu: no usable GPU: "),
            "{err}"
        );
        assert!(
            auto_err.contains("device auto: no usable GPU"),
            "{auto_err}"
        );
        assert!(auto_err.contains("using the CPU"), "{auto_err}");
        let info = cnnbench(&["info", "--format", "json", "--threads", "1"]);
        let doc: Value = serde_json::from_str(&stdout(&info)).unwrap();
        assert_eq!(doc["gpu"]["usable"], false);
        assert!(doc["gpu"]["reason"]
            .as_str()
            .unwrap()
            .starts_with("no usable GPU"));
    } else {
        assert!(
            auto_err.contains("device auto: using the GPU"),
            "{auto_err}"
        );
    }
}

#[test]
fn gemm_checks_and_honours_the_json_contract() {
    let o = cnnbench(&[
        "gemm", "64x48x32", "33x7x65", "--trans", "TN", "--device", "cpu", "--check", "--format",
        "json", "--iters", "2", "--warmup", "0",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: Value = serde_json::from_str(&stdout(&o)).expect("stdout is JSON");
    let recs = doc["records"].as_array().unwrap();
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[0]["problem"], "64x48x32:TN");
    assert_eq!(recs[0]["dir"], "gemm");
    assert_eq!(recs[0]["runs"], 2);
    for r in recs {
        assert_eq!(r["check"]["passed"], true, "{r}");
        assert!(r["gflops"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn gemm_and_im2col_run_on_avx2_when_asked() {
    let o = cnnbench(&["gemm", "64x48x32", "--device", "cpu", "--isa", "avx3"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(stderr(&o).trim().lines().count(), 1, "{}", stderr(&o));
    if !cnnbench_kernels::Isa::Avx2.is_supported() {
        return;
    }
    let kernels = |args: &[&str]| -> Vec<String> {
        let o = cnnbench(args);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let doc: Value = serde_json::from_str(&stdout(&o)).expect("stdout is JSON");
        doc["records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                assert_eq!(r["check"]["passed"], true, "{r}");
                r["kernel"].as_str().unwrap().to_string()
            })
            .collect()
    };
    let quick = [
        "--check", "--format", "json", "--iters", "1", "--warmup", "0",
    ];
    let mut gemm = vec!["gemm", "600x64x32", "--device", "cpu", "--isa", "avx2"];
    gemm.extend(quick);
    assert_eq!(kernels(&gemm), ["tiled gemm_f32(avx2)"]);
    let mut conv = vec![
        "conv",
        "mb2ic8ih9oc16oh9kh3ph1",
        "--device",
        "cpu",
        "--isa",
        "avx2",
        "--algo",
        "im2col_gemm",
        "--dir",
        "fwd",
    ];
    conv.extend(quick);
    assert_eq!(kernels(&conv), ["im2col+gemm_f32(avx2)"]);
}

#[test]
fn dump_writes_logical_order_npy_that_recomputes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("d");
    let mut args = vec![
        "conv",
        "g2mb2ic4ih5iw6oc6kh3kw2sh2ph1",
        "--dump",
        out.to_str().unwrap(),
    ];
    args.extend(QUICK);
    let o = cnnbench(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let read = |name: &str| -> (Vec<u64>, Vec<f32>) {
        let bytes = std::fs::read(out.join(format!("{name}.npy"))).unwrap();
        let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
        (npy.shape().to_vec(), npy.into_vec::<f32>().unwrap())
    };
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("problem.json")).unwrap()).unwrap();
    assert_eq!(meta["problem"], "g2mb2ic4ih5iw6oc6oh3ow4kh3kw2sh2ph1");
    let (ss, src) = read("src");
    let (ws, wei) = read("wei");
    let (_, bias) = read("bias");
    let (ds, dst) = read("dst");
    assert_eq!(
        (ss, ws, ds.clone()),
        (vec![2, 4, 5, 6], vec![6, 2, 3, 2], vec![2, 6, 3, 4])
    );
    // Recompute dst from the dumped tensors, in NCHW / KCRS, as another
    // framework would.
    let (icg, ocg) = (2usize, 3usize);
    for n in 0..2 {
        for k in 0..6 {
            for oh in 0..3usize {
                for ow in 0..4usize {
                    let mut acc = bias[k] as f64;
                    let gi = k / ocg;
                    for c in 0..icg {
                        for r in 0..3usize {
                            for s in 0..2usize {
                                let (ih, iw) =
                                    ((oh * 2 + r) as isize - 1, (ow * 2 + s) as isize - 1);
                                if ih < 0 || iw < 0 || ih >= 5 || iw >= 6 {
                                    continue;
                                }
                                let x = src
                                    [((n * 4 + gi * icg + c) * 5 + ih as usize) * 6 + iw as usize];
                                acc += x as f64 * wei[((k * icg + c) * 3 + r) * 2 + s] as f64;
                            }
                        }
                    }
                    let got = dst[((n * 6 + k) * 3 + oh) * 4 + ow];
                    assert!(
                        (got as f64 - acc).abs() < 1e-4,
                        "dst[{n},{k},{oh},{ow}] = {got}, want {acc}"
                    );
                }
            }
        }
    }
    for f in ["diff_dst", "diff_src", "diff_wei", "diff_bias"] {
        assert!(out.join(format!("{f}.npy")).exists(), "{f}.npy missing");
    }
}

#[test]
fn info_reports_cpu_isa_peak_and_build() {
    let o = cnnbench(&["info", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let i: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(i["cpu"].is_string() && i["isa_detected"].is_string());
    assert!(i["cnnbench"]["version"].is_string() && i["cnnbench"]["git"].is_string());
    let peaks = i["peak"].as_array().unwrap();
    assert!(!peaks.is_empty());
    assert!(peaks
        .iter()
        .all(|p| p["gflops_1_thread"].as_f64().unwrap() > 0.0));
    // The cache the kernels count on: the largest reported, at most 32 MiB.
    let (largest, counted) = (
        i["cache"]["largest_bytes"].as_u64().unwrap(),
        i["cache"]["counted_bytes"].as_u64().unwrap(),
    );
    assert!(counted > 0 && counted <= 32 << 20);
    assert!(largest == 0 || counted == largest.min(32 << 20));
}

#[test]
fn an_interrupted_run_keeps_its_finished_records() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("partial.json");
    let child = bin()
        .args([
            "conv",
            "mb1ic32ih32oc32kh3",
            "mb1ic4ih9oc4kh3",
            "--min-time",
            "30",
            "--iters",
            "1",
        ])
        .args([
            "--algo",
            "ref",
            "--format",
            "json",
            "--out",
            out.to_str().unwrap(),
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The first record needs 30 s; interrupt well before.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert!(stderr(&o).contains("interrupted"));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert!(
        doc["records"].as_array().unwrap().is_empty(),
        "the unfinished record is not kept"
    );

    // With a short budget per record, interrupting mid-run keeps the finished ones.
    let child = bin()
        .args([
            "conv",
            "mb1ic4ih8oc4kh3",
            "--dir",
            "fwd",
            "--min-time",
            "0.2",
            "--algo",
            "ref",
        ])
        .args([
            "mb1ic4ih9oc4kh3",
            "mb1ic4ih10oc4kh3",
            "mb1ic4ih11oc4kh3",
            "mb1ic4ih12oc4kh3",
        ])
        .args(["--format", "csv", "--out", out.to_str().unwrap()])
        .args(["--results", dir.path().join("store").to_str().unwrap()])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700));
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let o = child.wait_with_output().unwrap();
    let kept = std::fs::read_to_string(&out).unwrap().lines().count() - 1;
    assert!(o.status.code() == Some(130) || kept == 5, "{}", stderr(&o));
    assert!(kept >= 1, "kept {kept} records");
    // The results store holds the same records, and says whether the run
    // finished.
    let files: Vec<_> = std::fs::read_dir(dir.path().join("store"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
    assert_eq!(doc["format_version"], 1);
    assert_eq!(doc["subcommand"], "conv");
    assert_eq!(doc["records"].as_array().unwrap().len(), kept);
    assert_eq!(doc["complete"], o.status.code() != Some(130));
    if o.status.code() == Some(130) {
        assert!(stderr(&o).contains("kept the"), "{}", stderr(&o));
    }
}

/// Waits (up to 60 s) until `ready` holds: a run has installed its signal
/// handlers once it has written its first file.
fn wait_until(ready: impl Fn() -> bool) {
    let t0 = std::time::Instant::now();
    while !ready() {
        assert!(t0.elapsed().as_secs() < 60, "the run never got going");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Sends `sig` (`-TERM`, `-HUP`, ...) to `pid` with kill(1).
fn kill(sig: &str, pid: u32) {
    assert!(Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success());
}

#[test]
fn sigterm_and_sighup_stop_like_ctrl_c_with_their_own_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("partial.json");
    for (sig, code, said) in [
        ("-TERM", 143, "stopped by SIGTERM"),
        ("-HUP", 129, "stopped by SIGHUP"),
    ] {
        let _ = std::fs::remove_file(&out);
        let child = bin()
            .args(["conv", "mb1ic4ih8oc4kh3", "mb1ic32ih32oc32kh3"])
            .args([
                "--dir",
                "fwd",
                "--algo",
                "ref",
                "--min-time",
                "30",
                "--iters",
                "1",
            ])
            .args([
                "--format",
                "json",
                "--out",
                out.to_str().unwrap(),
                "--no-save",
            ])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // --out is first written (empty) once the handlers are in place.
        wait_until(|| out.exists());
        kill(sig, child.id());
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(code), "{sig}: {}", stderr(&o));
        assert!(stderr(&o).contains(said), "{}", stderr(&o));
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        assert!(doc["records"].is_array(), "{sig}: --out is valid JSON");
        assert_eq!(doc["complete"], false, "{sig}: a stopped run says so");
    }

    // A sweep passes the signal on to its child run and stops promptly.
    let child = bin()
        .args([
            "conv",
            "mb1ic32ih32oc32kh3",
            "--dir",
            "fwd",
            "--algo",
            "ref",
        ])
        .args(["--min-time", "30", "--iters", "1", "--threads", "1,2"])
        .args(["--results", dir.path().join("store").to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The child's store file appears once it is running.
    let store = dir.path().join("store");
    wait_until(|| std::fs::read_dir(&store).is_ok_and(|mut d| d.next().is_some()));
    let t0 = std::time::Instant::now();
    kill("-TERM", child.id());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(143), "{}", stderr(&o));
    assert!(t0.elapsed().as_secs() < 10, "stopped in {:?}", t0.elapsed());
}

#[test]
fn a_new_dump_leaves_no_earlier_tensors_behind() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("dump");
    let dump = |dirs: &str| {
        let o = cnnbench(&[
            "conv",
            "mb1ic4ih8oc4kh3",
            "--dir",
            dirs,
            "--iters",
            "2",
            "--device",
            "cpu",
            "--dump",
            d.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    };
    dump("all");
    assert!(d.join("diff_src.npy").exists());
    std::fs::write(d.join("notes.txt"), "mine").unwrap();
    dump("fwd");
    assert!(
        !d.join("diff_src.npy").exists(),
        "an earlier problem's tensor was left"
    );
    assert!(d.join("dst.npy").exists() && d.join("problem.json").exists());
    assert_eq!(
        std::fs::read_to_string(d.join("notes.txt")).unwrap(),
        "mine"
    );
}

#[test]
fn a_sweep_checks_every_item_before_any_child_runs() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    for (list, named) in [
        (["--threads", "1,abc"], "--threads item 'abc' of '1,abc'"),
        (["--dtype", "f32,f99"], "--dtype item 'f99'"),
    ] {
        let o = cnnbench(&[
            "conv",
            "mb1ic4ih8oc4kh3",
            "--device",
            "cpu",
            "--results",
            store.to_str().unwrap(),
            list[0],
            list[1],
        ]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
        assert!(stderr(&o).contains(named), "{}", stderr(&o));
        assert!(!store.exists(), "a child ran before the bad item was found");
    }
}

#[test]
fn odd_input_is_still_one_line() {
    // A negative number: no four-line tip about `-- -1`.
    one_line(
        &cnnbench(&["conv", "mb1ic4ih8oc4kh3", "--iters", "-1"]),
        "negative",
    );
    // A bad variable is named as the variable, not as an option.
    let o = bin()
        .env("CNNBENCH_THREADS", "abc")
        .args(["conv", "mb1ic4ih8oc4kh3"])
        .output()
        .unwrap();
    one_line(&o, "CNNBENCH_THREADS='abc'");
    let o = bin()
        .env("CNNBENCH_ISA", "sse9")
        .args(["info"])
        .output()
        .unwrap();
    one_line(&o, "CNNBENCH_ISA='sse9'");
    // Control characters are escaped; very long input is cut.
    one_line(&cnnbench(&["conv", "mb1\u{1b}[31mic4"]), "\\u{1b}");
    let long = format!("mb{}ic4", "9".repeat(5000));
    let o = cnnbench(&["conv", &long]);
    one_line(&o, "more characters)");
    assert!(stderr(&o).len() < 1000, "{}", stderr(&o).len());
    // Absurd amounts: refused in one line naming the cap.
    one_line(
        &cnnbench(&["conv", "mb1ic4ih8oc4kh3", "--min-time", "1e300"]),
        "86400 seconds",
    );
    one_line(
        &cnnbench(&["conv", "mb1ic4ih8oc4kh3", "--iters", "18446744073709551615"]),
        "1000000 runs",
    );
    // A name longer than `format!` can pad is still printed.
    let named = format!("mb1ic4ih8oc4kh3n\"{}\"", "x".repeat(70_000));
    let o = cnnbench(&[
        "conv",
        &named,
        "--dir",
        "fwd",
        "--iters",
        "1",
        "--device",
        "cpu",
        "--no-save",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // A UTF-8 byte order mark before the first problem is accepted.
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("bom.txt");
    std::fs::write(&list, "\u{feff}mb1ic4ih8oc4kh3\n").unwrap();
    let o = cnnbench(&[
        "conv",
        "--from",
        list.to_str().unwrap(),
        "--dir",
        "fwd",
        "--iters",
        "2",
        "--device",
        "cpu",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn the_memory_check_honours_the_process_limits() {
    // Under `ulimit -v` (RLIMIT_AS), a problem that fits in the machine's
    // memory but not under the limit is refused in one line naming the
    // limit, instead of aborting at the allocation.
    let o = Command::new("sh")
        .args(["-c", "ulimit -v 1500000 && exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_cnnbench"))
        .args([
            "conv",
            "mb512ic256ih56oc256oh56kh3ph1",
            "--device",
            "cpu",
            "--no-save",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("RLIMIT_AS (ulimit -v)"), "{err}");
}

#[test]
fn a_closed_stdout_ends_quietly_and_a_full_one_is_one_line() {
    // The reader is gone before cnnbench writes (as after `| head`).
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let o = bin().args(["info"]).stdout(writer).output().unwrap();
    assert_eq!(o.status.code(), Some(141), "{}", stderr(&o));
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));

    if std::path::Path::new("/dev/full").exists() {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let o = bin().args(["info"]).stdout(full).output().unwrap();
        assert_eq!(o.status.code(), Some(2));
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("writing to stdout"), "{err}");
    }
}

#[test]
fn every_run_lands_in_the_results_store_unless_told_not_to() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("r");
    let s = store.to_str().unwrap();
    let o = cnnbench(&[
        "conv",
        "mb1ic4ih8oc4kh3",
        "--dir",
        "fwd",
        "--iters",
        "2",
        "--results",
        s,
        "-q",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = cnnbench(&[
        "gemm",
        "8x8x8",
        "--iters",
        "2",
        "--results",
        s,
        "-q",
        "--price-per-hour",
        "1.5",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = cnnbench(&["gemm", "8x8x8", "--iters", "2", "--results", s, "--no-save"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mut docs: Vec<Value> = std::fs::read_dir(&store)
        .unwrap()
        .map(|e| {
            serde_json::from_str(&std::fs::read_to_string(e.unwrap().path()).unwrap()).unwrap()
        })
        .collect();
    docs.sort_by_key(|d| d["subcommand"].as_str().unwrap().to_string());
    assert_eq!(docs.len(), 2);
    assert_eq!(docs[0]["subcommand"], "conv");
    assert_eq!(docs[0]["complete"], true);
    assert_eq!(docs[0]["records"][0]["dir"], "fwd");
    assert!(docs[0]["environment"]["command"]
        .as_str()
        .unwrap()
        .contains("conv"));
    assert_eq!(docs[1]["subcommand"], "gemm");
    assert_eq!(docs[1]["environment"]["price"]["usd_per_hour"], 1.5);
    let bad = cnnbench(&["gemm", "8x8x8", "--results", s, "--instance", "nope"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("cannot read"), "{}", stderr(&bad));
}

#[test]
fn sweeps_compare_and_report_work_through_child_processes() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let s = store.to_str().unwrap();
    let quick = [
        "--dir", "fwd", "--iters", "2", "--warmup", "0", "--device", "cpu",
    ];

    // A sweep over threads and batch: one child run (and store file) each.
    let mut args = vec![
        "conv",
        "mb1ic8ih10oc8kh3",
        "--threads",
        "1,2",
        "--batch",
        "1,2",
    ];
    args.extend(quick);
    args.extend(["--format", "json", "--results", s]);
    let o = cnnbench(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let sweep = doc["sweep"].as_array().unwrap();
    assert_eq!(sweep.len(), 4);
    assert_eq!(sweep[3]["config"], "threads=2 batch=2");
    assert_eq!(sweep[3]["environment"]["threads"], 2);
    assert_eq!(sweep[3]["records"][0]["problem"], "mb2ic8ih10oc8oh8kh3");
    assert_eq!(doc["complete"], true);
    assert_eq!(std::fs::read_dir(&store).unwrap().count(), 4);

    // compare: two variants through the environment, with ratios.
    let mut args = vec![
        "compare",
        "--variant",
        "one:CNNBENCH_THREADS=1",
        "--variant",
        "two:CNNBENCH_THREADS=2",
        "--",
        "conv",
        "mb1ic8ih10oc8kh3",
    ];
    args.extend(quick);
    args.extend(["--results", s]);
    let o = cnnbench(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("one ms") && out.contains("two / one"), "{out}");
    let bad = cnnbench(&[
        "compare",
        "--variant",
        "x:A=1",
        "--",
        "conv",
        "mb1ic8ih10oc8kh3",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("at least two runs"));
    // Refused before any run: a --cudnn folder without cuDNN, twin names.
    let no_cudnn = dir.path().to_str().unwrap();
    for (args, said) in [
        (
            vec!["--cudnn", no_cudnn, "--cudnn", no_cudnn],
            "holds no cuDNN",
        ),
        (
            vec!["--variant", "a:A=1", "--variant", "a:A=2"],
            "two runs are named 'a'",
        ),
    ] {
        let mut all = vec!["compare"];
        all.extend(args);
        all.extend(["--", "conv", "mb1ic8ih10oc8kh3"]);
        let o = cnnbench(&all);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains(said), "{}", stderr(&o));
    }

    // report: the six runs, labelled by what differs, with charts.
    let md = dir.path().join("out/report.md");
    let charts = dir.path().join("out/charts");
    let o = cnnbench(&[
        "report",
        s,
        "--out",
        md.to_str().unwrap(),
        "--charts",
        charts.to_str().unwrap(),
        "--baseline",
        "one",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(&md).unwrap();
    assert!(text.contains("## Speedup over `one`"), "{text}");
    assert!(text.contains("| threads=2 batch=2 |"), "{text}");
    assert!(
        text.contains("![GFLOP/s per problem](charts/gflops.svg)"),
        "{text}"
    );
    assert!(charts.join("gflops.svg").exists());

    // A link cycle and a second path to the store end and count once; a
    // torn file is listed, and the report still covers the rest (exit 1).
    std::os::unix::fs::symlink(&store, store.join("loop")).unwrap();
    std::fs::write(store.join("torn.json"), "{\"records\": [").unwrap();
    let o = cnnbench(&["report", s, s]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("6 runs"), "{text}");
    assert!(text.contains("## Not read"), "{text}");
    assert!(stderr(&o).contains("not read: '"), "{}", stderr(&o));
    std::fs::remove_file(store.join("torn.json")).unwrap();

    // --batch max: the largest batch that fits, found without allocating it.
    let o = cnnbench(&[
        "conv",
        "mb1ic8ih10oc8kh3",
        "--batch",
        "max",
        "--dir",
        "fwd",
        "--iters",
        "1",
        "--device",
        "cpu",
        "--no-save",
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let problem = doc["records"][0]["problem"].as_str().unwrap();
    let mb: usize = problem[2..problem.find('i').unwrap()].parse().unwrap();
    assert!(mb > 1000, "{problem}");
}

#[test]
fn bytes_that_are_not_text_and_libraries_that_are_not_cuda_are_one_line() {
    use std::os::unix::ffi::OsStrExt;
    // A non-UTF-8 argument or variable.
    let o = bin()
        .arg("conv")
        .arg(std::ffi::OsStr::from_bytes(b"mb1ic4\xffih8"))
        .output()
        .unwrap();
    one_line(&o, "invalid UTF-8");
    let o = bin()
        .env("CNNBENCH_THREADS", std::ffi::OsStr::from_bytes(b"\xff"))
        .arg("info")
        .output()
        .unwrap();
    one_line(&o, "CNNBENCH_THREADS");
    // A newline in an option's value is escaped, not a cut line.
    one_line(
        &cnnbench(&["conv", "mb1ic4ih8oc4kh3", "--format", "js\non"]),
        "'js\\non'",
    );

    // Another library under CUDA's names: it loads, but has none of the
    // functions cudarc would call (and panic on).
    let Some(libm) = [
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/usr/lib64/libm.so.6",
        "/lib64/libm.so.6",
    ]
    .into_iter()
    .find(|p| std::path::Path::new(p).exists()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "libcuda.so",
        "libcuda.so.1",
        "libcudnn.so.9",
        "libcublas.so",
        "libnvrtc.so",
    ] {
        std::fs::copy(libm, dir.path().join(name)).unwrap();
    }
    let o = bin()
        .env("LD_LIBRARY_PATH", dir.path())
        .args(["conv", "mb1ic4ih8oc4kh3", "--device", "gpu"])
        .output()
        .unwrap();
    one_line(&o, "that loaded has no cuInit");
}

#[test]
fn dev_stdout_appends_and_report_skips_what_is_not_a_file() {
    // `--out /dev/stdout` after lines the shell already wrote to a file:
    // those lines stay.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.txt");
    let o = Command::new("sh")
        .arg("-c")
        .arg("{ echo header; \"$0\" conv mb1ic4ih8oc4kh3 --dir fwd --iters 1 --warmup 0 --device cpu --no-save --format csv --out /dev/stdout; } > \"$1\"")
        .arg(env!("CARGO_BIN_EXE_cnnbench"))
        .arg(&log)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.starts_with("header\nproblem,"), "{text}");

    // A FIFO named like a results file is listed, never read (it would
    // block the report forever).
    let runs = dir.path().join("runs");
    std::fs::create_dir(&runs).unwrap();
    let fifo = std::ffi::CString::new(runs.join("stuck.json").to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let o = cnnbench(&["report", runs.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("not a regular file"), "{}", stderr(&o));
}

/// `cnnbench` with none of the launchers' variables set.
fn unlaunched(args: &[&str]) -> Output {
    let mut c = bin();
    for v in [
        "RANK",
        "WORLD_SIZE",
        "LOCAL_RANK",
        "MASTER_ADDR",
        "MASTER_PORT",
        "SLURM_PROCID",
        "SLURM_NTASKS",
        "SLURM_STEP_NUM_TASKS",
        "SLURM_LOCALID",
        "SLURM_JOB_NODELIST",
        "SLURM_STEP_NODELIST",
        "SLURM_JOB_ID",
    ] {
        c.env_remove(v);
    }
    c.args(args).output().expect("running cnnbench")
}

#[test]
fn multi_gpu_options_fail_in_one_line_without_gpus_or_nccl() {
    // No GPU here (or no NCCL): refused before any model runs.
    for (args, has) in [
        (&["model", "resnet18", "--gpus", "2"][..], "--gpus 2: "),
        (
            &["model", "resnet18", "--gpus", "0"],
            "--gpus 0: expected 1 to 64 GPUs",
        ),
        (
            &["model", "resnet18", "--gpus", "1,1"],
            "device 1 is listed twice",
        ),
        (&["allreduce"], "allreduce: "),
        (&["allreduce", "--gpus", "2"], "--gpus 2: "),
        (&["allreduce", "--sizes", "0"], "--sizes '0'"),
        (
            &["allreduce", "--dtype", "tf32"],
            "NCCL all-reduces f32, f16 or bf16",
        ),
        (&["allreduce", "--placement", "x"], "--placement 'x'"),
        (
            &["model", "resnet18", "--gpus", "2", "--launcher", "auto"],
            "cannot be used with",
        ),
        (
            &["model", "resnet18", "resnet50", "--launcher", "auto"],
            "one model at a time",
        ),
        (
            &["model", "resnet18", "--rendezvous-timeout", "5"],
            "--launcher",
        ),
        (
            &["model", "resnet18", "--launcher", "auto"],
            "neither torchrun's variables",
        ),
    ] {
        let o = unlaunched(args);
        one_line(&o, has);
    }
    // A launcher's variables, one of them wrong.
    let o = bin()
        .args(["model", "resnet18", "--launcher", "torchrun"])
        .env("RANK", "4")
        .env("WORLD_SIZE", "4")
        .env("LOCAL_RANK", "0")
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", "29500")
        .output()
        .expect("running cnnbench");
    one_line(&o, "RANK=4");
}
