//! cnnbench's input data: an ImageFolder tree ([`folder`]), each file
//! decoded ([`decode`]) and transformed as torchvision's ImageNet recipe
//! ([`transform`]) by a bounded, prefetching loader on threads of its own
//! ([`loader`]), and synthetic JPEG trees for machines without ImageNet
//! ([`synth`]). At the bottom, what decoding and the transforms share: the
//! decoded image and the error of an unusable one ([`image`]).

pub mod decode;
pub mod folder;
pub mod image;
pub mod loader;
pub mod synth;
pub mod transform;

/// ImageNet's per-channel mean and standard deviation (torchvision's
/// `Normalize` in its ImageNet recipe), RGB.
pub const MEAN: [f32; 3] = [0.485, 0.456, 0.406];
pub const STD: [f32; 3] = [0.229, 0.224, 0.225];
