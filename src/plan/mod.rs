//! Step two: from options to a plan. Which directions, which algorithms,
//! which ISA and device, and whether it all fits in memory.

use crate::results::memory::Available;
use anyhow::{bail, Result};
use cnnbench_kernels::conv::{self, algorithms, find_algorithm, ConvAlgo, ConvShape, Direction};
use cnnbench_kernels::Isa;
use cnnbench_layers::conv::{cudnn_algos, ConvTensors};

/// A direction to run and whether it includes bias.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirSpec {
    pub dir: Direction,
    pub bias: bool,
}

/// `fwd,bwd-data,bwd-filter`, `all`, or benchdnn's FWD_B (forward with
/// bias), FWD_D (without), BWD_D, BWD_W (without bias), BWD_WB (with).
pub fn parse_dirs(list: &str) -> Result<Vec<DirSpec>> {
    let mut out: Vec<DirSpec> = Vec::new();
    for item in list.split(',').map(str::trim) {
        let specs: Vec<DirSpec> = match item {
            "all" => Direction::ALL
                .iter()
                .map(|&dir| DirSpec { dir, bias: dir != Direction::BwdData })
                .collect(),
            "fwd" | "FWD_B" => vec![DirSpec { dir: Direction::Fwd, bias: true }],
            "FWD_D" | "FWD_I" => vec![DirSpec { dir: Direction::Fwd, bias: false }],
            "bwd-data" | "BWD_D" => vec![DirSpec { dir: Direction::BwdData, bias: false }],
            "bwd-filter" | "BWD_WB" => vec![DirSpec { dir: Direction::BwdFilter, bias: true }],
            "BWD_W" => vec![DirSpec { dir: Direction::BwdFilter, bias: false }],
            "" => bail!("empty item in --dir '{list}'"),
            other => bail!(
                "unknown direction '{other}' (expected fwd, bwd-data, bwd-filter, all, FWD_B, FWD_D, BWD_D, BWD_W or BWD_WB)"
            ),
        };
        for s in specs {
            if out.iter().any(|o| o.dir == s.dir) {
                bail!("direction '{}' given twice in --dir '{list}'", s.dir);
            }
            out.push(s);
        }
    }
    Ok(out)
}

/// What `--algo` asks for.
#[derive(Clone, Copy)]
pub enum AlgoChoice {
    /// Try every supporting algorithm briefly, time the fastest.
    Auto,
    /// One row per supporting algorithm.
    All,
    Named(&'static dyn ConvAlgo),
}

impl std::fmt::Debug for AlgoChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AlgoChoice::Auto => f.write_str("auto"),
            AlgoChoice::All => f.write_str("all"),
            AlgoChoice::Named(a) => f.write_str(a.name()),
        }
    }
}

pub fn parse_algo(name: &str) -> Result<AlgoChoice> {
    match name {
        "auto" => Ok(AlgoChoice::Auto),
        "all" => Ok(AlgoChoice::All),
        _ => match find_algorithm(name) {
            Some(a) => Ok(AlgoChoice::Named(a)),
            None => {
                let names: Vec<_> = algorithms().iter().map(|a| a.name()).collect();
                bail!(
                    "unknown algorithm '{name}' (expected auto, all, {}, or ref)",
                    names.join(", ")
                )
            }
        },
    }
}

/// What `--algo` asks of cuDNN.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GpuAlgoChoice {
    /// cuDNN's heuristic first choice (`Get_v7`).
    Heuristic,
    /// An exhaustive `FindEx`, then the winner is timed.
    Auto,
    /// Every algorithm cuDNN knows, each timed or given a status.
    All,
    /// One algorithm per direction, by cuDNN's number.
    Named(String),
}

impl GpuAlgoChoice {
    pub fn parse(name: &str, dirs: &[DirSpec]) -> Result<GpuAlgoChoice> {
        Ok(match name {
            "heuristic" => GpuAlgoChoice::Heuristic,
            "auto" => GpuAlgoChoice::Auto,
            "all" => GpuAlgoChoice::All,
            other => {
                for d in dirs {
                    if cudnn_algos::lookup(d.dir, other).is_none() {
                        bail!(
                            "cuDNN has no {} algorithm '{other}' (expected heuristic, auto, all, or one of: {})",
                            d.dir,
                            cudnn_algos::names(d.dir).join(", ")
                        );
                    }
                }
                GpuAlgoChoice::Named(other.to_string())
            }
        })
    }
}

