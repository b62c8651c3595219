use super::*;

#[test]
fn the_first_folder_holding_a_soname_wins() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let folders = vec![a.path().to_path_buf(), b.path().to_path_buf()];
    assert_eq!(locate_in(&folders, &["libx.so.9"]), None);
    std::fs::write(b.path().join("libx.so.9"), b"").unwrap();
    assert_eq!(
        locate_in(&folders, &["libx.so.9"]),
        Some(b.path().join("libx.so.9"))
    );
    // An unversioned name earlier on the path does not count.
    std::fs::write(a.path().join("libx.so"), b"").unwrap();
    assert_eq!(
        locate_in(&folders, &["libx.so.9"]),
        Some(b.path().join("libx.so.9"))
    );
    std::fs::write(a.path().join("libx.so.9"), b"").unwrap();
    assert_eq!(
        locate_in(&folders, &["libx.so.9"]),
        Some(a.path().join("libx.so.9"))
    );
    // Sonames in order of preference: the preferred one anywhere first.
    std::fs::write(b.path().join("libx.so.10"), b"").unwrap();
    assert_eq!(
        locate_in(&folders, &["libx.so.10", "libx.so.9"]),
        Some(b.path().join("libx.so.10"))
    );
}

#[test]
fn errors_are_one_line() {
    assert_eq!(one_line("a\n  b\tc "), "a b c");
    let e = open(&["libcnnbench-no-such-library.so.1"]).err().unwrap();
    assert!(matches!(e, LoadError::NotFound(_)), "{e:?}");
    let e = e.to_string();
    assert!(
        !e.contains('\n') && e.contains("libcnnbench-no-such-library.so.1"),
        "{e}"
    );
}

#[test]
fn every_library_is_described_in_one_line_without_a_gpu() {
    let libs = libraries();
    let names: Vec<&str> = libs.iter().map(|l| l.name.as_str()).collect();
    for n in ["NVIDIA driver", "cuDNN", "cuBLAS", "NVRTC", "NCCL"] {
        assert!(names.contains(&n), "{names:?}");
    }
    for l in &libs {
        let d = l.describe();
        assert!(!d.contains('\n'), "{d}");
        // Either loaded (a file and a version) or an error; never neither.
        assert!(
            l.error.is_some() || (l.file.is_some() && l.version.is_some()),
            "{l:?}"
        );
    }
}

/// Every cuDNN, cuBLAS and NVRTC function the crate calls goes through a
/// loader table: a call through cudarc's `sys` would load the library by
/// cudarc's names, maybe another file.
#[test]
fn no_call_bypasses_the_loader() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut stack = vec![root];
    let mut bad = Vec::new();
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().is_none_or(|x| x != "rs") || p.ends_with("loader/tests.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            for pat in [
                "cudarc::nvrtc::result",
                "use cudarc::cudnn::sys;",
                "cudnn::sys::is_culib_present",
                "cublas::sys::is_culib_present",
                "nvrtc::sys::is_culib_present",
            ] {
                if text.contains(pat) {
                    bad.push(format!("{}: {pat}", p.display()));
                }
            }
            // No function of cudarc's own `sys` modules is called.
            for lib in ["cudnn", "cublas", "nvrtc"] {
                let pat = format!("cudarc::{lib}::sys::");
                for (i, _) in text.match_indices(&pat) {
                    let rest = &text[i + pat.len()..];
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if rest[name.len()..].starts_with('(') {
                        bad.push(format!("{}: {pat}{name}(", p.display()));
                    }
                }
            }
            // Every `sys::cudnnX(` called is in the table.
            for (i, _) in text.match_indices("sys::cudnn") {
                let name: String = text[i + 5..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                let called = text[i + 5 + name.len()..].starts_with('(');
                if called && !cudnn_sys::NAMES.contains(&name.as_str()) {
                    bad.push(format!("{}: {name} is not in cudnn_sys", p.display()));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}
