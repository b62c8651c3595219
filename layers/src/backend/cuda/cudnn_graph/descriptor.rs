//! One backend descriptor (`cudnnBackendDescriptor_t`): created by type,
//! set attribute by attribute, finalized, read back, and destroyed when
//! dropped. Every failing call becomes a one-line [`GpuError`] naming the
//! call, the attribute and the descriptor's type, with cuDNN's own last
//! message where it gave one.

use crate::backend::cuda::loader::cudnn_sys as sys;
use crate::backend::cuda::{GpuError, GpuResult};
use std::ffi::c_void;

pub use sys::cudnnBackendAttributeName_t as Attr;
pub use sys::cudnnBackendAttributeType_t as AttrType;
pub use sys::cudnnBackendDescriptorType_t as Kind;

/// `cudnnStatus_t` by number, as cuDNN names it
/// (`CUDNN_STATUS_NOT_SUPPORTED_SHAPE`).
pub fn status_name(status: u32) -> String {
    type ErrorString = unsafe extern "C" fn(u32) -> *const std::ffi::c_char;
    // SAFETY: cudnnGetErrorString takes the status by value (a C enum,
    // 32 bits) and returns a static string; declared here with a number
    // so that a status cudarc's enum lacks is still named.
    unsafe {
        if let Ok(f) = sys::symbol("cudnnGetErrorString") {
            let f: ErrorString = std::mem::transmute(f);
            let p = f(status);
            if !p.is_null() {
                return std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned();
            }
        }
    }
    format!("cuDNN status {status}")
}

/// cuDNN's last error message on this thread, in one line (empty when it
/// has none), at most 300 characters.
fn last_message() -> String {
    let mut buf = vec![0 as std::ffi::c_char; 1024];
    // SAFETY: the buffer holds `len` bytes; cuDNN writes a terminated
    // string within them.
    unsafe { sys::cudnnGetLastErrorString(buf.as_mut_ptr(), buf.len()) };
    // SAFETY: terminated within the buffer (the last byte is left 0).
    let s = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }.to_string_lossy();
    let one: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    one.chars().take(300).collect()
}

/// `Ok` for status 0; otherwise the error naming `call` and `what`.
pub fn check(call: &'static str, status: u32, what: &str) -> GpuResult<()> {
    if status == 0 {
        return Ok(());
    }
    let name = status_name(status);
    let detail = last_message();
    let mut msg = format!("{name} ({what})");
    if !detail.is_empty() {
        msg += ": ";
        msg += &detail;
    }
    Err(GpuError {
        call,
        oom: name.contains("ALLOCATION_FAILED"),
        status: msg,
    })
}

/// Whether an error is cuDNN's "not supported" (any of its sub-codes): a
/// configuration to skip, not a failure of the run.
pub fn not_supported(e: &GpuError) -> bool {
    e.status.starts_with("CUDNN_STATUS_NOT_SUPPORTED")
}

/// A backend descriptor, destroyed on drop.
pub struct Descriptor {
    raw: sys::cudnnBackendDescriptor_t,
    kind: Kind,
}

impl std::fmt::Debug for Descriptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.kind)
    }
}

impl Descriptor {
    /// A new, empty descriptor of `kind`.
    pub fn new(kind: Kind) -> GpuResult<Descriptor> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: out-pointer to a local.
        let st = unsafe { sys::cudnnBackendCreateDescriptor(kind, &mut raw) };
        check("cudnnBackendCreateDescriptor", st, &format!("{kind:?}"))?;
        Ok(Descriptor { raw, kind })
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    pub(crate) fn raw(&self) -> sys::cudnnBackendDescriptor_t {
        self.raw
    }

    fn what(&self, attr: Attr) -> String {
        format!("{attr:?} of a {:?}", self.kind)
    }

    /// Sets `attr` to `count` elements of type `ty` at `values`.
    ///
    /// # Safety
    /// `values` must point to `count` elements of the C type `ty` names.
    unsafe fn set_raw(
        &mut self,
        attr: Attr,
        ty: AttrType,
        count: usize,
        values: *const c_void,
    ) -> GpuResult<()> {
        let st = sys::cudnnBackendSetAttribute(self.raw, attr, ty, count as i64, values);
        check("cudnnBackendSetAttribute", st, &self.what(attr))
    }

    pub fn set_i64s(&mut self, attr: Attr, v: &[i64]) -> GpuResult<()> {
        // SAFETY: `v.len()` int64 values.
        unsafe { self.set_raw(attr, AttrType::CUDNN_TYPE_INT64, v.len(), v.as_ptr().cast()) }
    }

    pub fn set_i64(&mut self, attr: Attr, v: i64) -> GpuResult<()> {
        self.set_i64s(attr, &[v])
    }

    pub fn set_bool(&mut self, attr: Attr, v: bool) -> GpuResult<()> {
        // SAFETY: one C bool (one byte, as Rust's).
        unsafe {
            self.set_raw(
                attr,
                AttrType::CUDNN_TYPE_BOOLEAN,
                1,
                (&v as *const bool).cast(),
            )
        }
    }

    pub fn set_f32(&mut self, attr: Attr, v: f32) -> GpuResult<()> {
        // SAFETY: one float.
        unsafe {
            self.set_raw(
                attr,
                AttrType::CUDNN_TYPE_FLOAT,
                1,
                (&v as *const f32).cast(),
            )
        }
    }

    pub fn set_data_type(&mut self, attr: Attr, d: sys::cudnnDataType_t) -> GpuResult<()> {
        // SAFETY: one cudnnDataType_t.
        unsafe {
            self.set_raw(
                attr,
                AttrType::CUDNN_TYPE_DATA_TYPE,
                1,
                (&d as *const sys::cudnnDataType_t).cast(),
            )
        }
    }