/// `--workspace-limit`: bytes, with an optional K/M/G/T suffix (powers of
/// 1024), e.g. `512M`, `4G`, `0`.
pub fn parse_bytes(s: &str) -> Result<usize> {
    let t = s.trim();
    let (num, shift) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                'B' => 0,
                _ => bail!("bad byte count '{s}' (expected e.g. 0, 65536, 512M or 4G)"),
            };
            (&t[..i], shift)
        }
        _ => (t, 0),
    };
    let n: u64 = num.parse().map_err(|_| {
        anyhow::anyhow!("bad byte count '{s}' (expected e.g. 0, 65536, 512M or 4G)")
    })?;
    n.checked_mul(1 << shift)
        .and_then(|b| usize::try_from(b).ok())
        .ok_or_else(|| anyhow::anyhow!("byte count '{s}' is too large"))
}

/// The largest batch in 1..=cap for which `fits` holds, or `None` when not
/// even 1 fits. Doubles, then bisects, so it only ever asks `fits` (a
/// memory estimate, never an allocation) about O(log cap) sizes.
pub fn max_batch(fits: impl Fn(usize) -> bool, cap: usize) -> Option<usize> {
    if cap == 0 || !fits(1) {
        return None;
    }
    let mut lo = 1; // fits
    let mut hi = 2; // first size not known to fit
    while hi <= cap && fits(hi) {
        lo = hi;
        hi *= 2;
    }
    let mut hi = hi.min(cap + 1);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(lo)
}

/// `--batch`: a number, or `max` (the largest that fits in memory).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchChoice {
    Fixed(usize),
    Max,
}

pub fn parse_batch(s: &str) -> Result<BatchChoice> {
    match s {
        "max" => Ok(BatchChoice::Max),
        n => match n.parse::<usize>() {
            Ok(b) if b >= 1 => Ok(BatchChoice::Fixed(b)),
            _ => bail!("bad --batch '{s}' (expected a positive number, a comma list, or max)"),
        },
    }
}

/// The largest batch `--batch max` will consider.
pub const MAX_BATCH_CAP: usize = 1 << 16;

/// `auto` is the best ISA here; a named one must be supported.
pub fn resolve_isa(name: &str) -> Result<Isa> {
    if name == "auto" {
        return Ok(Isa::detect());
    }
    let Some(isa) = Isa::parse(name) else {
        bail!("unknown ISA '{name}' (expected auto, avx512, avx2 or scalar)");
    };
    if !isa.is_supported() {
        bail!(
            "--isa {isa} is not supported by this CPU (best here: {})",
            Isa::detect()
        );
    }
    Ok(isa)
}

/// The algorithms that will run `dir` of `p`, or why none can.
pub fn candidates(
    choice: AlgoChoice,
    p: &ConvShape,
    dir: Direction,
    isa: Isa,
) -> Result<Vec<&'static dyn ConvAlgo>> {
    match choice {
        AlgoChoice::Named(a) => match a.supports(p, dir, isa) {
            Ok(()) => Ok(vec![a]),
            Err(why) => bail!("algorithm '{}' cannot run {dir}: {why}", a.name()),
        },
        AlgoChoice::Auto | AlgoChoice::All => {
            let ok: Vec<_> = algorithms()
                .iter()
                .copied()
                .filter(|a| a.supports(p, dir, isa).is_ok())
                .collect();
            if ok.is_empty() {
                bail!("no algorithm supports {dir} with --isa {isa}");
            }
            Ok(ok)
        }
    }
}

/// Bytes a problem needs: every tensor, plus the reference outputs (and the
/// reference's f64 accumulators) when checking.
pub fn bytes_needed(p: &ConvShape, check: bool) -> Option<u128> {
    let tensors = ConvTensors::elements_needed(p)? * 4;
    let biggest = [
        p.mb as u128 * p.ih as u128 * p.iw as u128 * p.ic as u128,
        p.mb as u128 * p.oh as u128 * p.ow as u128 * p.oc as u128,
        (p.kh * p.kw) as u128 * p.ic as u128 * (p.oc / p.g) as u128,
    ]
    .into_iter()
    .max()?;
    Some(tensors + if check { biggest * 12 } else { 0 })
}

