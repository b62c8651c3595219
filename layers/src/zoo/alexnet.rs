//! AlexNet as BVLC trained it in Caffe (`bvlc_alexnet/train_val.prototxt`),
//! not torchvision's one-GPU variant: 227x227 input, LRN, grouped conv2,
//! conv4 and conv5 (the paper's two GPUs), pools that round up, and Caffe's
//! order conv → relu → norm → pool. Layer names are the prototxt's.

use crate::net::{Builder, ConvSpec, Dims, Graph, LrnSpec};

const LRN: LrnSpec = LrnSpec {
    size: 5,
    alpha: 1e-4,
    beta: 0.75,
    k: 1.0,
};

pub fn alexnet() -> Graph {
    let (mut b, x) = Builder::new("alexnet", Dims::new(227, 227, 3));
    let conv = |oc, k, s, p, g| ConvSpec::square(oc, k, s, p).with_bias().groups(g);

    let x = b.conv("conv1", x, conv(96, 11, 4, 0, 1));
    let x = b.relu("relu1", x);
    let x = b.lrn("norm1", x, LRN);
    let x = b.max_pool_ceil("pool1", x, 3, 2, 0);

    let x = b.conv("conv2", x, conv(256, 5, 1, 2, 2));
    let x = b.relu("relu2", x);
    let x = b.lrn("norm2", x, LRN);
    let x = b.max_pool_ceil("pool2", x, 3, 2, 0);

    let x = b.conv("conv3", x, conv(384, 3, 1, 1, 1));
    let x = b.relu("relu3", x);
    let x = b.conv("conv4", x, conv(384, 3, 1, 1, 2));
    let x = b.relu("relu4", x);
    let x = b.conv("conv5", x, conv(256, 3, 1, 1, 2));
    let x = b.relu("relu5", x);
    let x = b.max_pool_ceil("pool5", x, 3, 2, 0);

    let x = b.linear("fc6", x, 4096);
    let x = b.relu("relu6", x);
    let x = b.dropout("drop6", x, 0.5);
    let x = b.linear("fc7", x, 4096);
    let x = b.relu("relu7", x);
    let x = b.dropout("drop7", x, 0.5);
    let x = b.linear("fc8", x, 1000);
    b.finish(x)
}
