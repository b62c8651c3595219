//! Inception-v3 (Szegedy et al. 2015) as torchvision's
//! `inception_v3(aux_logits=False)`: 299x299 input, every convolution a
//! `BasicConv2d` (batch norm eps 0.001), the 5x5 and 7x7 convolutions
//! factorised into 1xn and nx1, no auxiliary head.

use super::basic_conv2d;
use crate::net::{Builder, ConvSpec, Dims, Graph, TensorId};

/// Stride 1, `kh x kw`, padded to keep the size.
fn same(oc: usize, kh: usize, kw: usize) -> ConvSpec {
    ConvSpec {
        kw,
        pw: kw / 2,
        ..ConvSpec::square(oc, kh, 1, kh / 2)
    }
}

/// `k x k`, stride `s`, no padding.
fn valid(oc: usize, k: usize, s: usize) -> ConvSpec {
    ConvSpec::square(oc, k, s, 0)
}

pub fn inception_v3() -> Graph {
    let (mut builder, x) = Builder::new("inception-v3", Dims::new(299, 299, 3));
    let b = &mut builder;
    let x = basic_conv2d(b, "Conv2d_1a_3x3", x, valid(32, 3, 2));
    let x = basic_conv2d(b, "Conv2d_2a_3x3", x, valid(32, 3, 1));
    let x = basic_conv2d(b, "Conv2d_2b_3x3", x, same(64, 3, 3));
    let x = b.max_pool("maxpool1", x, 3, 2, 0);
    let x = basic_conv2d(b, "Conv2d_3b_1x1", x, same(80, 1, 1));
    let x = basic_conv2d(b, "Conv2d_4a_3x3", x, valid(192, 3, 1));
    let x = b.max_pool("maxpool2", x, 3, 2, 0);

    let x = inception_a(b, "Mixed_5b", x, 32);
    let x = inception_a(b, "Mixed_5c", x, 64);
    let x = inception_a(b, "Mixed_5d", x, 64);
    let x = inception_b(b, "Mixed_6a", x);
    let x = inception_c(b, "Mixed_6b", x, 128);
    let x = inception_c(b, "Mixed_6c", x, 160);
    let x = inception_c(b, "Mixed_6d", x, 160);
    let x = inception_c(b, "Mixed_6e", x, 192);
    let x = inception_d(b, "Mixed_7a", x);
    let x = inception_e(b, "Mixed_7b", x);
    let x = inception_e(b, "Mixed_7c", x);

    let x = b.global_avg_pool("avgpool", x);
    let x = b.dropout("dropout", x, 0.5);
    let x = b.linear("fc", x, 1000);
    builder.finish(x)
}

/// 35x35 module (the paper's figure 5, 5x5 kept as one convolution).
fn inception_a(b: &mut Builder, m: &str, x: TensorId, pool_features: usize) -> TensorId {
    let n = |s: &str| format!("{m}.{s}");
    let b1 = basic_conv2d(b, &n("branch1x1"), x, same(64, 1, 1));
    let b5 = basic_conv2d(b, &n("branch5x5_1"), x, same(48, 1, 1));
    let b5 = basic_conv2d(b, &n("branch5x5_2"), b5, same(64, 5, 5));
    let b3 = basic_conv2d(b, &n("branch3x3dbl_1"), x, same(64, 1, 1));
    let b3 = basic_conv2d(b, &n("branch3x3dbl_2"), b3, same(96, 3, 3));
    let b3 = basic_conv2d(b, &n("branch3x3dbl_3"), b3, same(96, 3, 3));
    let bp = b.avg_pool(&n("avgpool"), x, 3, 1, 1);
    let bp = basic_conv2d(b, &n("branch_pool"), bp, same(pool_features, 1, 1));
    b.concat(&n("cat"), &[b1, b5, b3, bp])
}

/// Grid reduction 35x35 → 17x17.
fn inception_b(b: &mut Builder, m: &str, x: TensorId) -> TensorId {
    let n = |s: &str| format!("{m}.{s}");
    let b3 = basic_conv2d(b, &n("branch3x3"), x, valid(384, 3, 2));
    let bd = basic_conv2d(b, &n("branch3x3dbl_1"), x, same(64, 1, 1));
    let bd = basic_conv2d(b, &n("branch3x3dbl_2"), bd, same(96, 3, 3));
    let bd = basic_conv2d(b, &n("branch3x3dbl_3"), bd, valid(96, 3, 2));
    let bp = b.max_pool(&n("maxpool"), x, 3, 2, 0);
    b.concat(&n("cat"), &[b3, bd, bp])
}

