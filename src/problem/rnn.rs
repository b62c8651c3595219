//! Recurrent-layer problem descriptors in oneDNN benchdnn's RNN syntax
//! (`tests/benchdnn/doc/driver_rnn.md`), and batch files of them.
//!
//! `l1t25mb16sic512`, `l2_t50_mb32_sic256_slc128_n"speech"`, or, as a line
//! of a batch file, `--cell=gru --direction=bidirectional-concat
//! l1t750mb32sic2816`.
//!
//! Rules, as benchdnn has them: `_` is ignored; `l` layers (default 1), `t`
//! time steps (default 1), `mb` batch (default 2), `sic` the state size
//! (required), `slc` the first layer's input size (default sic), `dhc` the
//! hidden size (default sic), `dic` the output size (default dhc). `n`
//! starts the name and comes last: `n"..."` quoted, or unquoted to the end
//! of the descriptor as benchdnn reads it (then without spaces or quotes).
//!
//! What benchdnn accepts and cnnbench does not: a projection (`dic !=
//! dhc`, LSTM only in oneDNN), and a state size other than the hidden size
//! (`sic != dhc`), which only a projection makes meaningful. cuDNN's and
//! PyTorch's cells, which cnnbench times and checks against, have neither.
//! Only printable ASCII is read, so that every message about a descriptor
//! stays on one line.

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use std::fmt;

/// The largest value any size in a descriptor may take: far beyond any
/// real layer (DeepBench's largest is 4096 wide and 1500 steps long), yet
/// small enough that a single typo is refused at once rather than after
/// trying to allocate.
pub const MAX_DIM: usize = 1 << 20;

/// The recurrent cell, as cuDNN (`cudnnRNNMode_t`) and PyTorch (`nn.RNN`,
/// `nn.LSTM`, `nn.GRU`) define it, with the weights in PyTorch's layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, ValueEnum)]
pub enum Cell {
    /// Elman RNN with ReLU (cuDNN's CUDNN_RNN_RELU, DeepBench's "vanilla")
    #[value(name = "rnn-relu")]
    RnnRelu,
    /// Elman RNN with tanh (CUDNN_RNN_TANH)
    #[value(name = "rnn-tanh")]
    RnnTanh,
    /// LSTM without peepholes or projection (CUDNN_LSTM)
    #[value(name = "lstm")]
    Lstm,
    /// GRU with the reset gate applied after the recurrent GEMM (CUDNN_GRU;
    /// oneDNN's LBR_GRU)
    #[value(name = "gru")]
    Gru,
}

impl Cell {
    #[cfg(test)]
    pub const ALL: [Cell; 4] = [Cell::RnnRelu, Cell::RnnTanh, Cell::Lstm, Cell::Gru];

    /// The name `--cell` takes and reports print.
    pub fn name(self) -> &'static str {
        match self {
            Cell::RnnRelu => "rnn-relu",
            Cell::RnnTanh => "rnn-tanh",
            Cell::Lstm => "lstm",
            Cell::Gru => "gru",
        }
    }

    /// Gates per cell: how many `dhc`-row blocks its weight matrices have
    /// (PyTorch's `weight_ih_l0` is `[gates·dhc, in]`).
    pub fn gates(self) -> usize {
        match self {
            Cell::RnnRelu | Cell::RnnTanh => 1,
            Cell::Lstm => 4,
            Cell::Gru => 3,
        }
    }
}

/// Which way the sequence is read, and how two directions combine. The
/// names are cnnbench's; benchdnn's `concat` and `sum` are accepted too.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, ValueEnum)]
pub enum Direction {
    /// First step to last
    #[value(name = "left2right")]
    Left2Right,
    /// Last step to first
    #[value(name = "right2left")]
    Right2Left,
    /// Both ways, the two outputs side by side (2·dhc features)
    #[value(name = "bidirectional-concat", alias = "concat")]
    BidirectionalConcat,
    /// Both ways, the two outputs added (dhc features)
    #[value(name = "bidirectional-sum", alias = "sum")]
    BidirectionalSum,
}

impl Direction {
    #[cfg(test)]
    pub const ALL: [Direction; 4] = [
        Direction::Left2Right,
        Direction::Right2Left,
        Direction::BidirectionalConcat,
        Direction::BidirectionalSum,
    ];

