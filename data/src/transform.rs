//! torchvision's ImageNet transforms, into NHWC f32.
//!
//! API CONTRACT (the loader and the CLI code against these; keep the
//! signatures):

/// Which of torchvision's recipes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransformKind {
    /// RandomResizedCrop(size) + RandomHorizontalFlip + Normalize.
    Train,
    /// Resize(shorter side to round(size·256/224)) + CenterCrop(size) + Normalize.
    Eval,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transform {
    pub kind: TransformKind,
    /// The output's side: 224, 227 (AlexNet), 299 (Inception-V3).
    pub size: usize,
}

/// Seconds one image spent per stage (reading the file is the loader's).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StageTimes {
    pub decode: f64,
    /// Crop, resize, flip.
    pub augment: f64,
    /// Normalizing into the batch's f32 slot.
    pub copy: f64,
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

/// Buffers one thread reuses from image to image (decoded pixels, resize
/// destination), so nothing is allocated per pixel.
#[derive(Default)]
pub struct Scratch {}

/// Decodes `bytes` (JPEG or PNG, told by their first bytes), converts to
/// RGB as PIL's `convert("RGB")` does, applies `t` with the randomness of
/// `seed` (train: crop and flip), and writes `t.size`² pixels as NHWC f32,
/// normalized, into `out` (length `t.size`²·3).
pub fn load_image(
    bytes: &[u8],
    t: &Transform,
    seed: u64,
    scratch: &mut Scratch,
    out: &mut [f32],
) -> Result<StageTimes, ImageError> {
    let _ = (bytes, t, seed, scratch, out);
    Err(ImageError("not implemented yet".into()))
}
