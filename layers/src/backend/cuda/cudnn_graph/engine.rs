//! The operation graph and the engine configurations cuDNN offers for it:
//! heuristics mode A's list, then the fallback list (as cudnn-frontend's
//! `get_heuristics_list({A, FALLBACK})`); where neither gives any, mode
//! B's, then the graph's global engine list; each with its engine's id,
//! knobs and numerical notes.

use super::descriptor::{Attr, AttrType, Descriptor, Kind};
use crate::backend::cuda::cudnn::CudnnHandle;
use crate::backend::cuda::loader::cudnn_sys as sys;
use crate::backend::cuda::GpuResult;
use crate::core::DType;
use sys::cudnnBackendNumericalNote_t as Note;

/// A finalized operation graph (it needs a handle, hence a GPU).
pub struct OperationGraph {
    pub desc: Descriptor,
}

impl OperationGraph {
    pub fn new(h: &CudnnHandle, ops: &[&Descriptor]) -> GpuResult<OperationGraph> {
        let mut g = Descriptor::new(Kind::CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)?;
        g.set_descs(Attr::CUDNN_ATTR_OPERATIONGRAPH_OPS, ops)?;
        g.set_handle(Attr::CUDNN_ATTR_OPERATIONGRAPH_HANDLE, h.0)?;
        g.finalize()?;
        Ok(OperationGraph { desc: g })
    }
}

/// One engine configuration: an engine and its knob choices, as cuDNN's
/// heuristics gave it.
pub struct EngineConfig {
    pub desc: Descriptor,
    /// The engine's global index.
    pub engine: i64,
    /// (knob type, value), in cuDNN's order.
    pub knobs: Vec<(u32, i64)>,
    /// `cudnnBackendNumericalNote_t` values, by number.
    pub notes: Vec<u32>,
    /// Whether its engine compiles its kernel at run time (a behaviour
    /// note): seconds per configuration while planning, for each layer.
    pub runtime_compiled: bool,
}

/// The most knob choices an engine configuration is read with (cuDNN 9
/// has fewer knob types than this).
const MAX_KNOBS: usize = 64;
const MAX_NOTES: usize = 32;

impl EngineConfig {
    /// Reads what `cfg` is.
    fn describe(cfg: Descriptor) -> GpuResult<EngineConfig> {
        let engines = cfg.get_descs(
            Attr::CUDNN_ATTR_ENGINECFG_ENGINE,
            Kind::CUDNN_BACKEND_ENGINE_DESCRIPTOR,
            1,
        )?;
        let (engine, notes) = match engines.first() {
            Some(e) => (
                e.get_i64(Attr::CUDNN_ATTR_ENGINE_GLOBAL_INDEX)?,
                e.get_enums(
                    Attr::CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                    AttrType::CUDNN_TYPE_NUMERICAL_NOTE,
                    MAX_NOTES,
                )?,
            ),
            None => (-1, Vec::new()),
        };
        // A cuDNN that cannot say counts as not compiling at run time.
        let runtime_compiled = engines.first().is_some_and(|e| {
            e.get_enums(
                Attr::CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE,
                AttrType::CUDNN_TYPE_BEHAVIOR_NOTE,
                MAX_NOTES,
            )
            .is_ok_and(|b| {
                b.contains(
                    &(sys::cudnnBackendBehaviorNote_t::CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION
                        as u32),
                )
            })
        });
        let mut knobs = Vec::new();
        for k in cfg.get_descs(
            Attr::CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
            Kind::CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR,
            MAX_KNOBS,
        )? {
            let ty = k.get_enums(
                Attr::CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE,
                AttrType::CUDNN_TYPE_KNOB_TYPE,
                1,
            )?;
            let value = k.get_i64(Attr::CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE)?;
            knobs.push((ty.first().copied().unwrap_or(u32::MAX), value));
        }
        Ok(EngineConfig {
            desc: cfg,
            engine,
            knobs,
            notes,
            runtime_compiled,
        })
    }