    /// The name `--direction` takes and reports print.
    pub fn name(self) -> &'static str {
        match self {
            Direction::Left2Right => "left2right",
            Direction::Right2Left => "right2left",
            Direction::BidirectionalConcat => "bidirectional-concat",
            Direction::BidirectionalSum => "bidirectional-sum",
        }
    }

    /// How many directions run, each with its own weights and states.
    pub fn directions(self) -> usize {
        match self {
            Direction::Left2Right | Direction::Right2Left => 1,
            Direction::BidirectionalConcat | Direction::BidirectionalSum => 2,
        }
    }

    /// Features of each layer's output, which is also the input of the
    /// layer after it.
    pub fn output_channels(self, dhc: usize) -> usize {
        match self {
            Direction::BidirectionalConcat => dhc.saturating_mul(2),
            _ => dhc,
        }
    }
}

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

/// The descriptor's number keys, in `Fields::vals` order. Matched longest
/// first: no key is a prefix of another, so the order only has to keep
/// the slots stable.
const KEYS: [&str; 7] = ["l", "t", "mb", "sic", "slc", "dhc", "dic"];

/// What a descriptor's text says, before defaults and validation.
#[derive(Default)]
struct Fields {
    vals: [Option<usize>; 7],
    name: Option<String>,
}

impl Fields {
    fn get(&self, key: &str) -> Option<usize> {
        KEYS.iter()
            .position(|k| *k == key)
            .and_then(|i| self.vals[i])
    }
}

