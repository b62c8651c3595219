//! A library's functions as a table filled once when it loads, and a free
//! function per entry with the C name, so that call sites read as they did
//! with cudarc's `sys` modules (`sys::cudnnCreate(&mut h)`).
//!
//! Every function is looked up when the table is made: a library that
//! lacks one is refused then, in one line naming it, instead of failing at
//! its first call. The module that uses the macro provides `struct
//! Loaded` (with the table as its `api` field) and `fn load() ->
//! Result<Loaded, LoadError>`; the macro makes the rest: the library loaded
//! once, `missing()`, and the calls. The signatures are cudarc's own
//! declarations, with its types.

macro_rules! dynamic_api {
    (library $label:literal; $( fn $name:ident ( $($arg:ident : $ty:ty),* $(,)? ) -> $ret:ty ; )*) => {
        /// The library, loaded once (on first use).
        fn loaded() -> &'static Result<Loaded, super::LoadError> {
            static LIB: std::sync::OnceLock<Result<Loaded, super::LoadError>> =
                std::sync::OnceLock::new();
            LIB.get_or_init(load)
        }

        fn api() -> &'static Api {
            match loaded() {
                Ok(l) => &l.api,
                // Every caller probes first (`Presence::detect`,
                // `nvrtc_missing`), which refuses the GPU path in one line
                // when the library did not load.
                Err(e) => panic!("{} called although it did not load: {e}", $label),
            }
        }

        // cudarc's own loader, shadowed (private here, so a call through
        // this module does not compile): it would load the library by
        // cudarc's names, maybe another file.
        #[allow(dead_code, hidden_glob_reexports)]
        fn culib() {}
        #[allow(dead_code, hidden_glob_reexports)]
        fn is_culib_present() {}

        /// Why the library is not usable, or `None` when it loaded whole
        /// (every function cnnbench calls).
        pub fn missing() -> Option<super::LoadError> {
            loaded().as_ref().err().cloned()
        }

        /// The functions cnnbench calls, looked up once.
        #[allow(non_snake_case)]
        pub(crate) struct Api {
            $( $name: unsafe extern "C" fn($($ty),*) -> $ret, )*
        }

        /// The C names of every function in [`Api`].
        #[allow(dead_code)]
        pub(crate) const NAMES: &[&str] = &[$(stringify!($name)),*];

        impl Api {
            /// Looks every function up in `lib` (loaded by `soname`); the
            /// first missing one is the error.
            fn resolve(lib: &libloading::Library, soname: &str) -> Result<Api, super::LoadError> {
                let missing = |f: &str| {
                    super::LoadError::Unusable(format!(
                        "the {} ({soname}) that loaded has no {f} (not that library, or too old)",
                        $label
                    ))
                };
                Ok(Api {
                    $(
                        // SAFETY: the type is the library's declaration of
                        // the function (cudarc's bindings of its header).
                        $name: *unsafe {
                            lib.get::<unsafe extern "C" fn($($ty),*) -> $ret>(
                                concat!(stringify!($name), "\0").as_bytes(),
                            )
                        }
                        .map_err(|_| missing(stringify!($name)))?,
                    )*
                })
            }
        }

        $(
            /// Calls the loaded library's function of this name.
            ///
            /// # Safety
            /// As the C function's; the library must have loaded (callers
            /// probe first).
            #[allow(non_snake_case, clippy::too_many_arguments, dead_code)]
            #[inline]
            pub unsafe fn $name($($arg: $ty),*) -> $ret {
                (api().$name)($($arg),*)
            }
        )*
    };
}