    /// cudnn-frontend's tag for it: `eng34_k2=1_k13=0` (engine id, then
    /// each knob type = value).
    pub fn name(&self) -> String {
        config_name(self.engine, &self.knobs)
    }

    pub fn has(&self, n: Note) -> bool {
        self.notes.contains(&(n as u32))
    }

    /// Whether it computes through a transform (FFT or Winograd), which
    /// rounds differently from a sum of products.
    pub fn transform(&self) -> bool {
        self.has(Note::CUDNN_NUMERICAL_NOTE_FFT)
            || self.has(Note::CUDNN_NUMERICAL_NOTE_WINOGRAD)
            || self.has(Note::CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4)
            || self.has(Note::CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6)
            || self.has(Note::CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13)
    }

    /// Short names of its notes, for the kernels column: `tensor_core`,
    /// `fft`, `winograd`, `nondeterministic`.
    pub fn note_names(&self) -> Vec<&'static str> {
        self.notes.iter().filter_map(|&n| note_name(n)).collect()
    }
}

/// `eng34_k2=1_k13=0`.
pub fn config_name(engine: i64, knobs: &[(u32, i64)]) -> String {
    let mut s = format!("eng{engine}");
    for (t, v) in knobs {
        s += &format!("_k{t}={v}");
    }
    s
}

fn note_name(n: u32) -> Option<&'static str> {
    let notes = [
        (Note::CUDNN_NUMERICAL_NOTE_TENSOR_CORE, "tensor_core"),
        (
            Note::CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS,
            "down_convert",
        ),
        (
            Note::CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION,
            "reduced_precision",
        ),
        (Note::CUDNN_NUMERICAL_NOTE_FFT, "fft"),
        (
            Note::CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC,
            "nondeterministic",
        ),
        (Note::CUDNN_NUMERICAL_NOTE_WINOGRAD, "winograd"),
    ];
    notes
        .iter()
        .find(|(note, _)| *note as u32 == n)
        .map(|(_, name)| *name)
}

/// Why a dtype refuses an engine with `notes`, or `None` when it takes it:
/// nothing may down-convert its inputs or reduce in less than fp32 (half
/// types accumulate in fp32), and true fp32 (`f32`) takes no tensor-core
/// engine, whose fp32 math is TF32 (PyTorch's rule with `allow_tf32`
/// off); `tf32` takes them.
pub fn refused_by(dtype: DType, notes: &[u32]) -> Option<&'static str> {
    let has = |n: Note| notes.contains(&(n as u32));
    if has(Note::CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS) {
        return Some("down-converts its inputs");
    }
    if has(Note::CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION) {
        return Some("reduces in reduced precision");
    }
    if dtype == DType::F32 && has(Note::CUDNN_NUMERICAL_NOTE_TENSOR_CORE) {
        return Some("uses tensor cores (TF32) on fp32 data");
    }
    None
}

/// The engine configurations heuristics mode `mode` offers for `g`, best
/// first.
fn heuristics(
    g: &OperationGraph,
    mode: sys::cudnnBackendHeurMode_t,
) -> GpuResult<Vec<EngineConfig>> {
    let mut h = Descriptor::new(Kind::CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR)?;
    h.set_descs(Attr::CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, &[&g.desc])?;
    h.set_enum(
        Attr::CUDNN_ATTR_ENGINEHEUR_MODE,
        AttrType::CUDNN_TYPE_HEUR_MODE,
        mode as u32,
    )?;
    h.finalize()?;
    let n = h.count_descs(Attr::CUDNN_ATTR_ENGINEHEUR_RESULTS)?;
    h.get_descs(
        Attr::CUDNN_ATTR_ENGINEHEUR_RESULTS,
        Kind::CUDNN_BACKEND_ENGINECFG_DESCRIPTOR,
        n,
    )?
    .into_iter()
    .map(EngineConfig::describe)
    .collect()
}

