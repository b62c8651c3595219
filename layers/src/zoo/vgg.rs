//! VGG without batch norm (Simonyan & Zisserman 2014), as torchvision's
//! `vgg16` and `vgg19`: 3x3 convolutions with bias, each followed by a ReLU,
//! 2x2 max pools, then Linear-ReLU-Dropout twice and the classifier.

use crate::net::{Builder, ConvSpec, Dims, Graph};

/// A 2x2 max pool in a configuration (torchvision's `"M"`); other entries
/// are the output channels of a 3x3 convolution.
const M: usize = 0;

/// Configuration D.
pub const VGG16: [usize; 18] = [
    64, 64, M, 128, 128, M, 256, 256, 256, M, 512, 512, 512, M, 512, 512, 512, M,
];

/// Configuration E.
pub const VGG19: [usize; 21] = [
    64, 64, M, 128, 128, M, 256, 256, 256, 256, M, 512, 512, 512, 512, M, 512, 512, 512, 512, M,
];

pub fn vgg(name: &str, cfg: &[usize]) -> Graph {
    let (mut b, mut x) = Builder::new(name, Dims::new(224, 224, 3));
    // `features.{i}`, counting the ReLUs as torchvision's Sequential does.
    let mut i = 0;
    for &c in cfg {
        if c == M {
            x = b.max_pool(&format!("features.{i}"), x, 2, 2, 0);
            i += 1;
        } else {
            x = b.conv(
                &format!("features.{i}"),
                x,
                ConvSpec::square(c, 3, 1, 1).with_bias(),
            );
            x = b.relu(&format!("features.{}", i + 1), x);
            i += 2;
        }
    }
    // torchvision's AdaptiveAvgPool2d((7, 7)) is the identity on the 7x7
    // maps of a 224x224 input, so it is left out.
    let x = b.linear("classifier.0", x, 4096);
    let x = b.relu("classifier.1", x);
    let x = b.dropout("classifier.2", x, 0.5);
    let x = b.linear("classifier.3", x, 4096);
    let x = b.relu("classifier.4", x);
    let x = b.dropout("classifier.5", x, 0.5);
    let x = b.linear("classifier.6", x, 1000);
    b.finish(x)
}
