//! The RNN descriptor itself: its sizes, read through the shared scanner
//! and checked, and the sizes derived from them (FLOPs, weights).

use super::cell::{Cell, Direction};
use crate::problem::fields::{scan, Fault, Fields, Syntax};
use anyhow::{bail, Context, Result};
use std::fmt;

/// The largest value any size in a descriptor may take: far beyond any
/// real layer (DeepBench's largest is 4096 wide and 1500 steps long), yet
/// small enough that a single typo is refused at once rather than after
/// trying to allocate.
pub const MAX_DIM: usize = 1 << 20;

/// A parsed, validated recurrent problem: the descriptor's sizes, plus the
/// cell and direction, which come from options (the command line's, or
/// those leading a batch-file line) because benchdnn's descriptor has no
/// key for them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RnnProblem {
    pub cell: Cell,
    pub direction: Direction,
    /// Stacked layers.
    pub layers: usize,
    /// Time steps.
    pub t: usize,
    /// Minibatch.
    pub mb: usize,
    /// Features of the recurrent state (hx, cx); equal to `dhc` here.
    pub sic: usize,
    /// Features of the first layer's input.
    pub slc: usize,
    /// Hidden size: features of each direction's output.
    pub dhc: usize,
    /// Features of the state passed to the next step; equal to `dhc` here
    /// (no projection).
    pub dic: usize,
    pub name: Option<String>,
}

/// benchdnn's RNN descriptor, for the shared scanner.
struct RnnSyntax;

impl Syntax for RnnSyntax {
    /// The descriptor's number keys, in `Fields` slot order. Matched longest
    /// first: no key is a prefix of another, so the order only has to keep
    /// the slots stable.
    const KEYS: &'static [&'static str] = &["l", "t", "mb", "sic", "slc", "dhc", "dic"];

    fn check_text(desc: &str) -> Result<()> {
        if let Some((at, c)) = desc
            .char_indices()
            .find(|(_, c)| !(*c == ' ' || c.is_ascii_graphic()))
        {
            bail!(
                "character '{}' at byte {at}: only printable ASCII is read",
                c.escape_default()
            );
        }
        Ok(())
    }

    /// The name runs to the end of the descriptor (see `name`).
    fn name(_desc: &str, after: &str, _named: bool) -> Result<(String, usize)> {
        Ok((name(after)?, after.len()))
    }

    fn fault(fault: Fault<'_>, _desc: &str) -> String {
        match fault {
            Fault::NumberWithoutKey(num) => {
                format!(
                    "number '{num}' has no key before it (expected one of l t mb sic slc dhc dic)"
                )
            }
            Fault::UnknownToken(bad) => {
                format!("unknown token '{bad}' (expected one of l t mb sic slc dhc dic n\"NAME\")")
            }
            Fault::NoNumber { key, got } => {
                format!("'{key}' must be followed by a number, got {got}")
            }
            Fault::TooLarge { key, digits } => {
                format!("'{key}{digits}' is too large (at most {MAX_DIM})")
            }
            Fault::Twice(key) => format!("'{key}' given twice"),
        }
    }
}

impl RnnProblem {
    /// Parses and validates one descriptor (no options: see `parse_line`)
    /// for `cell` and `direction`.
    pub fn parse(desc: &str, cell: Cell, direction: Direction) -> Result<RnnProblem> {
        scan::<RnnSyntax>(desc)
            .and_then(|f| build(&f, cell, direction))
            .with_context(|| format!("in problem '{}'", shown(desc)))
    }

    /// Inputs of layer `l`: the problem's input for the first, the layer
    /// below's output (both directions' when concatenated) after that.
    pub fn layer_input(&self, l: usize) -> usize {
        if l == 0 {
            self.slc
        } else {
            self.direction.output_channels(self.dhc)
        }
    }