/// Bytes the CPU plans of `p` may take over the problem's run, on the
/// current rayon pool: every plan it makes, added up. `--algo auto` plans
/// every candidate of a direction to time them, then the winner again;
/// other choices plan each of theirs once. Added, not the largest: glibc
/// keeps much of what a plan frees for its own reuse (below its mmap
/// threshold, which rises to 32 MiB as big blocks are freed), so under
/// `ulimit -d` a freed plan need not leave room for a bigger one (a 512x7x7
/// layer's Winograd backward-filter aborted after its forward was freed).
/// A direction no algorithm can run counts 0 (it is refused by
/// [`candidates`]). Beside them, once: what the calls allocate per thread
/// ([`conv::CALL_BYTES_PER_THREAD`]).
pub fn cpu_workspace(choice: AlgoChoice, p: &ConvShape, dirs: &[DirSpec], isa: Isa) -> u128 {
    dirs.iter()
        .map(|d| {
            let Ok(algos) = candidates(choice, p, d.dir, isa) else {
                return 0;
            };
            let each: Vec<u128> = algos
                .iter()
                .map(|a| a.workspace_bound(p, d.dir, isa))
                .collect();
            let replanned = match choice {
                AlgoChoice::Auto if each.len() > 1 => each.iter().copied().max().unwrap_or(0),
                _ => 0,
            };
            each.iter().sum::<u128>() + replanned
        })
        .sum::<u128>()
        + rayon::current_num_threads() as u128 * conv::CALL_BYTES_PER_THREAD
}

