//! Tensor shapes, per image.

/// One image's tensor: `h x w x c`, channels innermost. Fully connected
/// layers produce `1 x 1 x features`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dims {
    pub h: usize,
    pub w: usize,
    pub c: usize,
}

impl Dims {
    pub fn new(h: usize, w: usize, c: usize) -> Dims {
        Dims { h, w, c }
    }
    /// Elements per image.
    pub fn len(&self) -> usize {
        self.h * self.w * self.c
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl std::fmt::Display for Dims {
    /// `64x56x56` in the C x H x W order papers print.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.h == 1 && self.w == 1 {
            write!(f, "{}", self.c)
        } else {
            write!(f, "{}x{}x{}", self.c, self.h, self.w)
        }
    }
}
