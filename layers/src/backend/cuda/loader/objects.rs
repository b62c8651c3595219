//! What the dynamic loader has loaded: the file behind an address, and
//! every loaded object whose file name starts with a prefix.

use std::ffi::{c_int, c_void, CStr};
use std::path::PathBuf;

/// The file of the loaded object that holds `addr` (`dladdr`).
pub(super) fn file_at(addr: *const c_void) -> Option<PathBuf> {
    if addr.is_null() {
        return None;
    }
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is a valid out-structure; dladdr only reads the
    // loader's tables.
    if unsafe { libc::dladdr(addr, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: the loader's own NUL-terminated string, valid while the
    // object stays loaded (it is copied at once).
    let name = unsafe { CStr::from_ptr(info.dli_fname) };
    Some(PathBuf::from(name.to_string_lossy().into_owned()))
}

/// The files of every loaded object whose file name starts with `prefix`
/// (`dl_iterate_phdr`), in load order.
pub(super) fn loaded_with_prefix(prefix: &str) -> Vec<PathBuf> {
    struct Walk<'a> {
        prefix: &'a str,
        found: Vec<PathBuf>,
    }
    unsafe extern "C" fn visit(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: `data` is the `Walk` passed below, alive for the call;
        // `info` is the loader's, valid during the callback.
        let walk = &mut *data.cast::<Walk>();
        let name = (*info).dlpi_name;
        if !name.is_null() {
            let path = PathBuf::from(CStr::from_ptr(name).to_string_lossy().into_owned());
            let starts = path
                .file_name()
                .is_some_and(|f| f.to_string_lossy().starts_with(walk.prefix));
            if starts {
                walk.found.push(path);
            }
        }
        0
    }
    let mut walk = Walk {
        prefix,
        found: Vec::new(),
    };
    // SAFETY: the callback only reads the loader's structures and writes
    // into `walk`, which outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(visit), (&mut walk as *mut Walk).cast()) };
    walk.found
}
