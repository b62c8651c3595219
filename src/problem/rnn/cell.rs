//! The recurrent cell and the direction a sequence is read in: what a
//! descriptor leaves to options (`--cell`, `--direction`).

use clap::ValueEnum;

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
