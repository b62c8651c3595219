//! Which NVIDIA library files this process loads, and from where.
//!
//! cudarc's loader tries the unversioned name first (`libcudnn.so`), so a
//! system install with `-dev` links wins over the folder a user put first
//! on `LD_LIBRARY_PATH` (pip's wheels ship only `libcudnn.so.9`), and
//! cuDNN's sub-libraries may then come from another install. Here every
//! library is loaded by its versioned soname from the first folder on
//! `LD_LIBRARY_PATH` that holds it (by its full path, so nothing else can
//! answer to the name), else by the soname through the system's search
//! (`ld.so.cache`, the default folders). cuDNN, cuBLAS, NVRTC and NCCL are
//! then called through tables of our own ([`cudnn_sys`], [`cublas_sys`],
//! [`nvrtc_sys`], [`nccl_sys`]); the driver stays with cudarc, which finds
//! the file loaded here already open, and is refused if it opened another.

#[macro_use]
mod api;
pub mod cublas_sys;
pub mod cudnn_sys;
mod driver;
pub mod nccl_sys;
pub mod nvrtc_sys;
mod objects;
#[cfg(test)]
mod tests;

pub use driver::{driver_load_error, driver_missing};

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One NVIDIA library as this process loaded it (or could not), for
/// `info`, the GPU preamble and every GPU record's environment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LibraryInfo {
    /// `cuDNN`, `cuBLAS`, ...
    pub name: String,
    /// The soname it was loaded by, e.g. `libcudnn.so.9`.
    pub soname: String,
    /// The file that answers to it, as loaded (e.g.
    /// `/usr/lib/x86_64-linux-gnu/libcudnn.so.9`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Its own version, as it reports it (`major.minor.patch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Why it is not loaded (or not usable), in one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl LibraryInfo {
    pub(crate) fn loaded(name: &str, soname: &str, file: &Path, version: String) -> LibraryInfo {
        LibraryInfo {
            name: name.into(),
            soname: soname.into(),
            file: Some(file.display().to_string()),
            version: Some(version),
            error: None,
        }
    }

    pub(crate) fn failed(name: &str, soname: &str, error: String) -> LibraryInfo {
        LibraryInfo {
            name: name.into(),
            soname: soname.into(),
            file: None,
            version: None,
            error: Some(error),
        }
    }

    /// `cuDNN 9.19.0 (/path/libcudnn.so.9)`, or `cuDNN: why not`.
    pub fn describe(&self) -> String {
        match (&self.version, &self.file, &self.error) {
            (_, _, Some(e)) => format!("{}: {e}", self.name),
            (Some(v), Some(f), None) => format!("{} {v} ({f})", self.name),
            _ => format!("{}: unknown", self.name),
        }
    }
}

/// Why a library is not usable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoadError {
    /// No file answers to its soname.
    NotFound(String),
    /// A file loaded but is not usable: not that library, too old, or a
    /// mixed install.
    Unusable(String),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::NotFound(s) | LoadError::Unusable(s) => f.write_str(s),
        }
    }
}

/// Every NVIDIA library cnnbench uses, loaded here if not already: the
/// driver, cuDNN, cuBLAS (and cuBLASLt beside it), NVRTC and NCCL. Needs
/// no GPU or driver: each library answers its version without one.
pub fn libraries() -> Vec<LibraryInfo> {
    let mut all = vec![driver::info(), cudnn_sys::info()];
    all.extend(cublas_sys::info());
    all.push(nvrtc_sys::info());
    all.push(nccl_sys::info());
    all
}

/// The folders of `LD_LIBRARY_PATH`, in order (empty entries, which
/// would mean the working directory, left out).
fn library_path() -> Vec<PathBuf> {
    std::env::var_os("LD_LIBRARY_PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .filter(|d| !d.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// The first `folder/name` on `folders` that exists, for the first of
/// `sonames` (in order of preference) that any folder holds.
fn locate_in(folders: &[PathBuf], sonames: &[&str]) -> Option<PathBuf> {
    sonames
        .iter()
        .find_map(|s| folders.iter().map(|d| d.join(s)).find(|p| p.exists()))
}

/// A library loaded by one of `sonames` (preferred first): by full path
/// from the first `LD_LIBRARY_PATH` folder that holds it, else by the
/// soname through the system's search. Not found: no file answers to any
/// of the names; unusable: one does, but does not load (dlopen's words,
/// in one line: a missing dependency, another architecture).
pub(crate) fn open(sonames: &[&str]) -> Result<(libloading::Library, String), LoadError> {
    if let Some(path) = locate_in(&library_path(), sonames) {
        let soname = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // SAFETY: loading an NVIDIA library runs its initialisers, which
        // only set up state of their own.
        return unsafe { libloading::Library::new(&path) }
            .map(|l| (l, soname))
            .map_err(|e| {
                LoadError::Unusable(one_line(&format!("{}: {}", path.display(), dl_error(&e))))
            });
    }
    for s in sonames {
        // SAFETY: as above.
        match unsafe { libloading::Library::new(*s) } {
            Ok(l) => return Ok((l, s.to_string())),
            // Found (through the loader's cache) but not loadable.
            Err(e)
                if !dl_error(&e).starts_with(&format!("{s}: cannot open shared object file")) =>
            {
                return Err(LoadError::Unusable(one_line(&dl_error(&e))))
            }
            Err(_) => {}
        }
    }
    Err(LoadError::NotFound(format!(
        "not found ({} on neither LD_LIBRARY_PATH nor the system's library path)",
        sonames.join(", ")
    )))
}

/// The file that defines `symbol` in `lib`, as the dynamic loader names
/// it (`dladdr`): the library actually loaded, whatever name found it.
pub(crate) fn file_of(lib: &libloading::Library, symbol: &str) -> Option<PathBuf> {
    let name = std::ffi::CString::new(symbol).ok()?;
    // SAFETY: only the symbol's address is taken; it is never called here.
    let addr = unsafe { lib.get::<*const std::ffi::c_void>(name.as_bytes_with_nul()) }.ok()?;
    objects::file_at((*addr).cast())
}

/// dlopen's own words (libloading's message is only "dlopen failed").
fn dl_error(e: &libloading::Error) -> String {
    std::error::Error::source(e).map_or_else(|| e.to_string(), |s| s.to_string())
}

/// dlopen's messages can span lines; every error here is one line.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether two paths name the same file or folder (a link to it counts).
pub(crate) fn same_path(a: &Path, b: &Path) -> bool {
    a == b
        || matches!(
            (std::fs::canonicalize(a), std::fs::canonicalize(b)),
            (Ok(x), Ok(y)) if x == y
        )
}

/// The folder a loaded file is in.
fn folder(file: &Path) -> PathBuf {
    file.parent().map_or_else(PathBuf::new, Path::to_path_buf)
}

/// `major·10000 + minor·100 + patch` (cuDNN 9, cuBLAS, NCCL 2.9+) as
/// `major.minor.patch`.
fn version_5(v: i64) -> String {
    format!("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100)
}
