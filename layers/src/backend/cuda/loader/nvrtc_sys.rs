//! NVRTC's C API through our own table (see [`super`]).

pub use cudarc::nvrtc::sys::*;

dynamic_api! {
    library "NVRTC";
    fn nvrtcVersion(major: *mut ::core::ffi::c_int, minor: *mut ::core::ffi::c_int) -> nvrtcResult;
    fn nvrtcGetNumSupportedArchs(numArchs: *mut ::core::ffi::c_int) -> nvrtcResult;
    fn nvrtcGetSupportedArchs(supportedArchs: *mut ::core::ffi::c_int) -> nvrtcResult;
    fn nvrtcCreateProgram(prog: *mut nvrtcProgram, src: *const ::core::ffi::c_char, name: *const ::core::ffi::c_char, numHeaders: ::core::ffi::c_int, headers: *const *const ::core::ffi::c_char, includeNames: *const *const ::core::ffi::c_char) -> nvrtcResult;
    fn nvrtcCompileProgram(prog: nvrtcProgram, numOptions: ::core::ffi::c_int, options: *const *const ::core::ffi::c_char) -> nvrtcResult;
    fn nvrtcGetProgramLogSize(prog: nvrtcProgram, logSizeRet: *mut usize) -> nvrtcResult;
    fn nvrtcGetProgramLog(prog: nvrtcProgram, log: *mut ::core::ffi::c_char) -> nvrtcResult;
    fn nvrtcGetPTXSize(prog: nvrtcProgram, ptxSizeRet: *mut usize) -> nvrtcResult;
    fn nvrtcGetPTX(prog: nvrtcProgram, ptx: *mut ::core::ffi::c_char) -> nvrtcResult;
    fn nvrtcGetCUBINSize(prog: nvrtcProgram, cubinSizeRet: *mut usize) -> nvrtcResult;
    fn nvrtcGetCUBIN(prog: nvrtcProgram, cubin: *mut ::core::ffi::c_char) -> nvrtcResult;
    fn nvrtcDestroyProgram(prog: *mut nvrtcProgram) -> nvrtcResult;
    fn nvrtcGetErrorString(result: nvrtcResult) -> *const ::core::ffi::c_char;
}

use super::{file_of, LibraryInfo, LoadError};
use libloading::Library;
use std::path::PathBuf;

/// The sonames cnnbench loads NVRTC by, preferred first.
pub const SONAMES: [&str; 2] = ["libnvrtc.so.13", "libnvrtc.so.12"];

struct Loaded {
    api: Api,
    file: PathBuf,
    soname: String,
    version: String,
    // Kept open for the life of the process: the table points into it.
    _lib: Library,
}

/// NVRTC as loaded, for `info` and records.
pub fn info() -> LibraryInfo {
    match loaded() {
        Ok(l) => LibraryInfo::loaded("NVRTC", &l.soname, &l.file, l.version.clone()),
        Err(e) => LibraryInfo::failed("NVRTC", SONAMES[0], e.to_string()),
    }
}

fn load() -> Result<Loaded, LoadError> {
    let (lib, soname) = super::open(&SONAMES)?;
    let api = Api::resolve(&lib, &soname)?;
    let file = file_of(&lib, "nvrtcVersion").unwrap_or_else(|| PathBuf::from(&soname));
    let (mut major, mut minor) = (0, 0);
    // SAFETY: out-pointers to locals.
    let version =
        if unsafe { (api.nvrtcVersion)(&mut major, &mut minor) } == nvrtcResult::NVRTC_SUCCESS {
            format!("{major}.{minor}")
        } else {
            "unknown".into()
        };
    Ok(Loaded {
        api,
        file,
        soname,
        version,
        _lib: lib,
    })
}

/// `nvrtcCreateProgram` with no headers.
pub fn create_program(
    src: &std::ffi::CStr,
    name: &std::ffi::CStr,
) -> Result<nvrtcProgram, nvrtcResult> {
    let mut prog = std::ptr::null_mut();
    // SAFETY: both strings are NUL-terminated and outlive the call; no
    // headers are passed.
    unsafe {
        nvrtcCreateProgram(
            &mut prog,
            src.as_ptr(),
            name.as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null(),
        )
    }
    .result()
    .map(|()| prog)
    .map_err(|e| e.0)
}

/// `nvrtcCompileProgram` with `options`.
///
/// # Safety
/// `prog` must be a live program.
pub unsafe fn compile_program(prog: nvrtcProgram, options: &[String]) -> Result<(), nvrtcResult> {
    let owned: Vec<std::ffi::CString> = options
        .iter()
        .filter_map(|o| std::ffi::CString::new(o.as_str()).ok())
        .collect();
    let ptrs: Vec<*const std::ffi::c_char> = owned.iter().map(|o| o.as_ptr()).collect();
    nvrtcCompileProgram(prog, ptrs.len() as i32, ptrs.as_ptr())
        .result()
        .map_err(|e| e.0)
}

/// A NUL-terminated buffer sized by `size` and filled by `fill`.
unsafe fn text(
    prog: nvrtcProgram,
    size: unsafe fn(nvrtcProgram, *mut usize) -> nvrtcResult,
    fill: unsafe fn(nvrtcProgram, *mut std::ffi::c_char) -> nvrtcResult,
) -> Result<Vec<u8>, nvrtcResult> {
    let mut n = 0;
    size(prog, &mut n).result().map_err(|e| e.0)?;
    let mut buf = vec![0u8; n.max(1)];
    fill(prog, buf.as_mut_ptr().cast())
        .result()
        .map_err(|e| e.0)?;
    // Up to the first NUL (the count includes it).
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    buf.truncate(end);
    Ok(buf)
}

/// The program's log, without its NUL.
///
/// # Safety
/// `prog` must be a live program.
pub unsafe fn program_log(prog: nvrtcProgram) -> Result<Vec<u8>, nvrtcResult> {
    text(prog, nvrtcGetProgramLogSize, nvrtcGetProgramLog)
}

/// The program's PTX, without its NUL.
///
/// # Safety
/// `prog` must be a compiled program.
pub unsafe fn ptx(prog: nvrtcProgram) -> Result<Vec<u8>, nvrtcResult> {
    text(prog, nvrtcGetPTXSize, nvrtcGetPTX)
}

/// `nvrtcDestroyProgram`.
///
/// # Safety
/// `prog` must be a live program, not used after.
pub unsafe fn destroy_program(mut prog: nvrtcProgram) -> Result<(), nvrtcResult> {
    nvrtcDestroyProgram(&mut prog).result().map_err(|e| e.0)
}
