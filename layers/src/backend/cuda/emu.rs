//! Tests only: runs the bodies of cnnbench's CUDA kernels on the host, so
//! that a kernel is checked against the CPU's reference before any GPU
//! session runs it. `emu/emu.h` stands in for the CUDA runtime, and
//! `emu/conversions.h` for `prelude.cuh`'s PTX conversions; the rest of the
//! prelude and the program's own source are compiled unchanged by the host's C++
//! compiler (`$CXX`, else `c++`), with a `main` each test writes: load the
//! inputs, launch the kernels with the arguments the Rust wrappers pass
//! ([`render`]), save the outputs. Builds use ThreadSanitizer where the
//! compiler has it, so a missing barrier is a reported race; a program
//! that hangs (a thread skipped a barrier) is killed after [`DEADLINE`].
//! Without a C++20 compiler the tests say `skipped` and pass.

use super::nvrtc::{Arg, Program};
use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

const EMU_H: &str = include_str!("emu/emu.h");
const CONVERSIONS_H: &str = include_str!("emu/conversions.h");

/// prelude.cuh with its device conversions (inline PTX) replaced by
/// `conversions.h`'s host ones.
fn host_prelude() -> String {
    let (begin, end) = ("// device conversions: begin", "// device conversions: end");
    let p = super::nvrtc::PRELUDE;
    let (a, b) = (p.find(begin), p.find(end));
    let (Some(a), Some(b)) = (a, b) else {
        panic!("prelude.cuh lacks the '{begin}' and '{end}' markers");
    };
    format!("{}{CONVERSIONS_H}{}", &p[..a], &p[b..])
}

/// One emulated run: `program`'s source, a `main` body, input files
/// (name, values) and output files (name, length), all little-endian f32.
pub struct EmuRun<'a> {
    pub program: &'a Program,
    pub main: String,
    pub inputs: Vec<(String, Vec<f32>)>,
    pub outputs: Vec<(String, usize)>,
}

fn compiler() -> String {
    std::env::var("CXX").unwrap_or_else(|_| "c++".into())
}

/// Flags of every emulation build. ThreadSanitizer turns a missing
/// `__syncthreads()` into a reported race (and a failing test) where the
/// host threads' timing alone would hide it; it is used where the
/// compiler has it.
fn flags() -> Option<&'static [&'static str]> {
    const BASE: &[&str] = &["-std=c++20", "-O1", "-pthread"];
    const TSAN: &[&str] = &["-std=c++20", "-O1", "-pthread", "-fsanitize=thread"];
    static FLAGS: std::sync::OnceLock<Option<&'static [&'static str]>> = std::sync::OnceLock::new();
    *FLAGS.get_or_init(|| {
        // What emu.h needs: <barrier> (C++20), _Float16, threads.
        let probe = "#include <barrier>\n#include <thread>\n\
                     int main() { std::barrier<> b(1); b.arrive_and_wait(); \
                     _Float16 h = (_Float16)1.0f; std::thread t([]{}); t.join(); \
                     return (int)h - 1; }\n";
        let dir = std::env::temp_dir().join(format!("cnnbench-emu-probe-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        std::fs::write(dir.join("p.cpp"), probe).ok()?;
        let works = |flags: &[&str]| {
            Command::new(compiler())
                .current_dir(&dir)
                .args(flags)
                .args(["p.cpp", "-o", "p"])
                .output()
                .is_ok_and(|o| o.status.success())
                && Command::new(dir.join("p"))
                    .output()
                    .is_ok_and(|o| o.status.success())
        };
        let found = [TSAN, BASE].into_iter().find(|f| works(f));
        let _ = std::fs::remove_dir_all(&dir);
        if found.is_none() {
            eprintln!(
                "skipped: no C++20 compiler with <barrier> and _Float16 ({}) to emulate kernels",
                compiler()
            );
        }
        found
    })
}

/// Whether the host can build the emulation (a C++20 compiler with
/// `<barrier>` and `_Float16`).
pub fn available() -> bool {
    flags().is_some()
}

/// The most an emulated program may run: a thread that skips a
/// `__syncthreads()` leaves the others waiting at the barrier for ever.
const DEADLINE: std::time::Duration = std::time::Duration::from_secs(120);

/// Kernel arguments as C++ literals, in order (pointers are the test's to
/// write): what a launch passes after its pointers.
pub(crate) fn render(args: &[Arg]) -> String {
    args.iter()
        .map(|a| match a {
            Arg::Ptr(_) => panic!("render the pointers by name"),
            Arg::U64(v) => format!("{v}ull"),
            Arg::I32(v) => format!("{v}"),
            // Debug prints the shortest text that reads back as the same
            // f32.
            Arg::F32(v) => format!("{v:?}f"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl EmuRun<'_> {
    /// Compiles and runs; the outputs in the order given. Panics with the
    /// compiler's or the program's message on failure.
    pub fn run(&self) -> Vec<Vec<f32>> {
        static RUNS: AtomicUsize = AtomicUsize::new(0);
        let dir: PathBuf = std::env::temp_dir().join(format!(
            "cnnbench-emu-{}-{}",
            std::process::id(),
            RUNS.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let write = |name: &str, bytes: &[u8]| {
            std::fs::write(dir.join(name), bytes).expect("write a test file")
        };
        write("emu.h", EMU_H.as_bytes());
        write("prelude.cuh", host_prelude().as_bytes());
        write(self.program.file, self.program.source.as_bytes());
        let main = format!(
            "#include \"emu.h\"\n#include \"prelude.cuh\"\n#include \"{}\"\n\
             int main() {{\n{}\nreturn 0;\n}}\n",
            self.program.file, self.main
        );
        write("main.cpp", main.as_bytes());
        for (name, v) in &self.inputs {
            let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            write(name, &bytes);
        }
        let flags = flags().expect("emu::available() first");
        let out = Command::new(compiler())
            .current_dir(&dir)
            .args(flags)
            .args(["main.cpp", "-o", "emu"])
            .output()
            .expect("run the C++ compiler");
        assert!(
            out.status.success(),
            "{} does not compile on the host (in {}):\n{}",
            self.program.file,
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let mut child = Command::new(dir.join("emu"))
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run the emulation");
        let start = Instant::now();
        let status = loop {
            if let Some(st) = child.try_wait().expect("wait for the emulation") {
                break st;
            }
            if start.elapsed() > DEADLINE {
                let _ = child.kill();
                panic!(
                    "emulating {} hung for {DEADLINE:?}: a thread skipped a __syncthreads()?",
                    self.program.file
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        assert!(
            status.success(),
            "emulating {} failed ({status}; in {}):\n{err}",
            self.program.file,
            dir.display()
        );
        let results = self
            .outputs
            .iter()
            .map(|(name, len)| {
                let bytes = std::fs::read(dir.join(name)).expect("an output file");
                assert_eq!(bytes.len(), len * 4, "{name}");
                bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect()
            })
            .collect();
        let _ = std::fs::remove_dir_all(&dir);
        results
    }
}

/// The C++ storage type for a kernel suffix (`f32`, `f16`, `bf16`).
pub fn storage_type(suffix: &str) -> &'static str {
    match suffix {
        "f32" => "F32",
        "f16" => "F16",
        "bf16" => "BF16",
        _ => panic!("unknown storage suffix {suffix}"),
    }
}