    /// GEMM FLOPs of one pass, 2·m·n·k per GEMM. Per layer and direction,
    /// with `in` the layer's input features:
    ///
    /// - forward: the input GEMM over all steps, 2·t·mb·gates·dhc·in, and
    ///   the recurrent GEMM of each step, 2·t·mb·gates·dhc·dhc in all;
    /// - backward data: the same two sizes (the gradient of the previous
    ///   state at each step, and of the input);
    /// - backward weights: the same two sizes (dW_ih and dW_hh).
    ///
    /// The elementwise gate work (activations, products, bias additions)
    /// is not counted, the convention of DeepBench-style comparisons and of
    /// the cuDNN-based tools (cuDNN's RNN sample counts GEMMs only;
    /// DeepBench itself reports times, which convert with this count): it
    /// is O(t·mb·gates·dhc) per pass, about 1/(in + dhc) of the GEMM work,
    /// and counting it would make GFLOP/s incomparable with theirs.
    ///
    /// `None` past u64: `parse` refuses such a problem, so that the
    /// count the kernels' `RnnShape::flops` makes for records never
    /// wraps.
    pub(super) fn checked_flops(&self) -> Option<u64> {
        let u = |v: usize| u64::try_from(v).ok();
        let per_step = u(self.mb)?
            .checked_mul(u(self.cell.gates())?)?
            .checked_mul(u(self.dhc)?)?
            .checked_mul(u(self.t)?)?
            .checked_mul(2)?;
        let mut sum = 0u64;
        for l in 0..self.layers {
            let k = u(self.layer_input(l))?.checked_add(u(self.dhc)?)?;
            sum = sum.checked_add(per_step.checked_mul(k)?)?;
        }
        sum.checked_mul(u(self.direction.directions())?)
    }

    /// Parameters in PyTorch's layout: per layer and direction,
    /// `weight_ih [gates·dhc, in]`, `weight_hh [gates·dhc, dhc]`,
    /// `bias_ih [gates·dhc]` and `bias_hh [gates·dhc]` (two biases, as
    /// cuDNN's CUDNN_RNN_DOUBLE_BIAS has them).
    ///
    /// Saturates at usize::MAX for a hand-built problem too large to
    /// address; `parse` refuses those.
    #[cfg(test)]
    pub fn weights_len(&self) -> usize {
        self.checked_weights_len().unwrap_or(usize::MAX)
    }

    fn checked_weights_len(&self) -> Option<usize> {
        let rows = self.cell.gates().checked_mul(self.dhc)?;
        let mut sum = 0usize;
        for l in 0..self.layers {
            // weight_ih + weight_hh + the two biases, per row.
            let cols = self.layer_input(l).checked_add(self.dhc)?.checked_add(2)?;
            sum = sum.checked_add(rows.checked_mul(cols)?)?;
        }
        sum.checked_mul(self.direction.directions())
    }

    /// Refuses a problem whose tensors could not be addressed, or whose
    /// FLOP count would not fit in a u64, naming the first such quantity,
    /// so that later size arithmetic never overflows.
    fn check_sizes(&self) -> Result<()> {
        let product = |xs: &[usize]| xs.iter().try_fold(1usize, |a, &x| a.checked_mul(x));
        let dirs = self.direction.directions();
        let out = self.direction.output_channels(self.dhc);
        for (what, count) in [
            ("input (t*mb*slc)", product(&[self.t, self.mb, self.slc])),
            (
                "output (t*mb*output features)",
                product(&[self.t, self.mb, out]),
            ),
            (
                "states (l*directions*mb*dhc)",
                product(&[self.layers, dirs, self.mb, self.dhc]),
            ),
            ("weights", self.checked_weights_len()),
            (
                "gate activations kept for the backward pass (l*directions*t*mb*gates*dhc)",
                product(&[
                    self.layers,
                    dirs,
                    self.t,
                    self.mb,
                    self.cell.gates(),
                    self.dhc,
                ]),
            ),
        ] {
            if count.is_none() {
                bail!("the element count of the {what} overflows: too large to address");
            }
        }
        if self.checked_flops().is_none() {
            bail!("the FLOP count overflows 64 bits");
        }
        Ok(())
    }

