//! GoogLeNet (Inception-v1, Szegedy et al. 2014) as torchvision's
//! `googlenet(aux_logits=False)`: batch norm after every convolution, no
//! LRN, pools that round up, and torchvision's quirk of a 3x3 convolution
//! where the paper's "5x5" branch has a 5x5 one (kept, to match torchvision
//! and its weights).

use super::basic_conv2d;
use crate::net::{Builder, ConvSpec, Dims, Graph, TensorId};

pub fn googlenet() -> Graph {
    let (mut builder, x) = Builder::new("googlenet", Dims::new(224, 224, 3));
    let b = &mut builder;
    let x = basic_conv2d(b, "conv1", x, ConvSpec::square(64, 7, 2, 3));
    let x = b.max_pool_ceil("maxpool1", x, 3, 2, 0);
    let x = basic_conv2d(b, "conv2", x, ConvSpec::square(64, 1, 1, 0));
    let x = basic_conv2d(b, "conv3", x, ConvSpec::square(192, 3, 1, 1));
    let x = b.max_pool_ceil("maxpool2", x, 3, 2, 0);

    // The paper's table 1: #1x1, #3x3 reduce, #3x3, #5x5 reduce, #5x5,
    // pool proj.
    let x = inception(b, "inception3a", x, [64, 96, 128, 16, 32, 32]);
    let x = inception(b, "inception3b", x, [128, 128, 192, 32, 96, 64]);
    let x = b.max_pool_ceil("maxpool3", x, 3, 2, 0);
    let x = inception(b, "inception4a", x, [192, 96, 208, 16, 48, 64]);
    let x = inception(b, "inception4b", x, [160, 112, 224, 24, 64, 64]);
    let x = inception(b, "inception4c", x, [128, 128, 256, 24, 64, 64]);
    let x = inception(b, "inception4d", x, [112, 144, 288, 32, 64, 64]);
    let x = inception(b, "inception4e", x, [256, 160, 320, 32, 128, 128]);
    let x = b.max_pool_ceil("maxpool4", x, 2, 2, 0);
    let x = inception(b, "inception5a", x, [256, 160, 320, 32, 128, 128]);
    let x = inception(b, "inception5b", x, [384, 192, 384, 48, 128, 128]);

    let x = b.global_avg_pool("avgpool", x);
    let x = b.dropout("dropout", x, 0.2);
    let x = b.linear("fc", x, 1000);
    builder.finish(x)
}

/// One Inception module; its output is `{m}.cat`.
fn inception(b: &mut Builder, m: &str, x: TensorId, c: [usize; 6]) -> TensorId {
    let [c1, c3r, c3, c5r, c5, pool_proj] = c;
    let n = |s: &str| format!("{m}.{s}");
    let b1 = basic_conv2d(b, &n("branch1"), x, ConvSpec::square(c1, 1, 1, 0));
    let b2 = basic_conv2d(b, &n("branch2.0"), x, ConvSpec::square(c3r, 1, 1, 0));
    let b2 = basic_conv2d(b, &n("branch2.1"), b2, ConvSpec::square(c3, 3, 1, 1));
    let b3 = basic_conv2d(b, &n("branch3.0"), x, ConvSpec::square(c5r, 1, 1, 0));
    // 3x3, not the paper's 5x5: torchvision's.
    let b3 = basic_conv2d(b, &n("branch3.1"), b3, ConvSpec::square(c5, 3, 1, 1));
    let b4 = b.max_pool_ceil(&n("branch4.0"), x, 3, 1, 1);
    let b4 = basic_conv2d(b, &n("branch4.1"), b4, ConvSpec::square(pool_proj, 1, 1, 0));
    b.concat(&n("cat"), &[b1, b2, b3, b4])
}