    /// An enum-typed attribute (`CUDNN_TYPE_CONVOLUTION_MODE`,
    /// `CUDNN_TYPE_HEUR_MODE`, ...) by its number.
    pub fn set_enum(&mut self, attr: Attr, ty: AttrType, v: u32) -> GpuResult<()> {
        // SAFETY: one 32-bit C enum.
        unsafe { self.set_raw(attr, ty, 1, (&v as *const u32).cast()) }
    }

    pub fn set_handle(&mut self, attr: Attr, h: sys::cudnnHandle_t) -> GpuResult<()> {
        // SAFETY: one handle.
        unsafe {
            self.set_raw(
                attr,
                AttrType::CUDNN_TYPE_HANDLE,
                1,
                (&h as *const sys::cudnnHandle_t).cast(),
            )
        }
    }

    /// Descriptors (cuDNN copies what it needs of them).
    pub fn set_descs(&mut self, attr: Attr, ds: &[&Descriptor]) -> GpuResult<()> {
        let raw: Vec<sys::cudnnBackendDescriptor_t> = ds.iter().map(|d| d.raw).collect();
        // SAFETY: `raw.len()` descriptors.
        unsafe {
            self.set_raw(
                attr,
                AttrType::CUDNN_TYPE_BACKEND_DESCRIPTOR,
                raw.len(),
                raw.as_ptr().cast(),
            )
        }
    }

    /// Device (or host) pointers, as `void*`.
    pub fn set_ptrs(&mut self, attr: Attr, ps: &[*mut c_void]) -> GpuResult<()> {
        // SAFETY: `ps.len()` pointers.
        unsafe {
            self.set_raw(
                attr,
                AttrType::CUDNN_TYPE_VOID_PTR,
                ps.len(),
                ps.as_ptr().cast(),
            )
        }
    }

    pub fn finalize(&mut self) -> GpuResult<()> {
        // SAFETY: a live descriptor.
        let st = unsafe { sys::cudnnBackendFinalize(self.raw) };
        check("cudnnBackendFinalize", st, &format!("{:?}", self.kind))
    }

    /// Reads up to `out.len()` elements of `attr`; how many there were.
    ///
    /// # Safety
    /// `out` must be elements of the C type `ty` names.
    unsafe fn get_raw<T>(&self, attr: Attr, ty: AttrType, out: &mut [T]) -> GpuResult<usize> {
        let mut n = 0i64;
        let st = sys::cudnnBackendGetAttribute(
            self.raw,
            attr,
            ty,
            out.len() as i64,
            &mut n,
            out.as_mut_ptr().cast(),
        );
        check("cudnnBackendGetAttribute", st, &self.what(attr))?;
        Ok((n.max(0) as usize).min(out.len()))
    }

    pub fn get_i64(&self, attr: Attr) -> GpuResult<i64> {
        let mut v = [0i64];
        // SAFETY: one int64.
        unsafe { self.get_raw(attr, AttrType::CUDNN_TYPE_INT64, &mut v) }?;
        Ok(v[0])
    }

    pub fn get_i64s(&self, attr: Attr, max: usize) -> GpuResult<Vec<i64>> {
        let mut v = vec![0i64; max];
        // SAFETY: `max` int64s.
        let n = unsafe { self.get_raw(attr, AttrType::CUDNN_TYPE_INT64, &mut v) }?;
        v.truncate(n);
        Ok(v)
    }

    /// An enum-typed array attribute (`CUDNN_TYPE_NUMERICAL_NOTE`, ...) as
    /// numbers, so that values newer than the bindings are kept.
    pub fn get_enums(&self, attr: Attr, ty: AttrType, max: usize) -> GpuResult<Vec<u32>> {
        let mut v = vec![0u32; max];
        // SAFETY: `max` 32-bit C enums.
        let n = unsafe { self.get_raw(attr, ty, &mut v) }?;
        v.truncate(n);
        Ok(v)
    }

    /// How many descriptors `attr` holds.
    pub fn count_descs(&self, attr: Attr) -> GpuResult<usize> {
        let mut n = 0i64;
        // SAFETY: a zero-length request: cuDNN only writes the count.
        let st = unsafe {
            sys::cudnnBackendGetAttribute(
                self.raw,
                attr,
                AttrType::CUDNN_TYPE_BACKEND_DESCRIPTOR,
                0,
                &mut n,
                std::ptr::null_mut(),
            )
        };
        check("cudnnBackendGetAttribute", st, &self.what(attr))?;
        Ok(n.max(0) as usize)
    }

    /// Up to `max` descriptors of `kind` that `attr` holds: cuDNN fills
    /// descriptors the caller created.
    pub fn get_descs(&self, attr: Attr, kind: Kind, max: usize) -> GpuResult<Vec<Descriptor>> {
        let mut ds = (0..max)
            .map(|_| Descriptor::new(kind))
            .collect::<GpuResult<Vec<_>>>()?;
        let mut raw: Vec<sys::cudnnBackendDescriptor_t> = ds.iter().map(|d| d.raw).collect();
        // SAFETY: `max` descriptors of the attribute's type.
        let n = unsafe { self.get_raw(attr, AttrType::CUDNN_TYPE_BACKEND_DESCRIPTOR, &mut raw) }?;
        ds.truncate(n);
        Ok(ds)
    }
}

impl Drop for Descriptor {
    fn drop(&mut self) {
        // SAFETY: created by cudnnBackendCreateDescriptor, destroyed once.
        unsafe {
            let _ = sys::cudnnBackendDestroyDescriptor(self.raw);
        }
    }
}