impl RnnProblem {
    /// Parses and validates one descriptor (no options: see `parse_line`)
    /// for `cell` and `direction`.
    pub fn parse(desc: &str, cell: Cell, direction: Direction) -> Result<RnnProblem> {
        tokenize(desc)
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
    fn checked_flops(&self) -> Option<u64> {
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
    /// part of it (see `cli::rnn::reproducer` for a whole batch line).
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
fn shown(s: &str) -> String {
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

fn tokenize(desc: &str) -> Result<Fields> {
    if desc.trim().is_empty() {
        bail!("empty problem descriptor");
    }
    if let Some((at, c)) = desc
        .char_indices()
        .find(|(_, c)| !(*c == ' ' || c.is_ascii_graphic()))
    {
        bail!(
            "character '{}' at byte {at}: only printable ASCII is read",
            c.escape_default()
        );
    }
    let mut fields = Fields::default();
    let mut i = 0;
    while i < desc.len() {
        let rest = &desc[i..];
        if rest.starts_with('_') {
            i += 1;
            continue;
        }
        if let Some(after) = rest.strip_prefix('n') {
            fields.name = Some(name(after)?);
            break;
        }
        let Some(key) = KEYS.iter().find(|k| rest.starts_with(**k)) else {
            let bad: String = rest
                .chars()
                .take_while(|c| !c.is_ascii_digit() && *c != '_')
                .collect();
            if bad.is_empty() {
                // A number where a key belongs: name the number.
                let num: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
                bail!(
                    "number '{num}' has no key before it (expected one of l t mb sic slc dhc dic)"
                );
            }
            bail!("unknown token '{bad}' (expected one of l t mb sic slc dhc dic n\"NAME\")");
        };
        i += key.len();
        let digits: String = desc[i..]
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        if digits.is_empty() {
            let got = desc[i..]
                .chars()
                .next()
                .map_or("end of input".to_string(), |c| format!("'{c}'"));
            bail!("'{key}' must be followed by a number, got {got}");
        }
        i += digits.len();
        let value: usize = digits
            .parse()
            .map_err(|_| anyhow::anyhow!("'{key}{digits}' is too large (at most {MAX_DIM})"))?;
        let slot = KEYS
            .iter()
            .position(|k| k == key)
            .context("key is in KEYS")?;
        if fields.vals[slot].replace(value).is_some() {
            bail!("'{key}' given twice");
        }
    }
    Ok(fields)
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

/// benchdnn's `--alg` values that name a cell cnnbench runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Alg {
    VanillaRnn,
    VanillaLstm,
    LbrGru,
}

/// benchdnn's `--activation` values that cnnbench reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Activation {
    Relu,
    Tanh,
    Undef,
}

/// The options a batch-file line may start with, before resolving them
/// against the defaults.
#[derive(Default)]
struct LineOptions {
    cell: Option<Cell>,
    direction: Option<Direction>,
    alg: Option<(Alg, String)>,
    activation: Option<(Activation, String)>,
}

impl LineOptions {
    fn set(&mut self, opt: &str) -> Result<()> {
        let Some((key, value)) = opt.split_once('=') else {
            bail!(
                "option '{}' needs a value after '=', as in --cell=lstm",
                shown(opt)
            );
        };
        let v = shown(value);
        let twice = || anyhow::anyhow!("'{key}' given twice");
        match key {
            "--cell" => {
                let c = Cell::from_str(value, false).map_err(|_| {
                    anyhow::anyhow!("unknown cell '{v}' (expected rnn-relu, rnn-tanh, lstm or gru)")
                })?;
                if self.cell.replace(c).is_some() {
                    return Err(twice());
                }
            }
            "--direction" => {
                let d = Direction::from_str(value, false).map_err(|_| {
                    anyhow::anyhow!(
                        "unknown direction '{v}' (expected left2right, right2left, \
                         bidirectional-concat or bidirectional-sum)"
                    )
                })?;
                if self.direction.replace(d).is_some() {
                    return Err(twice());
                }
            }
            "--alg" => {
                let a = alg(value)?;
                if self.alg.replace((a, v)).is_some() {
                    return Err(twice());
                }
            }
            "--activation" => {
                let a = activation(value)?;
                if self.activation.replace((a, v)).is_some() {
                    return Err(twice());
                }
            }
            _ => bail!(
                "unknown option '{}' (a line may start with --cell=, --direction=, \
                 or benchdnn's --alg= and --activation=)",
                shown(key)
            ),
        }
        Ok(())
    }

    /// The line's cell: `--cell`, or benchdnn's `--alg` (with
    /// `--activation` for VANILLA_RNN, RELU when absent as in benchdnn),
    /// else `default`.
    fn cell(&self, default: Cell) -> Result<Cell> {
        use Activation::*;
        Ok(match (self.cell, &self.alg, &self.activation) {
            (Some(_), Some(_), _) => bail!("both --cell and --alg given: give one"),
            (Some(_), None, Some(_)) => bail!(
                "--activation goes with --alg=VANILLA_RNN; with --cell, \
                 name the cell: --cell=rnn-relu or --cell=rnn-tanh"
            ),
            (Some(c), None, None) => c,
            (None, None, Some(_)) => bail!("--activation needs --alg=VANILLA_RNN on the same line"),
            (None, None, None) => default,
            (None, Some((Alg::VanillaRnn, _)), None | Some((Relu, _))) => Cell::RnnRelu,
            (None, Some((Alg::VanillaRnn, _)), Some((Tanh, _))) => Cell::RnnTanh,
            (None, Some((Alg::VanillaRnn, _)), Some((Undef, _))) => {
                bail!("--alg=VANILLA_RNN needs --activation=RELU or TANH, not UNDEF")
            }
            (None, Some((Alg::VanillaLstm, _)), None | Some((Undef, _))) => Cell::Lstm,
            (None, Some((Alg::LbrGru, _)), None | Some((Undef, _))) => Cell::Gru,
            (None, Some((_, a)), Some((_, act))) => {
                bail!("--activation={act} applies only to --alg=VANILLA_RNN, not --alg={a}")
            }
        })
    }
}

/// benchdnn's `--alg`, compared without case as benchdnn does. Its
/// VANILLA_GRU is refused, not mapped: oneDNN's vanilla GRU multiplies the
/// reset gate into the state before the recurrent GEMM, while cuDNN's and
/// PyTorch's GRU (cnnbench's `gru`) applies it after, which oneDNN calls
/// LBR_GRU ("linear before reset"). Mapping one onto the other would time
/// a different cell under the name asked for.
fn alg(value: &str) -> Result<Alg> {
    let v = shown(value);
    Ok(match value.to_ascii_uppercase().as_str() {
        "VANILLA_RNN" => Alg::VanillaRnn,
        "VANILLA_LSTM" => Alg::VanillaLstm,
        "LBR_GRU" => Alg::LbrGru,
        "VANILLA_GRU" => bail!(
            "--alg={v}: oneDNN's VANILLA_GRU applies the reset gate before the recurrent GEMM; \
             cnnbench's gru is cuDNN's and PyTorch's, oneDNN's LBR_GRU: write --alg=LBR_GRU \
             or --cell=gru to time that"
        ),
        "VANILLA_AUGRU" | "LBR_AUGRU" => {
            bail!("--alg={v}: attention-update GRUs are not in cuDNN or PyTorch, so not here")
        }
        _ if value.contains(',') => {
            bail!("--alg={v}: one value per line here (benchdnn's lists are not expanded)")
        }
        _ => bail!(
            "unknown --alg '{v}' (expected VANILLA_RNN, VANILLA_LSTM or LBR_GRU, \
             or use --cell=)"
        ),
    })
}

/// benchdnn's `--activation`, for VANILLA_RNN, compared without case.
fn activation(value: &str) -> Result<Activation> {
    let v = shown(value);
    Ok(match value.to_ascii_uppercase().as_str() {
        "RELU" => Activation::Relu,
        "TANH" => Activation::Tanh,
        "UNDEF" => Activation::Undef,
        "LOGISTIC" => bail!(
            "--activation={v}: an RNN with a logistic activation is not in cuDNN or PyTorch; \
             use RELU or TANH"
        ),
        _ => bail!("unknown --activation '{v}' (expected RELU or TANH)"),
    })
}

/// Parses one batch-file line: options, then the descriptor.
///
/// The options (`--cell=X`, `--direction=X`, and benchdnn's `--alg=` and
/// `--activation=`) apply to this line only and override `cell` and
/// `direction`; unlike benchdnn's they do not carry over to later lines,
/// so each line reads the same wherever it is moved. benchdnn's values map
/// as follows:
///
/// - `--alg=VANILLA_RNN` with `--activation=RELU` (or none, benchdnn's
///   default): `rnn-relu`; with `--activation=TANH`: `rnn-tanh`;
/// - `--alg=VANILLA_LSTM`: `lstm`;
/// - `--alg=LBR_GRU`: `gru` (see `alg` for why VANILLA_GRU is refused);
/// - `--activation=UNDEF` is accepted with LSTM and GRU, where benchdnn's
///   files write it;
/// - `--direction=concat` and `--direction=sum`: the bidirectional ones.
pub fn parse_line(line: &str, cell: Cell, direction: Direction) -> Result<RnnProblem> {
    let mut rest = line.trim();
    let mut opts = LineOptions::default();
    while rest.starts_with("--") {
        let end = rest
            .find(|c: char| c.is_ascii_whitespace())
            .unwrap_or(rest.len());
        opts.set(&rest[..end])?;
        rest = rest[end..].trim_start();
    }
    if rest.is_empty() {
        bail!("options but no problem descriptor in '{}'", shown(line));
    }
    let cell = opts.cell(cell)?;
    let direction = opts.direction.unwrap_or(direction);
    RnnProblem::parse(rest, cell, direction).map_err(|e| {
        match rest.split_whitespace().find(|w| w.starts_with("--")) {
            Some(opt) => anyhow::anyhow!(
                "option '{}' after the descriptor: options come first on a line",
                shown(opt)
            ),
            None => e,
        }
    })
}

/// Reads RNN problems from `builtin:NAME` or a batch file, as `load_batch`
/// reads convolutions (`#` comments, blank lines, a UTF-8 BOM, errors
/// naming `origin:line`); each line goes through `parse_line`.
pub fn load_rnn_batch(source: &str, cell: Cell, direction: Direction) -> Result<Vec<RnnProblem>> {
    super::read_batch(source, super::builtin::RNN, |line| {
        parse_line(line, cell, direction)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proptest_support::config;
    use proptest::prelude::*;

    const L2R: Direction = Direction::Left2Right;

    fn parse(s: &str) -> RnnProblem {
        RnnProblem::parse(s, Cell::Lstm, L2R).unwrap_or_else(|e| panic!("{s}: {e:#}"))
    }

    fn err(s: &str) -> String {
        format!("{:#}", RnnProblem::parse(s, Cell::Lstm, L2R).expect_err(s))
    }

    fn line_err(s: &str) -> String {
        format!("{:#}", parse_line(s, Cell::Lstm, L2R).expect_err(s))
    }

    #[test]
    fn defaults_follow_benchdnn() {
        let p = parse("sic4");
        assert_eq!(
            (p.layers, p.t, p.mb, p.sic, p.slc, p.dhc, p.dic),
            (1, 1, 2, 4, 4, 4, 4)
        );
        assert_eq!((p.cell, p.direction, p.name), (Cell::Lstm, L2R, None));
        // dic defaults to dhc, and dhc to sic.
        let p = parse("l1t25mb16sic512");
        assert_eq!((p.t, p.mb, p.slc, p.dhc, p.dic), (25, 16, 512, 512, 512));
    }

    #[test]
    fn every_key_and_both_name_forms() {
        let p = parse(r#"l3_t5_mb7_sic8_slc6_dhc8_dic8_n"all keys: here""#);
        assert_eq!(
            (p.layers, p.t, p.mb, p.sic, p.slc, p.dhc, p.dic),
            (3, 5, 7, 8, 6, 8, 8)
        );
        assert_eq!(p.name.as_deref(), Some("all keys: here"));
        // Keys in any order, leading zeros, underscores anywhere.
        let q = parse("_dic8dhc8slc6sic8mb07t5l3__");
        assert_eq!((q.layers, q.t, q.mb, q.slc), (3, 5, 7, 6));
        // benchdnn's unquoted name runs to the end.
        let n = parse("l1t2mb2sic4_ndeepbench-gru-h4:x");
        assert_eq!(n.name.as_deref(), Some("deepbench-gru-h4:x"));
    }

    #[test]
    fn cells_and_directions() {
        assert_eq!(Cell::ALL.map(Cell::gates), [1, 1, 4, 3]);
        assert_eq!(Direction::ALL.map(Direction::directions), [1, 1, 2, 2]);
        assert_eq!(Direction::ALL.map(|d| d.output_channels(5)), [5, 5, 10, 5]);
        for c in Cell::ALL {
            assert_eq!(Cell::from_str(c.name(), false), Ok(c));
        }
        for d in Direction::ALL {
            assert_eq!(Direction::from_str(d.name(), false), Ok(d));
        }
        assert_eq!(
            Direction::from_str("concat", false),
            Ok(Direction::BidirectionalConcat)
        );
    }

    #[test]
    fn canonical_round_trips() {
        for s in [
            "l1t25mb16sic512",
            "l2t3mb2sic6slc4",
            r#"l4t1mb1sic3slc1000n"a name with spaces""#,
            "l1t1mb2sic4nplain",
        ] {
            for cell in Cell::ALL {
                for direction in Direction::ALL {
                    let p = RnnProblem::parse(s, cell, direction).unwrap();
                    let again = RnnProblem::parse(&p.to_string(), cell, direction).unwrap();
                    assert_eq!(p, again, "{s} -> {p}");
                }
            }
        }
        assert_eq!(parse("sic4").to_string(), "l1t1mb2sic4");
        assert_eq!(
            parse("t5_sic4_slc3_dhc4_dic4_nx").to_string(),
            r#"l1t5mb2sic4slc3n"x""#
        );
    }

    #[test]
    fn bad_descriptors_are_one_named_line() {
        for (desc, has) in [
            ("", "empty"),
            ("l1t2mb2", "'sic' is missing"),
            ("l1t0mb2sic4", "'t' must be between 1 and 1048576, got 0"),
            ("l0sic4", "'l' must be between 1"),
            ("mb0sic4", "'mb' must be between 1"),
            ("sic0", "'sic' must be between 1"),
            ("sic4slc0", "'slc' must be between 1"),
            ("sic1048577", "got 1048577"),
            ("sic4dhc0", "'dhc' must be between 1"),
            ("sic4dic0", "'dic' must be between 1"),
            ("t99999999999999999999999sic4", "too large"),
            (
                "l1t2mb2sic4dic8",
                "projection (dic != dhc) is not supported",
            ),
            ("sic4dhc8dic4", "projection (dic != dhc) is not supported"),
            ("sic4dhc8", "sic4 != dhc8"),
            ("l1t2mb2sic4xyz", "unknown token 'xyz'"),
            ("l1t2mb2sic4_5", "number '5' has no key"),
            ("l1t2mb2sic4t3", "'t' given twice"),
            ("l1t-2sic4", "must be followed by a number, got '-'"),
            ("sic4mb", "got end of input"),
            ("sic4 t2", "unknown token ' t'"),
            ("sic4n\"open", "unterminated"),
            ("sic4n\"a\"t2", "comes last"),
            ("sic4n\"a\"n\"b\"", "'n' given twice"),
            ("sic4n", "empty name"),
            ("sic4n\"\"", "empty name"),
            ("sic4na\"b", "quote inside"),
            ("sic4na b", "space in the unquoted name"),
            ("sic4n\"a#b\"", "'#'"),
            ("sic4\nt2", "character '\\n' at byte 4"),
            ("sic4\u{1b}[2J", "character '\\u{1b}'"),
            ("sic4né", "character '\\u{e9}'"),
            (
                "l1048576t1048576mb1048576sic1048576",
                "gate activations kept for the backward pass",
            ),
        ] {
            let e = err(desc);
            assert!(e.contains(has), "{desc:?}: wanted {has:?} in {e}");
            assert!(!e.contains('\n') && !e.contains('\u{1b}'), "{desc:?}: {e}");
            assert!(e.starts_with("in problem '"), "{e}");
        }
        assert!(err("l1t2mb2sic4xyz").contains("'l1t2mb2sic4xyz'"));
        assert!(err("sic4\nt2").contains(r"'sic4\nt2'"));
    }

    #[test]
    fn sizes_at_the_limit_are_counted_not_wrapped() {
        // LSTM, 2^20 steps of 2^20 sequences, 512 wide: 2^62 FLOPs, which
        // a u64 holds; twice as wide, 2^64, which it does not.
        let p = parse("l1t1048576mb1048576sic512");
        assert_eq!(p.checked_flops().unwrap(), 1u64 << 62);
        assert_eq!(p.weights_len(), 4 * 512 * (512 + 512 + 2));
        assert!(err("l1t1048576mb1048576sic1024").contains("the FLOP count overflows 64 bits"));
        // Every size at the limit: the weights still fit (about 2^63
        // elements), the gate activations kept for the backward pass
        // (2^82) do not.
        let wide = err("l1048576t1048576mb1048576sic1048576");
        assert!(wide.contains("gate activations"), "{wide}");
    }

    #[test]
    fn flops_and_weights_by_hand() {
        // GRU (3 gates), two layers, both directions concatenated: layer 0
        // reads slc 3, layer 1 reads 2·dhc = 8.
        let p = RnnProblem::parse("l2t5mb2sic4slc3", Cell::Gru, Direction::BidirectionalConcat)
            .unwrap();
        let (gh, tb) = (3 * 4, 5 * 2);
        let want = 2 * (2 * tb * gh * (3 + 4) + 2 * tb * gh * (8 + 4));
        assert_eq!(p.checked_flops(), Some(want as u64));
        assert_eq!(p.weights_len(), 2 * (gh * (3 + 4 + 2) + gh * (8 + 4 + 2)));
        // Summing the directions keeps the next layer's input at dhc.
        let s =
            RnnProblem::parse("l2t5mb2sic4slc3", Cell::Gru, Direction::BidirectionalSum).unwrap();
        assert_eq!(s.weights_len(), 2 * (gh * (3 + 4 + 2) + gh * (4 + 4 + 2)));
    }

    #[test]
    fn option_prefixed_lines() {
        let p = parse_line(
            "--cell=gru --direction=bidirectional-concat  l1t25mb16sic512",
            Cell::Lstm,
            L2R,
        )
        .unwrap();
        assert_eq!(
            (p.cell, p.direction, p.t),
            (Cell::Gru, Direction::BidirectionalConcat, 25)
        );
        // No options: the defaults passed in.
        let p = parse_line("sic4", Cell::RnnTanh, Direction::Right2Left).unwrap();
        assert_eq!(
            (p.cell, p.direction),
            (Cell::RnnTanh, Direction::Right2Left)
        );
        // benchdnn's spellings.
        for (opts, cell) in [
            ("--alg=VANILLA_RNN", Cell::RnnRelu),
            ("--alg=VANILLA_RNN --activation=RELU", Cell::RnnRelu),
            ("--activation=tanh --alg=vanilla_rnn", Cell::RnnTanh),
            ("--alg=VANILLA_LSTM", Cell::Lstm),
            ("--alg=VANILLA_LSTM --activation=UNDEF", Cell::Lstm),
            ("--alg=LBR_GRU", Cell::Gru),
        ] {
            let p = parse_line(&format!("{opts} --direction=sum sic4"), Cell::RnnTanh, L2R)
                .unwrap_or_else(|e| panic!("{opts}: {e:#}"));
            assert_eq!(p.cell, cell, "{opts}");
            assert_eq!(p.direction, Direction::BidirectionalSum);
        }
        // A reproducer line reads back as the problem it came from.
        let p = RnnProblem::parse("l2t3mb4sic5slc7nx y", Cell::Gru, Direction::Right2Left);
        assert!(p.is_err());
        let p = RnnProblem::parse(r#"l2t3mb4sic5slc7n"x y""#, Cell::Gru, Direction::Right2Left)
            .unwrap();
        let line = format!(
            "--cell={} --direction={} {p}",
            p.cell.name(),
            p.direction.name()
        );
        assert_eq!(parse_line(&line, Cell::Lstm, L2R).unwrap(), p);
    }

    #[test]
    fn bad_options_are_one_line() {
        for (line, has) in [
            ("--cell=lstn sic4", "unknown cell 'lstn'"),
            ("--cell lstm sic4", "needs a value"),
            ("--cell=lstm --cell=gru sic4", "'--cell' given twice"),
            ("--direction=up sic4", "unknown direction 'up'"),
            ("--prop=FWD_D sic4", "unknown option '--prop'"),
            ("--cell=lstm", "no problem descriptor"),
            ("sic4 --cell=lstm", "after the descriptor"),
            ("--alg=VANILLA_GRU sic4", "LBR_GRU"),
            ("--alg=LBR_AUGRU sic4", "not in cuDNN"),
            ("--alg=VANILLA_RNN,VANILLA_LSTM sic4", "one value per line"),
            ("--alg=LSTM sic4", "unknown --alg 'LSTM'"),
            ("--alg=VANILLA_RNN --activation=LOGISTIC sic4", "logistic"),
            ("--alg=VANILLA_RNN --activation=UNDEF sic4", "not UNDEF"),
            (
                "--alg=VANILLA_LSTM --activation=TANH sic4",
                "only to --alg=VANILLA_RNN",
            ),
            ("--activation=TANH sic4", "needs --alg=VANILLA_RNN"),
            (
                "--cell=lstm --alg=VANILLA_LSTM sic4",
                "both --cell and --alg",
            ),
            ("--cell=lstm --activation=RELU sic4", "--cell=rnn-relu"),
            ("--cell=\u{1b}[2J sic4", "'\\u{1b}[2J'"),
            ("--cell=gru sic4dic8", "projection"),
        ] {
            let e = line_err(line);
            assert!(e.contains(has), "{line:?}: wanted {has:?} in {e}");
            assert!(!e.contains('\n') && !e.contains('\u{1b}'), "{line:?}: {e}");
        }
    }

    #[test]
    fn batch_files_carry_line_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("rnns.txt");
        let path = f.to_str().unwrap();
        std::fs::write(
            &f,
            "\u{feff}--cell=gru l1t2sic4 # first\n\n# a comment\n  --direction=concat t3sic4  \nsic4xyz\n",
        )
        .unwrap();
        let e = format!("{:#}", load_rnn_batch(path, Cell::Lstm, L2R).unwrap_err());
        assert!(
            e.starts_with(&format!("{path}:5: in problem 'sic4xyz'")),
            "{e}"
        );
        std::fs::write(
            &f,
            "\u{feff}--cell=gru l1t2sic4 # first\n\n# a comment\n  --direction=concat t3sic4  \n",
        )
        .unwrap();
        let list = load_rnn_batch(path, Cell::Lstm, L2R).unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!((list[0].cell, list[0].direction), (Cell::Gru, L2R));
        assert_eq!(
            (list[1].cell, list[1].direction, list[1].t),
            (Cell::Lstm, Direction::BidirectionalConcat, 3)
        );
        std::fs::write(&f, "# nothing\n").unwrap();
        let e = format!("{:#}", load_rnn_batch(path, Cell::Lstm, L2R).unwrap_err());
        assert!(e.contains("no problems"), "{e}");
        // Each kind of list only where it can be read.
        let e = format!(
            "{:#}",
            load_rnn_batch("builtin:resnet50", Cell::Lstm, L2R).unwrap_err()
        );
        assert!(
            e.contains("unknown built-in list 'resnet50' (known: deepbench-rnn)"),
            "{e}"
        );
        let e = format!(
            "{:#}",
            super::super::load_batch("builtin:deepbench-rnn").unwrap_err()
        );
        assert!(e.contains("(known: resnet50)"), "{e}");
    }

    #[test]
    fn deepbench_training_set() {
        let list = load_rnn_batch("builtin:deepbench-rnn", Cell::Lstm, L2R).unwrap();
        assert_eq!(list.len(), 52);
        let count = |c: Cell| list.iter().filter(|p| p.cell == c).count();
        assert_eq!(
            Cell::ALL.map(count),
            [12, 0, 22, 18],
            "rnn-relu, rnn-tanh, lstm, gru"
        );
        let mut shapes: Vec<_> = list
            .iter()
            .map(|p| (p.cell.name(), p.dhc, p.mb, p.t))
            .collect();
        shapes.sort();
        shapes.dedup();
        assert_eq!(shapes.len(), 52, "duplicates in the list");
        let mut names: Vec<_> = list.iter().filter_map(|p| p.name.as_deref()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 52, "names missing or repeated");
        for p in &list {
            assert_eq!(
                (p.layers, p.direction, p.slc, p.dic),
                (1, L2R, p.sic, p.dhc),
                "{p}"
            );
            let cell = if p.cell == Cell::RnnRelu {
                "vanilla"
            } else {
                p.cell.name()
            };
            let want = format!("deepbench-{cell}-h{}-mb{}-t{}", p.dhc, p.mb, p.t);
            assert_eq!(p.name.as_deref(), Some(want.as_str()));
        }
        // LSTM, hidden 512, batch 16, 25 steps: per step an input and a
        // recurrent GEMM, each [16 x 512] x [512 x 4·512]:
        // 2 · 25 · (16·2048·512 + 16·2048·512) = 1,677,721,600.
        let p = list
            .iter()
            .find(|p| p.name.as_deref() == Some("deepbench-lstm-h512-mb16-t25"))
            .unwrap();
        assert_eq!(p.checked_flops().unwrap(), 1_677_721_600);
        assert_eq!(p.checked_flops().unwrap(), 1_677_721_600);
        // weight_ih and weight_hh [2048, 512], two biases [2048].
        assert_eq!(p.weights_len(), 2 * 2048 * 512 + 2 * 2048);
        // The commented-out GRU stays out.
        assert!(!list.iter().any(|p| p.dhc == 2816 && p.t == 1500));
    }

    /// Any problem in range survives display and parse; cell and
    /// direction ride outside the descriptor.
    fn problem() -> impl Strategy<Value = RnnProblem> {
        (
            prop::sample::select(Cell::ALL.to_vec()),
            prop::sample::select(Direction::ALL.to_vec()),
            (1usize..=4, 1usize..=64, 1usize..=64),
            (1usize..=MAX_DIM, 1usize..=MAX_DIM),
            // Printable ASCII but the quote and '#'.
            prop::option::of("[ -!$-~]{1,12}"),
        )
            .prop_map(
                |(cell, direction, (layers, t, mb), (sic, slc), name)| RnnProblem {
                    cell,
                    direction,
                    layers,
                    t,
                    mb,
                    sic,
                    slc,
                    dhc: sic,
                    dic: sic,
                    name,
                },
            )
    }

    proptest! {
        #![proptest_config(config(500))]

        #[test]
        fn display_parses_back(p in problem()) {
            let again = RnnProblem::parse(&p.to_string(), p.cell, p.direction);
            prop_assert_eq!(again.ok(), Some(p));
        }

        /// Whatever the line, no panic, and an error is one line.
        #[test]
        fn any_line_is_read_or_refused_in_one_line(
            line in prop_oneof![
                ".{0,40}",
                "(--(cell|alg|activation|direction)=[A-Za-z_-]{0,12} ){0,3}[ltmbsicdhn_0-9\"]{0,24}",
            ]
        ) {
            if let Err(e) = parse_line(&line, Cell::Lstm, Direction::Left2Right) {
                let msg = format!("{e:#}");
                prop_assert!(!msg.trim().is_empty());
                prop_assert!(!msg.contains('\n') && !msg.contains('\r'), "{}", msg);
            }
        }
    }
}
