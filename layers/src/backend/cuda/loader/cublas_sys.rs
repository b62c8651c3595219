//! cuBLAS's C API through our own table (see [`super`]).

pub use cudarc::cublas::sys::*;

dynamic_api! {
    library "cuBLAS";
    fn cublasCreate_v2(handle: *mut cublasHandle_t) -> cublasStatus_t;
    fn cublasDestroy_v2(handle: cublasHandle_t) -> cublasStatus_t;
    fn cublasGemmEx(handle: cublasHandle_t, transa: cublasOperation_t, transb: cublasOperation_t, m: ::core::ffi::c_int, n: ::core::ffi::c_int, k: ::core::ffi::c_int, alpha: *const ::core::ffi::c_void, A: *const ::core::ffi::c_void, Atype: cudaDataType, lda: ::core::ffi::c_int, B: *const ::core::ffi::c_void, Btype: cudaDataType, ldb: ::core::ffi::c_int, beta: *const ::core::ffi::c_void, C: *mut ::core::ffi::c_void, Ctype: cudaDataType, ldc: ::core::ffi::c_int, computeType: cublasComputeType_t, algo: cublasGemmAlgo_t) -> cublasStatus_t;
    fn cublasGetVersion_v2(handle: cublasHandle_t, version: *mut ::core::ffi::c_int) -> cublasStatus_t;
    fn cublasSetStream_v2(handle: cublasHandle_t, streamId: cudaStream_t) -> cublasStatus_t;
    fn cublasSetWorkspace_v2(handle: cublasHandle_t, workspace: *mut ::core::ffi::c_void, workspaceSizeInBytes: usize) -> cublasStatus_t;
    fn cublasGetProperty(type_: libraryPropertyType, value: *mut ::core::ffi::c_int) -> cublasStatus_t;
}

use super::{file_of, folder, LibraryInfo, LoadError};
use libloading::Library;
use std::path::PathBuf;

/// The sonames cnnbench loads cuBLAS by, preferred first.
pub const SONAMES: [&str; 2] = ["libcublas.so.13", "libcublas.so.12"];
/// cuBLASLt, which cuBLAS needs: opened first from cuBLAS's folder, so
/// that cuBLAS's own lookup of it finds this one.
const LT_SONAMES: [&str; 2] = ["libcublasLt.so.13", "libcublasLt.so.12"];

struct Loaded {
    api: Api,
    file: PathBuf,
    soname: String,
    version: String,
    lt: Option<(PathBuf, String, String)>,
    // Kept open for the life of the process: the table points into these.
    _libs: Vec<Library>,
}

/// cuBLAS and cuBLASLt as loaded, for `info` and records.
pub fn info() -> Vec<LibraryInfo> {
    match loaded() {
        Ok(l) => {
            let mut v = vec![LibraryInfo::loaded(
                "cuBLAS",
                &l.soname,
                &l.file,
                l.version.clone(),
            )];
            if let Some((file, soname, version)) = &l.lt {
                v.push(LibraryInfo::loaded(
                    "cuBLASLt",
                    soname,
                    file,
                    version.clone(),
                ));
            }
            v
        }
        Err(e) => vec![LibraryInfo::failed("cuBLAS", SONAMES[0], e.to_string())],
    }
}

fn load() -> Result<Loaded, LoadError> {
    let mut libs = Vec::new();
    // cuBLASLt from the folder cuBLAS will come from, when that is known.
    if let Some(dir) = super::locate_in(&super::library_path(), &SONAMES).map(|p| folder(&p)) {
        for lt in LT_SONAMES {
            let p = dir.join(lt);
            // SAFETY: loading cuBLASLt runs its initialisers only.
            if let Some(l) = p
                .exists()
                .then(|| unsafe { Library::new(&p) }.ok())
                .flatten()
            {
                libs.push(l);
                break;
            }
        }
    }
    let (lib, soname) = super::open(&SONAMES)?;
    let api = Api::resolve(&lib, &soname)?;
    let file = file_of(&lib, "cublasCreate_v2").unwrap_or_else(|| PathBuf::from(&soname));
    let part = |t: libraryPropertyType| {
        let mut v = 0;
        // SAFETY: an out-pointer to a local; needs no handle or GPU.
        let ok =
            unsafe { (api.cublasGetProperty)(t, &mut v) } == cublasStatus_t::CUBLAS_STATUS_SUCCESS;
        ok.then_some(v)
    };
    let version = match (
        part(libraryPropertyType::MAJOR_VERSION),
        part(libraryPropertyType::MINOR_VERSION),
        part(libraryPropertyType::PATCH_LEVEL),
    ) {
        (Some(a), Some(b), Some(c)) => format!("{a}.{b}.{c}"),
        _ => "unknown".into(),
    };
    let lt = lt_info(&lib);
    libs.push(lib);
    Ok(Loaded {
        api,
        file,
        soname,
        version,
        lt,
        _libs: libs,
    })
}

/// The cuBLASLt cuBLAS uses (found through cuBLAS's own dependencies):
/// its file, soname and version (`cublasLtGetVersion`, 130001 = 13.0.1).
fn lt_info(cublas: &Library) -> Option<(PathBuf, String, String)> {
    // SAFETY: the function takes no arguments and needs no GPU.
    unsafe {
        let f = cublas
            .get::<unsafe extern "C" fn() -> usize>(b"cublasLtGetVersion\0")
            .ok()?;
        let file = super::objects::file_at(*f as *const std::ffi::c_void)?;
        let soname = file.file_name()?.to_string_lossy().into_owned();
        Some((file, soname, super::version_5(f() as i64)))
    }
}
