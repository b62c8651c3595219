//! Batch-file lines: the options a line may start with (cnnbench's
//! `--cell=`/`--direction=`, benchdnn's `--alg=`/`--activation=`), then the
//! descriptor; and whole batch files of them.

use super::cell::{Cell, Direction};
use super::desc::{shown, RnnProblem};
use anyhow::{bail, Result};
use clap::ValueEnum;

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
    crate::problem::read_batch(source, crate::problem::builtin::RNN, |line| {
        parse_line(line, cell, direction)
    })
}