    /// The canonical benchdnn string: `l`, `t`, `mb` and `sic` always (so
    /// the problem reads at a glance), `slc`, `dhc` and `dic` only where
    /// they differ from their defaults, and the name last, quoted, as the
    /// convolution descriptors write theirs. Cell and direction are not
    /// part of it (see `driver::rnn::reproducer` for a whole batch line).
    pub fn canonical(&self) -> String {
        let mut s = format!("l{}t{}mb{}sic{}", self.layers, self.t, self.mb, self.sic);
        if self.slc != self.sic {
            s += &format!("slc{}", self.slc);
        }
        if self.dhc != self.sic {
            s += &format!("dhc{}", self.dhc);
        }
        if self.dic != self.dhc {
            s += &format!("dic{}", self.dic);
        }
        if let Some(n) = &self.name {
            s += &format!("n\"{n}\"");
        }
        s
    }
}

impl fmt::Display for RnnProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.canonical())
    }
}

/// `s` as error messages show it: printable ASCII as it is, anything else
/// escaped, so that a newline or a terminal escape in the input cannot
/// break the one-line message or the terminal.
pub(super) fn shown(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c == ' ' || c.is_ascii_graphic() {
                c.to_string()
            } else {
                c.escape_default().to_string()
            }
        })
        .collect()
}

/// The name after `n`: `"..."` quoted, then nothing but `_`; or unquoted,
/// to the end of the descriptor as benchdnn reads it, without spaces or
/// quotes (which would not read back the same). Never empty, never with a
/// `#`, which a batch file would read as the start of a comment.
fn name(after: &str) -> Result<String> {
    let name = if let Some(body) = after.strip_prefix('"') {
        let Some(end) = body.find('"') else {
            bail!("unterminated name n\"...");
        };
        let tail = body[end + 1..].trim_start_matches('_');
        if tail.starts_with('n') {
            bail!("'n' given twice");
        }
        if !tail.is_empty() {
            bail!("'{tail}' after the name: the name n\"...\" comes last");
        }
        &body[..end]
    } else {
        if after.contains('"') {
            bail!("a quote inside the unquoted name '{after}': quote the whole name, n\"...\"");
        }
        if after.contains(' ') {
            bail!("a space in the unquoted name '{after}': quote the name, n\"...\"");
        }
        after
    };
    if name.is_empty() {
        bail!("empty name after 'n'");
    }
    if name.contains('#') {
        bail!("'#' in the name '{name}': a batch file would read the rest as a comment");
    }
    Ok(name.to_string())
}

fn build(f: &Fields, cell: Cell, direction: Direction) -> Result<RnnProblem> {
    let in_range = |key: &str, v: usize| -> Result<usize> {
        if !(1..=MAX_DIM).contains(&v) {
            bail!("'{key}' must be between 1 and {MAX_DIM}, got {v}");
        }
        Ok(v)
    };
    let Some(sic) = f.get("sic") else {
        bail!("'sic' is missing (the state size; slc and dhc default to it)");
    };
    let layers = in_range("l", f.get("l").unwrap_or(1))?;
    let t = in_range("t", f.get("t").unwrap_or(1))?;
    let mb = in_range("mb", f.get("mb").unwrap_or(2))?;
    let sic = in_range("sic", sic)?;
    let slc = in_range("slc", f.get("slc").unwrap_or(sic))?;
    let dhc = in_range("dhc", f.get("dhc").unwrap_or(sic))?;
    let dic = in_range("dic", f.get("dic").unwrap_or(dhc))?;
    if dic != dhc {
        bail!("projection (dic != dhc) is not supported: dic{dic}, dhc{dhc}");
    }
    if sic != dhc {
        bail!("sic{sic} != dhc{dhc}: without a projection the state is the hidden state, so sic must equal dhc");
    }
    let p = RnnProblem {
        cell,
        direction,
        layers,
        t,
        mb,
        sic,
        slc,
        dhc,
        dic,
        name: f.name.clone(),
    };
    p.check_sizes()?;
    Ok(p)
}