/// Refuses problems that cannot fit in `available` bytes, before
/// allocating: the tensors (see [`bytes_needed`]), and `workspace` bytes
/// of plans beside them.
pub fn check_fits(
    p: &ConvShape,
    check: bool,
    workspace: u128,
    available: Option<Available>,
) -> Result<()> {
    let Some(need) = bytes_needed(p, check) else {
        bail!("tensor sizes overflow");
    };
    if let Some(avail) = available {
        if need + workspace > avail.bytes {
            let size = crate::results::memory::size;
            let plans = if workspace > 0 {
                format!(" and up to {} for its plans", size(workspace))
            } else {
                String::new()
            };
            bail!(
                "needs {} of memory for its tensors{plans}, but only {}",
                size(need),
                avail.describe()
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directions_in_both_spellings() {
        let all = parse_dirs("all").unwrap();
        assert_eq!(all.len(), 3);
        assert!(all.iter().all(|d| d.bias || d.dir == Direction::BwdData));
        assert_eq!(
            parse_dirs("FWD_D").unwrap(),
            vec![DirSpec {
                dir: Direction::Fwd,
                bias: false
            }]
        );
        assert_eq!(
            parse_dirs("fwd,BWD_W").unwrap()[1],
            DirSpec {
                dir: Direction::BwdFilter,
                bias: false
            }
        );
        assert!(parse_dirs("fwd,FWD_D")
            .unwrap_err()
            .to_string()
            .contains("twice"));
        assert!(parse_dirs("sideways")
            .unwrap_err()
            .to_string()
            .contains("unknown direction 'sideways'"));
    }

    #[test]
    fn algorithms_by_name() {
        assert!(matches!(parse_algo("auto"), Ok(AlgoChoice::Auto)));
        assert!(matches!(parse_algo("ref"), Ok(AlgoChoice::Named(_))));
        assert!(parse_algo("winograd9000")
            .unwrap_err()
            .to_string()
            .contains("unknown algorithm"));
    }

    #[test]
    fn gpu_algorithms_by_name_per_direction() {
        let all = parse_dirs("all").unwrap();
        assert_eq!(
            GpuAlgoChoice::parse("auto", &all).unwrap(),
            GpuAlgoChoice::Auto
        );
        assert_eq!(
            GpuAlgoChoice::parse("heuristic", &all).unwrap(),
            GpuAlgoChoice::Heuristic
        );
        assert_eq!(
            GpuAlgoChoice::parse("fft_tiling", &all).unwrap(),
            GpuAlgoChoice::Named("fft_tiling".into())
        );
        let e = GpuAlgoChoice::parse("implicit_gemm", &all)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("cuDNN has no bwd-data algorithm 'implicit_gemm'"),
            "{e}"
        );
        let fwd = parse_dirs("fwd").unwrap();
        assert!(GpuAlgoChoice::parse("implicit_gemm", &fwd).is_ok());
    }

    #[test]
    fn max_batch_search_against_a_simulated_memory_limit() {
        // 10 MiB per image, 1 GiB free: 102 images fit.
        let fits = |mb: usize| mb * (10 << 20) <= 1 << 30;
        assert_eq!(max_batch(fits, MAX_BATCH_CAP), Some(102));
        assert_eq!(max_batch(|mb| mb <= 64, MAX_BATCH_CAP), Some(64));
        assert_eq!(max_batch(|_| true, 1000), Some(1000));
        assert_eq!(max_batch(|_| false, 1000), None);
        // Never asks beyond the cap.
        assert_eq!(
            max_batch(
                |mb| {
                    assert!(mb <= 5);
                    true
                },
                5
            ),
            Some(5)
        );
        assert_eq!(parse_batch("max").unwrap(), BatchChoice::Max);
        assert_eq!(parse_batch("32").unwrap(), BatchChoice::Fixed(32));
        assert!(parse_batch("0").is_err());
    }

    #[test]
    fn byte_counts() {
        assert_eq!(parse_bytes("0").unwrap(), 0);
        assert_eq!(parse_bytes("65536").unwrap(), 65536);
        assert_eq!(parse_bytes("512M").unwrap(), 512 << 20);
        assert_eq!(parse_bytes("4g").unwrap(), 4 << 30);
        assert!(parse_bytes("lots")
            .unwrap_err()
            .to_string()
            .contains("bad byte count"));
        assert!(parse_bytes("-1").is_err());
        assert!(parse_bytes("99999999999T")
            .unwrap_err()
            .to_string()
            .contains("too large"));
    }

    #[test]
    fn isa_names() {
        assert_eq!(resolve_isa("scalar").unwrap(), Isa::Scalar);
        assert_eq!(resolve_isa("auto").unwrap(), Isa::detect());
        assert!(resolve_isa("neon").is_err());
    }

    #[test]
    fn memory_is_checked_before_allocating() {
        let huge = ConvShape {
            mb: 1 << 20,
            g: 1,
            ic: 1024,
            ih: 1024,
            iw: 1024,
            oc: 1024,
            oh: 1024,
            ow: 1024,
            kh: 1,
            kw: 1,
            sh: 1,
            sw: 1,
            ph: 0,
            pw: 0,
            dh: 0,
            dw: 0,
        };
        let avail = Some(Available {
            bytes: 24 << 30,
            source: "cgroup limit",
        });
        let e = check_fits(&huge, false, 0, avail).unwrap_err().to_string();
        assert!(e.contains("GiB of memory"), "{e}");
        assert!(e.ends_with("24.0 GiB available (cgroup limit)"), "{e}");
        let small = ConvShape {
            mb: 1,
            ic: 1,
            oc: 1,
            ih: 8,
            iw: 8,
            oh: 8,
            ow: 8,
            ..huge
        };
        assert!(check_fits(&small, true, 0, avail).is_ok());
    }

    /// A batch whose tensors fit but whose direct backward-data plan (its
    /// tap tiles) would not: refused before either is allocated. The
    /// shape aborted in the plan under a 512 MiB `RLIMIT_DATA`.
    #[test]
    fn the_plans_count_against_the_memory_left() {
        let p = ConvShape {
            mb: 1900,
            g: 1,
            ic: 16,
            ih: 32,
            iw: 32,
            oc: 16,
            oh: 32,
            ow: 32,
            kh: 3,
            kw: 3,
            sh: 1,
            sw: 1,
            ph: 1,
            pw: 1,
            dh: 0,
            dw: 0,
        };
        let direct = find_algorithm("direct").unwrap();
        let dirs = parse_dirs("all").unwrap();
        let ws = cpu_workspace(AlgoChoice::Named(direct), &p, &dirs, Isa::detect());
        let each = |dir| direct.workspace_bound(&p, dir, Isa::detect());
        let (fwd, bwd_data) = (each(Direction::Fwd), each(Direction::BwdData));
        assert!(fwd > 4 << 20 && bwd_data > 4 << 20, "{fwd} {bwd_data}");
        let calls = rayon::current_num_threads() as u128 * conv::CALL_BYTES_PER_THREAD;
        assert_eq!(ws, fwd + bwd_data + each(Direction::BwdFilter) + calls);
        let tensors = bytes_needed(&p, false).unwrap();
        let avail = |bytes| {
            Some(Available {
                bytes,
                source: "RLIMIT_DATA",
            })
        };
        let e = check_fits(&p, false, ws, avail(tensors + ws / 2))
            .unwrap_err()
            .to_string();
        assert!(e.contains("MiB for its plans, but only"), "{e}");
        assert!(check_fits(&p, false, ws, avail(tensors + ws)).is_ok());
        // Auto plans every candidate, then the winner again.
        let auto = cpu_workspace(AlgoChoice::Auto, &p, &dirs, Isa::detect());
        assert!(auto > ws + fwd, "{auto} {ws}");
    }
}
