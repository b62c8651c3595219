//! Is a GPU usable here? The libraries are loaded at run time, and cudarc
//! panics on the first call into a missing one, so they are probed before
//! anything else touches them.

/// Which of the libraries the GPU path needs could be loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Presence {
    pub driver: bool,
    pub cudnn: bool,
    pub cublas: bool,
}

impl Presence {
    /// Tries to load each library (nothing is called in them).
    pub fn detect() -> Presence {
        // SAFETY: these only try `dlopen` on the candidate names.
        unsafe {
            Presence {
                driver: cudarc::driver::sys::is_culib_present(),
                cudnn: cudarc::cudnn::sys::is_culib_present(),
                cublas: cudarc::cublas::sys::is_culib_present(),
            }
        }
    }

    /// One line naming what is missing, or `None` when all are present.
    pub fn missing(self) -> Option<String> {
        if !self.driver {
            return Some(
                "no usable GPU: the NVIDIA driver library (libcuda.so) was not found".into(),
            );
        }
        let mut libs = Vec::new();
        if !self.cudnn {
            libs.push("cuDNN (libcudnn.so.9)");
        }
        if !self.cublas {
            libs.push("cuBLAS (libcublas.so)");
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
    // SAFETY: this only tries `dlopen` on the candidate names.
    nvrtc_message(unsafe { cudarc::nvrtc::sys::is_culib_present() })
}

fn nvrtc_message(present: bool) -> Option<String> {
    (!present).then(|| {
        "no usable GPU: NVRTC (libnvrtc.so) not found; put its folder on LD_LIBRARY_PATH".into()
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
        };
        assert_eq!(all.missing(), None);
        let no_driver = Presence {
            driver: false,
            ..all
        };
        assert_eq!(
            no_driver.missing().unwrap(),
            "no usable GPU: the NVIDIA driver library (libcuda.so) was not found"
        );
        let no_libs = Presence {
            cudnn: false,
            cublas: false,
            ..all
        };
        assert_eq!(
            no_libs.missing().unwrap(),
            "no usable GPU: cuDNN (libcudnn.so.9) and cuBLAS (libcublas.so) not found; \
             put their folder on LD_LIBRARY_PATH"
        );
        let m = Presence {
            cudnn: false,
            ..all
        }
        .missing()
        .unwrap();
        assert!(m.contains("cuDNN") && !m.contains("cuBLAS") && m.contains("its folder"));
    }

    #[test]
    fn probing_never_panics() {
        // On a machine without CUDA this is all false; with one, all true.
        let p = Presence::detect();
        assert_eq!(p.missing().is_none(), p.driver && p.cudnn && p.cublas);
    }

    #[test]
    fn one_line_when_nvrtc_is_missing() {
        assert_eq!(nvrtc_message(true), None);
        let m = nvrtc_message(false).unwrap();
        assert!(m.starts_with("no usable GPU: NVRTC (libnvrtc.so) not found"));
        assert!(m.ends_with("put its folder on LD_LIBRARY_PATH") && !m.contains('\n'));
        // Probing never panics, whatever is installed.
        let _ = nvrtc_missing();
    }
}
