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

/// Output size along one axis of a convolution or pooling window of `k`,
/// stride `s`, padding `p` (rounded up with `ceil`, as Caffe and PyTorch's
/// `ceil_mode`); `None` when the window is larger than the padded input or
/// the stride is 0.
pub fn out_size(input: usize, k: usize, s: usize, p: usize, ceil: bool) -> Option<usize> {
    let span = (input + 2 * p).checked_sub(k)?;
    if s == 0 {
        return None;
    }
    if !ceil {
        return Some(span / s + 1);
    }
    let mut out = span.div_ceil(s) + 1;
    // PyTorch's rule: the last window must start inside the input or its
    // left padding.
    if (out - 1) * s >= input + p {
        out -= 1;
    }
    Some(out)
}

/// The output `h` and `w` of a `kh x kw` window over `d`, or why it does
/// not fit.
pub fn window_out(
    d: Dims,
    (kh, kw): (usize, usize),
    (sh, sw): (usize, usize),
    (ph, pw): (usize, usize),
    ceil: bool,
) -> Result<(usize, usize), String> {
    if sh == 0 || sw == 0 {
        return Err(format!("has stride {sh}x{sw}: strides start at 1"));
    }
    match (
        out_size(d.h, kh, sh, ph, ceil),
        out_size(d.w, kw, sw, pw, ceil),
    ) {
        (Some(h), Some(w)) => Ok((h, w)),
        _ => Err(format!(
            "a {kh}x{kw} window (stride {sh}x{sw}, padding {ph}x{pw}) does not fit {}x{}",
            d.h, d.w
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_round_like_pytorch() {
        // GoogLeNet's ceil-mode pools: 112 -> 56, 56 -> 28, 14 -> 7.
        assert_eq!(out_size(112, 3, 2, 0, true), Some(56));
        assert_eq!(out_size(14, 3, 2, 0, true), Some(7));
        assert_eq!(out_size(112, 3, 2, 0, false), Some(55));
        // The last window may not start in the right padding.
        assert_eq!(out_size(5, 2, 2, 1, true), Some(3));
        assert_eq!(out_size(4, 2, 2, 1, true), Some(3));
        // AlexNet: 227 -> 55 -> 27.
        assert_eq!(out_size(227, 11, 4, 0, false), Some(55));
        assert_eq!(out_size(55, 3, 2, 0, true), Some(27));
    }

    #[test]
    fn windows_that_cannot_slide_are_refused() {
        assert_eq!(out_size(3, 5, 1, 0, false), None);
        assert_eq!(out_size(3, 5, 1, 1, false), Some(1));
        assert_eq!(out_size(8, 3, 0, 1, false), None);
        let d = Dims::new(3, 3, 1);
        let e = window_out(d, (5, 5), (1, 1), (0, 0), false).unwrap_err();
        assert!(e.contains("does not fit 3x3"), "{e}");
        let e = window_out(d, (1, 1), (0, 1), (0, 0), false).unwrap_err();
        assert!(e.contains("stride 0x1"), "{e}");
    }
}
