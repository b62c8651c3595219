//! What a recurrent problem is (cell, direction, sizes) and its tensors on
//! the host: each layer and direction's weights, and what the passes
//! produce.

/// A recurrent cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cell {
    RnnRelu,
    RnnTanh,
    Lstm,
    Gru,
}

impl Cell {
    pub const ALL: [Cell; 4] = [Cell::RnnRelu, Cell::RnnTanh, Cell::Lstm, Cell::Gru];

    /// Gates per hidden unit (rows of `weight_ih` per unit).
    pub fn gates(self) -> usize {
        match self {
            Cell::RnnRelu | Cell::RnnTanh => 1,
            Cell::Lstm => 4,
            Cell::Gru => 3,
        }
    }
}

/// Which way the sequence is read, and how two directions combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    Left2Right,
    Right2Left,
    /// Both ways; the outputs side by side (`2h` features).
    Concat,
    /// Both ways; the outputs summed (`h` features).
    Sum,
}

impl Direction {
    pub const ALL: [Direction; 4] = [
        Direction::Left2Right,
        Direction::Right2Left,
        Direction::Concat,
        Direction::Sum,
    ];

    pub fn count(self) -> usize {
        match self {
            Direction::Left2Right | Direction::Right2Left => 1,
            Direction::Concat | Direction::Sum => 2,
        }
    }

    /// Whether direction `d` (0 or 1) reads the sequence backwards.
    pub(super) fn reversed(self, d: usize) -> bool {
        self == Direction::Right2Left || d == 1
    }
}

/// One recurrent problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RnnShape {
    pub cell: Cell,
    pub direction: Direction,
    pub layers: usize,
    /// Time steps.
    pub t: usize,
    pub mb: usize,
    /// Features of the first layer's input.
    pub input: usize,
    pub hidden: usize,
}

impl RnnShape {
    /// Features of each layer's output.
    pub fn output(&self) -> usize {
        match self.direction {
            Direction::Concat => 2 * self.hidden,
            _ => self.hidden,
        }
    }

    /// Features of layer `l`'s input.
    pub fn layer_input(&self, l: usize) -> usize {
        if l == 0 {
            self.input
        } else {
            self.output()
        }
    }

    /// Weight sets: one per layer and direction, `l·directions + d`.
    pub fn sets(&self) -> usize {
        self.layers * self.direction.count()
    }

    /// The shapes of set `s`'s `weight_ih`, `weight_hh`, `bias_ih`,
    /// `bias_hh`, as PyTorch holds them.
    pub fn set_shapes(&self, s: usize) -> [Vec<usize>; 4] {
        let l = s / self.direction.count();
        let gh = self.cell.gates() * self.hidden;
        [
            vec![gh, self.layer_input(l)],
            vec![gh, self.hidden],
            vec![gh],
            vec![gh],
        ]
    }

    pub fn x_len(&self) -> usize {
        self.t * self.mb * self.input
    }

    pub fn y_len(&self) -> usize {
        self.t * self.mb * self.output()
    }

    /// One state tensor (`h` or, for the LSTM, `c`): every layer and
    /// direction.
    pub fn state_len(&self) -> usize {
        self.sets() * self.mb * self.hidden
    }

    /// GEMM FLOPs (2 per multiply-add) of the forward pass; each backward
    /// half (data, weights) does the same. The gates' elementwise work is
    /// not counted, as DeepBench does not.
    pub fn flops(&self) -> u64 {
        let gh = (self.cell.gates() * self.hidden) as u64;
        let tb = (self.t * self.mb) as u64;
        (0..self.layers)
            .map(|l| 2 * tb * gh * (self.layer_input(l) + self.hidden) as u64)
            .sum::<u64>()
            * self.direction.count() as u64
    }
}

/// Everything the three passes produce, on the host: the forward's `y`,
/// `hy`, `cy` (LSTM; else empty), the backward data's `dx`, `dhx`, `dcx`
/// (LSTM) and the backward weights' gradients, one set per layer and
/// direction. The reference returns one; the CLI and the GPU path fill one
/// to compare with it.
#[derive(Clone, Debug, Default)]
pub struct Outputs {
    pub y: Vec<f32>,
    pub hy: Vec<f32>,
    pub cy: Vec<f32>,
    pub dx: Vec<f32>,
    pub dhx: Vec<f32>,
    pub dcx: Vec<f32>,
    pub dw: Vec<Weights>,
}

/// One layer and direction's parameters, in PyTorch's layout.
#[derive(Clone, Debug, PartialEq)]
pub struct Weights {
    /// `[gates·h, in]`
    pub w_ih: Vec<f32>,
    /// `[gates·h, h]`
    pub w_hh: Vec<f32>,
    pub b_ih: Vec<f32>,
    pub b_hh: Vec<f32>,
}

impl Weights {
    /// Zeroed parameters of set `s`.
    pub fn zeros(shape: &RnnShape, s: usize) -> Weights {
        let [ih, hh, bi, bh] = shape.set_shapes(s);
        let n = |d: Vec<usize>| crate::alloc::zeroed_huge(d.iter().product());
        Weights {
            w_ih: n(ih),
            w_hh: n(hh),
            b_ih: n(bi),
            b_hh: n(bh),
        }
    }

    pub fn tensors(&self) -> [&[f32]; 4] {
        [&self.w_ih, &self.w_hh, &self.b_ih, &self.b_hh]
    }

    pub fn tensors_mut(&mut self) -> [&mut Vec<f32>; 4] {
        [
            &mut self.w_ih,
            &mut self.w_hh,
            &mut self.b_ih,
            &mut self.b_hh,
        ]
    }
}