/// 17x17 module with 7x7 factorised into 1x7 and 7x1 (figure 6).
fn inception_c(b: &mut Builder, m: &str, x: TensorId, c7: usize) -> TensorId {
    let n = |s: &str| format!("{m}.{s}");
    let b1 = basic_conv2d(b, &n("branch1x1"), x, same(192, 1, 1));
    let b7 = basic_conv2d(b, &n("branch7x7_1"), x, same(c7, 1, 1));
    let b7 = basic_conv2d(b, &n("branch7x7_2"), b7, same(c7, 1, 7));
    let b7 = basic_conv2d(b, &n("branch7x7_3"), b7, same(192, 7, 1));
    let bd = basic_conv2d(b, &n("branch7x7dbl_1"), x, same(c7, 1, 1));
    let bd = basic_conv2d(b, &n("branch7x7dbl_2"), bd, same(c7, 7, 1));
    let bd = basic_conv2d(b, &n("branch7x7dbl_3"), bd, same(c7, 1, 7));
    let bd = basic_conv2d(b, &n("branch7x7dbl_4"), bd, same(c7, 7, 1));
    let bd = basic_conv2d(b, &n("branch7x7dbl_5"), bd, same(192, 1, 7));
    let bp = b.avg_pool(&n("avgpool"), x, 3, 1, 1);
    let bp = basic_conv2d(b, &n("branch_pool"), bp, same(192, 1, 1));
    b.concat(&n("cat"), &[b1, b7, bd, bp])
}

/// Grid reduction 17x17 → 8x8.
fn inception_d(b: &mut Builder, m: &str, x: TensorId) -> TensorId {
    let n = |s: &str| format!("{m}.{s}");
    let b3 = basic_conv2d(b, &n("branch3x3_1"), x, same(192, 1, 1));
    let b3 = basic_conv2d(b, &n("branch3x3_2"), b3, valid(320, 3, 2));
    let b7 = basic_conv2d(b, &n("branch7x7x3_1"), x, same(192, 1, 1));
    let b7 = basic_conv2d(b, &n("branch7x7x3_2"), b7, same(192, 1, 7));
    let b7 = basic_conv2d(b, &n("branch7x7x3_3"), b7, same(192, 7, 1));
    let b7 = basic_conv2d(b, &n("branch7x7x3_4"), b7, valid(192, 3, 2));
    let bp = b.max_pool(&n("maxpool"), x, 3, 2, 0);
    b.concat(&n("cat"), &[b3, b7, bp])
}

/// 8x8 module with expanded 1x3 / 3x1 branches (figure 7).
fn inception_e(b: &mut Builder, m: &str, x: TensorId) -> TensorId {
    let n = |s: &str| format!("{m}.{s}");
    let b1 = basic_conv2d(b, &n("branch1x1"), x, same(320, 1, 1));
    let b3 = basic_conv2d(b, &n("branch3x3_1"), x, same(384, 1, 1));
    let b3a = basic_conv2d(b, &n("branch3x3_2a"), b3, same(384, 1, 3));
    let b3b = basic_conv2d(b, &n("branch3x3_2b"), b3, same(384, 3, 1));
    let b3 = b.concat(&n("branch3x3_cat"), &[b3a, b3b]);
    let bd = basic_conv2d(b, &n("branch3x3dbl_1"), x, same(448, 1, 1));
    let bd = basic_conv2d(b, &n("branch3x3dbl_2"), bd, same(384, 3, 3));
    let bda = basic_conv2d(b, &n("branch3x3dbl_3a"), bd, same(384, 1, 3));
    let bdb = basic_conv2d(b, &n("branch3x3dbl_3b"), bd, same(384, 3, 1));
    let bd = b.concat(&n("branch3x3dbl_cat"), &[bda, bdb]);
    let bp = b.avg_pool(&n("avgpool"), x, 3, 1, 1);
    let bp = basic_conv2d(b, &n("branch_pool"), bp, same(192, 1, 1));
    b.concat(&n("cat"), &[b1, b3, bd, bp])
}
