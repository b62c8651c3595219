//! Execution plans (an engine configuration finalized on a handle: what
//! runs, and the workspace it needs) and variant packs (the device
//! pointers by tensor id, and the workspace), and the call that runs one
//! plan on one pack.

use super::descriptor::{check, Attr, Descriptor, Kind};
use super::engine::EngineConfig;
use crate::backend::cuda::cudnn::CudnnHandle;
use crate::backend::cuda::loader::cudnn_sys as sys;
use crate::backend::cuda::GpuResult;
use std::ffi::c_void;

/// A finalized execution plan.
pub struct ExecutionPlan {
    desc: Descriptor,
    // The configuration it was made from, kept alive with it (as
    // cudnn-frontend's plans keep theirs); dropped after `desc`.
    _cfg: EngineConfig,
    /// The configuration's name ([`EngineConfig::name`]).
    pub name: String,
    /// Its numerical notes' short names.
    pub notes: Vec<&'static str>,
    /// Whether it computes through FFT or Winograd transforms.
    pub transform: bool,
    pub workspace_bytes: usize,
}

impl ExecutionPlan {
    /// `cfg` finalized on `h`, or why cuDNN refuses it (often
    /// `CUDNN_STATUS_NOT_SUPPORTED*`: a configuration to skip).
    pub fn new(h: &CudnnHandle, cfg: EngineConfig) -> GpuResult<ExecutionPlan> {
        let mut p = Descriptor::new(Kind::CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)?;
        p.set_handle(Attr::CUDNN_ATTR_EXECUTION_PLAN_HANDLE, h.0)?;
        p.set_descs(Attr::CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, &[&cfg.desc])?;
        p.finalize()?;
        let ws = p.get_i64(Attr::CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE)?;
        Ok(ExecutionPlan {
            desc: p,
            name: cfg.name(),
            notes: cfg.note_names(),
            transform: cfg.transform(),
            workspace_bytes: ws.max(0) as usize,
            _cfg: cfg,
        })
    }

    /// `eng34_k2=1_k13=0 (tensor_core)`.
    pub fn describe(&self) -> String {
        if self.notes.is_empty() {
            self.name.clone()
        } else {
            format!("{} ({})", self.name, self.notes.join(","))
        }
    }

    /// Enqueues the plan on `h`'s stream with `pack`'s pointers.
    ///
    /// # Safety
    /// `pack`'s pointers must be device memory sized and aligned for the
    /// tensors the plan was made for, and its workspace at least
    /// [`Self::workspace_bytes`].
    pub unsafe fn execute(&self, h: &CudnnHandle, pack: &VariantPack) -> GpuResult<()> {
        let st = sys::cudnnBackendExecute(h.0, self.desc.raw(), pack.desc.raw());
        check("cudnnBackendExecute", st, &self.name)
    }
}

/// A finalized variant pack: pointers by tensor id, and the workspace.
pub struct VariantPack {
    desc: Descriptor,
    /// What it was made of, to tell whether a call's pointers are these.
    pub ids: Vec<i64>,
    pub ptrs: Vec<*mut c_void>,
    pub workspace: *mut c_void,
}

impl VariantPack {
    pub fn new(ids: &[i64], ptrs: &[*mut c_void], workspace: *mut c_void) -> GpuResult<Self> {
        let mut v = Descriptor::new(Kind::CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)?;
        v.set_ptrs(Attr::CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, ptrs)?;
        v.set_i64s(Attr::CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, ids)?;
        v.set_ptrs(Attr::CUDNN_ATTR_VARIANT_PACK_WORKSPACE, &[workspace])?;
        v.finalize()?;
        Ok(VariantPack {
            desc: v,
            ids: ids.to_vec(),
            ptrs: ptrs.to_vec(),
            workspace,
        })
    }

    /// Whether it binds exactly these pointers and workspace.
    pub fn binds(&self, ptrs: &[*mut c_void], workspace: *mut c_void) -> bool {
        self.ptrs == ptrs && self.workspace == workspace
    }
}
