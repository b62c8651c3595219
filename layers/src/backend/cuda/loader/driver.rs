//! The driver library, `libcuda.so.1`. cudarc's driver layer calls it
//! (its contexts, streams, modules and launches are used throughout), and
//! loads it by trying `libcuda.so` first. This opens `libcuda.so.1` by our
//! rules before cudarc does: where `libcuda.so` is the usual link to the
//! same file, the loader hands cudarc this one; where it is another file,
//! the GPU path is refused in one line naming both.

use super::{file_of, one_line, same_path, LibraryInfo, LoadError};
use libloading::Library;
use std::ffi::c_int;
use std::path::PathBuf;
use std::sync::OnceLock;

pub const SONAME: &str = "libcuda.so.1";

struct Loaded {
    file: PathBuf,
    version: Option<i32>,
    // Kept open for the life of the process, so cudarc finds it open.
    _lib: Library,
}

fn loaded() -> &'static Result<Loaded, LoadError> {
    static LIB: OnceLock<Result<Loaded, LoadError>> = OnceLock::new();
    LIB.get_or_init(|| {
        let (lib, _) = super::open(&[SONAME])?;
        let file = file_of(&lib, "cuInit").unwrap_or_else(|| PathBuf::from(SONAME));
        // SAFETY: the driver's declaration; an out-pointer to a local, no
        // cuInit needed.
        let version = unsafe {
            lib.get::<unsafe extern "C" fn(*mut c_int) -> c_int>(b"cuDriverGetVersion\0")
                .ok()
                .and_then(|f| {
                    let mut v = 0;
                    (f(&mut v) == 0).then_some(v)
                })
        };
        Ok(Loaded {
            file,
            version,
            _lib: lib,
        })
    })
}

/// Why the driver library did not load by our rules, or `None`.
pub fn driver_load_error() -> Option<LoadError> {
    loaded().as_ref().err().cloned()
}

/// Opens the driver by our rules, then checks that cudarc's driver layer
/// (loaded here if not yet) uses that same file. One line when there is no
/// driver, or when cudarc opened another file.
pub fn driver_missing() -> Option<String> {
    let ours = match loaded() {
        Ok(l) => l,
        Err(LoadError::NotFound(_)) => {
            return Some(format!(
                "the NVIDIA driver library ({SONAME}) was not found"
            ))
        }
        Err(LoadError::Unusable(e)) => return Some(e.clone()),
    };
    // SAFETY: `is_culib_present` only tries `dlopen` on cudarc's names;
    // `culib` then loads the first that opens (present: the one above at
    // the least), and `get` only looks a name up.
    let theirs = unsafe {
        if !cudarc::driver::sys::is_culib_present() {
            return Some(format!(
                "the NVIDIA driver library opened as {} but not under cudarc's names",
                ours.file.display()
            ));
        }
        file_of(cudarc::driver::sys::culib(), "cuInit")
    };
    match theirs {
        Some(t) if !same_path(&t, &ours.file) => Some(one_line(&format!(
            "two NVIDIA driver libraries: {} ({SONAME}) and {} (found as libcuda.so first); \
             remove the stray one from the library path",
            ours.file.display(),
            t.display()
        ))),
        _ => None,
    }
}

/// The driver as loaded, for `info` and records; its version is the CUDA
/// version it supports (13000 = 13.0).
pub(super) fn info() -> LibraryInfo {
    match loaded() {
        Ok(l) => {
            let v = l.version.map_or("unknown".into(), |v| {
                format!("CUDA {}.{}", v / 1000, (v % 1000) / 10)
            });
            LibraryInfo::loaded("NVIDIA driver", SONAME, &l.file, v)
        }
        Err(e) => LibraryInfo::failed("NVIDIA driver", SONAME, e.to_string()),
    }
}
