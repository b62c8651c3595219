//! Is a GPU usable here? The libraries are loaded at run time, and cudarc
//! panics on the first call into a missing one, so they are probed before
//! anything else touches them.

use super::loader;
use super::loader::{cublas_sys, cudnn_sys, nvrtc_sys, LoadError};

/// Which of the libraries the GPU path needs could be loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Presence {
    pub driver: bool,
    pub cudnn: bool,
    pub cublas: bool,
    /// A library that loaded but is not what its name says (a stub, another
    /// library under its name, a driver too old): which, and the first
    /// function it lacks.
    pub wrong: Option<String>,
}

/// Functions the driver must have, looked up (never called) before cudarc
/// is let near it: cudarc resolves a function at its first call and panics
/// when it is missing. (cuDNN, cuBLAS and NVRTC are called through the
/// loader's tables, filled whole when each loads.)
const DRIVER_SYMBOLS: [&str; 10] = [
    "cuInit",
    "cuDriverGetVersion",
    "cuDeviceGetCount",
    "cuDeviceGetAttribute",
    "cuDevicePrimaryCtxRetain",
    "cuMemAlloc_v2",
    "cuMemcpyHtoD_v2",
    "cuModuleLoadData",
    "cuLaunchKernel",
    "cuEventElapsedTime",
];
/// The first of `symbols` that `has` does not find.
fn first_missing(symbols: &[&'static str], has: impl Fn(&str) -> bool) -> Option<&'static str> {
    symbols.iter().copied().find(|s| !has(s))
}

fn wrong_library(lib: &str, symbol: &str) -> String {
    format!("no usable GPU: the {lib} that loaded has no {symbol} (not that library, or too old)")
}

impl Presence {
    /// Loads each library by the loader's rules ([`super::loader`]) and
    /// looks up the driver functions cnnbench calls first (nothing is
    /// called in them); cuDNN and cuBLAS are refused at load when they
    /// lack a function, or when cuDNN's install is mixed.
    pub fn detect() -> Presence {
        let (driver, mut wrong) = match loader::driver_load_error() {
            None => (
                true,
                loader::driver_missing().map(|e| format!("no usable GPU: {e}")),
            ),
            Some(LoadError::NotFound(_)) => (false, None),
            Some(LoadError::Unusable(e)) => (true, Some(format!("no usable GPU: {e}"))),
        };
        if driver && wrong.is_none() {
            // SAFETY: the driver is present under cudarc's names (checked
            // just above); `get` only looks a name up with dlsym.
            let lib = unsafe { cudarc::driver::sys::culib() };
            wrong = first_missing(&DRIVER_SYMBOLS, |s| {
                // SAFETY: as above.
                unsafe { lib.get::<*const ()>(s.as_bytes()) }.is_ok()
            })
            .map(|s| wrong_library("NVIDIA driver library (libcuda.so.1)", s));
        }
        let mut present = |missing: Option<LoadError>| match missing {
            None => true,
            Some(LoadError::NotFound(_)) => false,
            Some(LoadError::Unusable(e)) => {
                wrong.get_or_insert(format!("no usable GPU: {e}"));
                true
            }
        };
        let cudnn = present(cudnn_sys::missing());
        let cublas = present(cublas_sys::missing());
        Presence {
            driver,
            cudnn,
            cublas,
            wrong,
        }
    }

    /// One line naming what is missing, or `None` when all are present.
    pub fn missing(&self) -> Option<String> {
        if !self.driver {
            return Some(
                "no usable GPU: the NVIDIA driver library (libcuda.so.1) was not found".into(),
            );
        }
        if let Some(w) = &self.wrong {
            return Some(w.clone());
        }
        let mut libs = Vec::new();
        if !self.cudnn {
            libs.push("cuDNN (libcudnn.so.9)");
        }
        if !self.cublas {
            libs.push("cuBLAS (libcublas.so.13)");
        }
        if libs.is_empty() {
            return None;
        }
        Some(format!(
            "no usable GPU: {} not found; put {} folder on LD_LIBRARY_PATH",
            libs.join(" and "),
            if libs.len() == 1 { "its" } else { "their" }
        ))
    }
}

/// Whether a test that needs `lib` (present or not) runs: it is skipped,
/// with a line saying so, where the library is missing, unless
/// `CNNBENCH_GPU_LIBS=required` (CI's real-library stage), which makes a
/// missing library a failure instead.
pub fn gpu_lib_for_test(lib: &str, present: bool) -> bool {
    if present {
        return true;
    }
    if std::env::var("CNNBENCH_GPU_LIBS").as_deref() == Ok("required") {
        panic!(
            "{lib} not found, and CNNBENCH_GPU_LIBS=required: put its folder on LD_LIBRARY_PATH"
        );
    }
    eprintln!("skipped: {lib} not found");
    false
}

/// For a test that needs a usable GPU and found none (`why`): says it is
/// skipped, unless `CNNBENCH_GPU=required` (`scripts/gpu/verify.sh` on a
/// GPU machine), which makes it a failure instead.
pub fn no_gpu_for_test(why: &str) {
    if std::env::var("CNNBENCH_GPU").as_deref() == Ok("required") {
        panic!("CNNBENCH_GPU=required, but {why}");
    }
    eprintln!("skipped: no GPU ({why})");
}

/// One line saying that NVRTC, which compiles cnnbench's own kernels at
/// start-up, cannot be loaded, or `None` when it can. Checked before the
/// first NVRTC call, since cudarc panics on a missing library.
pub fn nvrtc_missing() -> Option<String> {
    match nvrtc_sys::missing() {
        None => None,
        Some(LoadError::NotFound(_)) => nvrtc_message(false),
        Some(LoadError::Unusable(e)) => Some(format!("no usable GPU: {e}")),
    }
}

fn nvrtc_message(present: bool) -> Option<String> {
    (!present).then(|| {
        "no usable GPU: NVRTC (libnvrtc.so.13) not found; put its folder on LD_LIBRARY_PATH".into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_naming_what_is_missing() {
        let all = Presence {
            driver: true,
            cudnn: true,
            cublas: true,
            wrong: None,
        };
        assert_eq!(all.missing(), None);
        let no_driver = Presence {
            driver: false,
            ..all.clone()
        };
        assert_eq!(
            no_driver.missing().unwrap(),
            "no usable GPU: the NVIDIA driver library (libcuda.so.1) was not found"
        );
        let no_libs = Presence {
            cudnn: false,
            cublas: false,
            ..all.clone()
        };
        assert_eq!(
            no_libs.missing().unwrap(),
            "no usable GPU: cuDNN (libcudnn.so.9) and cuBLAS (libcublas.so.13) not found; \
             put their folder on LD_LIBRARY_PATH"
        );
        let m = Presence {
            cudnn: false,
            ..all.clone()
        }
        .missing()
        .unwrap();
        assert!(m.contains("cuDNN") && !m.contains("cuBLAS") && m.contains("its folder"));
        // A library that loads but lacks what cnnbench calls is named.
        let has = |s: &str| s != "cuDriverGetVersion";
        let m = wrong_library(
            "NVIDIA driver library (libcuda.so.1)",
            first_missing(&DRIVER_SYMBOLS, has).unwrap(),
        );
        assert_eq!(
            Presence { wrong: Some(m), ..all }.missing().unwrap(),
            "no usable GPU: the NVIDIA driver library (libcuda.so.1) that loaded has no cuDriverGetVersion (not that library, or too old)"
        );
    }

    #[test]
    fn probing_never_panics() {
        // On a machine without CUDA this is all false; with one, all true.
        let p = Presence::detect();
        assert_eq!(
            p.missing().is_none(),
            p.driver && p.cudnn && p.cublas && p.wrong.is_none()
        );
    }

    #[test]
    fn one_line_when_nvrtc_is_missing() {
        assert_eq!(nvrtc_message(true), None);
        let m = nvrtc_message(false).unwrap();
        assert!(m.starts_with("no usable GPU: NVRTC (libnvrtc.so.13) not found"));
        assert!(m.ends_with("put its folder on LD_LIBRARY_PATH") && !m.contains('\n'));
        // Probing never panics, whatever is installed.
        let _ = nvrtc_missing();
    }
}
