//! Tests only: runs the bodies of cnnbench's CUDA kernels on the host, so
//! that a kernel is checked against the CPU's reference before any GPU
//! session runs it. `emu/emu.h` stands in for the CUDA runtime, and
//! `emu/conversions.h` for `prelude.cuh`'s PTX conversions; the rest of the
//! prelude and the program's own source are compiled unchanged by the host's C++
//! compiler (`$CXX`, else `c++`), with a `main` each test writes: load the
//! inputs, launch the kernels as the Rust wrappers do, save the outputs.
//! Without a C++20 compiler the tests say `skipped` and pass.

use super::nvrtc::Program;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

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

/// Whether the host has a C++ compiler that builds `emu.h` (C++20).
pub fn available() -> bool {
    static CHECKED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *CHECKED.get_or_init(|| {
        let ok = Command::new(compiler())
            .args(["--version"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            eprintln!(
                "skipped: no C++ compiler ({}) to emulate kernels",
                compiler()
            );
        }
        ok
    })
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
        let out = Command::new(compiler())
            .current_dir(&dir)
            .args(["-std=c++20", "-O1", "-pthread", "-Wall", "-Werror"])
            .args(["-Wno-unused-function", "-Wno-unused-variable"])
            .args(["main.cpp", "-o", "emu"])
            .output()
            .expect("run the C++ compiler");
        assert!(
            out.status.success(),
            "{} does not compile on the host:\n{}",
            self.program.file,
            String::from_utf8_lossy(&out.stderr)
        );
        let out = Command::new(dir.join("emu"))
            .current_dir(&dir)
            .output()
            .expect("run the emulation");
        assert!(
            out.status.success(),
            "emulating {} failed:\n{}",
            self.program.file,
            String::from_utf8_lossy(&out.stderr)
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

/// NHWC values (`n` images, `c` channels, `hw` pixels) in NCHW order.
pub fn to_nchw(v: &[f32], n: usize, c: usize, hw: usize) -> Vec<f32> {
    let mut out = vec![0.0; v.len()];
    for b in 0..n {
        for px in 0..hw {
            for ch in 0..c {
                out[(b * c + ch) * hw + px] = v[(b * hw + px) * c + ch];
            }
        }
    }
    out
}

/// NCHW values back in NHWC order.
pub fn to_nhwc(v: &[f32], n: usize, c: usize, hw: usize) -> Vec<f32> {
    let mut out = vec![0.0; v.len()];
    for b in 0..n {
        for px in 0..hw {
            for ch in 0..c {
                out[(b * hw + px) * c + ch] = v[(b * c + ch) * hw + px];
            }
        }
    }
    out
}