/// Mode A's configurations, then the fallback list's that mode A did not
/// give, each once (the convolutions' candidates, as before); where
/// neither gives any, mode B's; where none of the three gives any, every
/// engine of the graph's global list that finalizes with its default
/// knobs, as cudnn-frontend's `EngineBuilder().setGlobalEngineIdx(i)`
/// makes them (cuDNN 9.19's heuristics on an H200 offered nothing for
/// three of NormConv's four graphs, and no global engine took them
/// either). An error only when A and the fallback list both fail and
/// nothing later gives a configuration.
pub fn engine_configs(g: &OperationGraph) -> GpuResult<Vec<EngineConfig>> {
    use sys::cudnnBackendHeurMode_t::{
        CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_B, CUDNN_HEUR_MODE_FALLBACK,
    };
    let mut all: Vec<EngineConfig> = Vec::new();
    let mut failed = None;
    for mode in [CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK] {
        match heuristics(g, mode) {
            Ok(list) => {
                for c in list {
                    if !all.iter().any(|k| k.name() == c.name()) {
                        all.push(c);
                    }
                }
            }
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    if all.is_empty() {
        all = heuristics(g, CUDNN_HEUR_MODE_B).unwrap_or_default();
    }
    if all.is_empty() {
        all = global_engines(g)
            .map(|(found, _)| found)
            .unwrap_or_default();
    }
    match (all.is_empty(), failed) {
        (true, Some(e)) => Err(e),
        _ => Ok(all),
    }
}

/// Every engine of `g`'s global list that finalizes on it, with its
/// default knobs, and how many engines the list has.
pub fn global_engines(g: &OperationGraph) -> GpuResult<(Vec<EngineConfig>, usize)> {
    let count = g
        .desc
        .get_i64(Attr::CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT)?
        .max(0) as usize;
    let mut found = Vec::new();
    for index in 0..count as i64 {
        // An engine that does not apply to the graph refuses to finalize.
        if let Ok(cfg) = engine_at(g, index) {
            found.push(cfg);
        }
    }
    Ok((found, count))
}

/// Engine `index` of `g`'s global list with its default knobs.
fn engine_at(g: &OperationGraph, index: i64) -> GpuResult<EngineConfig> {
    let mut e = Descriptor::new(Kind::CUDNN_BACKEND_ENGINE_DESCRIPTOR)?;
    e.set_descs(Attr::CUDNN_ATTR_ENGINE_OPERATION_GRAPH, &[&g.desc])?;
    e.set_i64(Attr::CUDNN_ATTR_ENGINE_GLOBAL_INDEX, index)?;
    e.finalize()?;
    let mut cfg = Descriptor::new(Kind::CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)?;
    cfg.set_descs(Attr::CUDNN_ATTR_ENGINECFG_ENGINE, &[&e])?;
    cfg.finalize()?;
    EngineConfig::describe(cfg)
}

/// Where `g`'s configurations come from, for an error that says why none
/// ran: `heuristics A 0, B 0, fallback 0; global list: 3 of 61 engines
/// finalize (eng9, eng22, eng31)`.
pub fn sources(g: &OperationGraph) -> String {
    use sys::cudnnBackendHeurMode_t::{
        CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_B, CUDNN_HEUR_MODE_FALLBACK,
    };
    let count = |m| match heuristics(g, m) {
        Ok(l) => l.len().to_string(),
        Err(e) => format!("failed: {e}"),
    };
    let global = match global_engines(g) {
        Ok((found, n)) => {
            let names: Vec<String> = found.iter().map(EngineConfig::name).collect();
            format!(
                "{} of {n} engines finalize ({})",
                found.len(),
                names.join(", ")
            )
        }
        Err(e) => format!("failed: {e}"),
    };
    format!(
        "heuristics A {}, B {}, fallback {}; global list: {global}",
        count(CUDNN_HEUR_MODE_A),
        count(CUDNN_HEUR_MODE_B),
        count(CUDNN_HEUR_MODE_FALLBACK)
    )
}
