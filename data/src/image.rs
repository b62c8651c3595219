//! The bottom of the crate: the decoded image ([`Rgb`]) and the one-line
//! error of an image that cannot be used ([`ImageError`]), which decoding
//! and the transforms both speak, so that each imports them from here and
//! neither from the other.

/// An image decoded to RGB8, rows packed, in a buffer kept for the next.
#[derive(Default)]
pub struct Rgb {
    pub width: usize,
    pub height: usize,
    /// `width·height·3` bytes (the buffer may be longer).
    pub pixels: Vec<u8>,
    /// The PNG decoder's own output before conversion to RGB.
    pub(crate) png_raw: Vec<u8>,
}

impl Rgb {
    pub fn data(&self) -> &[u8] {
        &self.pixels[..self.width * self.height * 3]
    }

    /// `pixels` grown to at least `len` bytes (never shrunk: the next
    /// image reuses it).
    pub(crate) fn grow(&mut self, len: usize) -> &mut [u8] {
        if self.pixels.len() < len {
            self.pixels.resize(len, 0);
        }
        &mut self.pixels[..len]
    }
}

/// Why an image was skipped, in one line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageError(pub String);

impl std::fmt::Display for ImageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ImageError {}
