//! NCCL's C API through a table of our own (see [`super`]): the functions
//! cnnbench calls, looked up once when the library loads, its status
//! check and its version. Loaded by code of its own rather than
//! `dynamic_api!`: its errors name the package to install and the oldest
//! NCCL with every function. The calls themselves are in
//! [`crate::backend::cuda::nccl`].

use super::{file_of, open, LibraryInfo, LoadError};
use crate::backend::cuda::error::{GpuError, GpuResult};
use std::ffi::{c_char, c_int, c_void};
use std::sync::OnceLock;

/// Bytes of an NCCL unique id (`NCCL_UNIQUE_ID_BYTES`).
pub const ID_BYTES: usize = 128;

/// The soname NCCL is loaded by (see [`super`]): pip's wheel and
/// PyTorch ship only this one.
const SONAME: &str = "libnccl.so.2";

pub(crate) type RawComm = *mut c_void;
/// `ncclResult_t`, kept as the integer: a status newer than these bindings
/// must not become an invalid enum value.
pub(crate) type Status = c_int;
const SUCCESS: Status = 0;

#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct UniqueId {
    pub(crate) internal: [c_char; ID_BYTES],
}

/// The functions cnnbench calls, looked up once when the library loads:
/// a library without one of them is refused before any is called.
pub(crate) struct Lib {
    pub(crate) get_version: unsafe extern "C" fn(*mut c_int) -> Status,
    pub(crate) get_unique_id: unsafe extern "C" fn(*mut UniqueId) -> Status,
    pub(crate) get_error_string: unsafe extern "C" fn(Status) -> *const c_char,
    pub(crate) comm_init_all: unsafe extern "C" fn(*mut RawComm, c_int, *const c_int) -> Status,
    pub(crate) comm_init_rank: unsafe extern "C" fn(*mut RawComm, c_int, UniqueId, c_int) -> Status,
    pub(crate) comm_destroy: unsafe extern "C" fn(RawComm) -> Status,
    pub(crate) all_reduce: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        c_int,
        c_int,
        RawComm,
        *mut c_void,
    ) -> Status,
    pub(crate) group_start: unsafe extern "C" fn() -> Status,
    pub(crate) group_end: unsafe extern "C" fn() -> Status,
    /// The file that loaded.
    file: std::path::PathBuf,
    // Last: the functions above point into it.
    _lib: libloading::Library,
}

fn load() -> Result<Lib, String> {
    // SAFETY: loading NCCL runs its initialisers, which only set up state
    // of its own.
    let (lib, _) = open(&[SONAME]).map_err(|e| match e {
        LoadError::NotFound(_) => format!(
            "NCCL ({SONAME}) was not found: install it (pip install nvidia-nccl-cu13, \
             or the system's libnccl2) and put its lib folder on LD_LIBRARY_PATH"
        ),
        LoadError::Unusable(e) => format!("NCCL ({SONAME}) did not load: {e}"),
    })?;
    macro_rules! get {
        ($name:literal) => {
            // SAFETY: the type is NCCL's declaration of the function.
            *unsafe { lib.get(concat!($name, "\0").as_bytes()) }.map_err(|_| {
                format!(
                    "the NCCL that loaded has no {} (not NCCL, or older than 2.10)",
                    $name
                )
            })?
        };
    }
    Ok(Lib {
        get_version: get!("ncclGetVersion"),
        get_unique_id: get!("ncclGetUniqueId"),
        get_error_string: get!("ncclGetErrorString"),
        comm_init_all: get!("ncclCommInitAll"),
        comm_init_rank: get!("ncclCommInitRank"),
        comm_destroy: get!("ncclCommDestroy"),
        all_reduce: get!("ncclAllReduce"),
        group_start: get!("ncclGroupStart"),
        group_end: get!("ncclGroupEnd"),
        file: file_of(&lib, "ncclGetVersion").unwrap_or_else(|| SONAME.into()),
        _lib: lib,
    })
}

fn lib() -> Result<&'static Lib, String> {
    static LIB: OnceLock<Result<Lib, String>> = OnceLock::new();
    LIB.get_or_init(load).as_ref().map_err(Clone::clone)
}

/// Whether NCCL loads with the functions cnnbench calls; if not, one line
/// saying what is wrong.
pub fn missing() -> Option<String> {
    lib().err()
}

/// The loaded library, or the error of a call made without it.
pub(crate) fn nccl(call: &'static str) -> GpuResult<&'static Lib> {
    lib().map_err(|status| GpuError {
        call,
        status,
        oom: false,
    })
}

pub(crate) fn check(l: &Lib, call: &'static str, r: Status) -> GpuResult<()> {
    if r == SUCCESS {
        return Ok(());
    }
    // SAFETY: NCCL returns a static string for any status.
    let words = unsafe {
        let p = (l.get_error_string)(r);
        if p.is_null() {
            String::new()
        } else {
            std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned()
        }
    };
    Err(GpuError {
        call,
        status: format!("ncclResult {r} ({words})"),
        // ncclSystemError: NCCL says host or device memory ran out here.
        oom: r == 2 && words.contains("memory"),
    })
}

/// NCCL's version as `2.32.3` (needs no GPU).
pub fn version() -> GpuResult<String> {
    let l = nccl("ncclGetVersion")?;
    let mut v = 0;
    // SAFETY: an out-pointer to a local.
    check(l, "ncclGetVersion", unsafe { (l.get_version)(&mut v) })?;
    Ok(version_name(v))
}

/// NCCL as loaded, for `info` and records.
pub fn info() -> LibraryInfo {
    match (lib(), version()) {
        (Ok(l), Ok(v)) => LibraryInfo::loaded("NCCL", SONAME, &l.file, v),
        (Ok(l), Err(e)) => LibraryInfo {
            file: Some(l.file.display().to_string()),
            ..LibraryInfo::failed("NCCL", SONAME, e.to_string())
        },
        (Err(e), _) => LibraryInfo::failed("NCCL", SONAME, e.clone()),
    }
}

/// NCCL's version code (`major*10000 + minor*100 + patch` since 2.9,
/// `major*1000 + minor*100 + patch` before) as `major.minor.patch`.
pub fn version_name(code: i32) -> String {
    if code >= 20900 {
        format!("{}.{}.{}", code / 10000, (code % 10000) / 100, code % 100)
    } else {
        format!("{}.{}.{}", code / 1000, (code % 1000) / 100, code % 100)
    }
}
