//! Residual networks: torchvision's ResNets (He et al. 2015, v1.5: the
//! bottleneck strides on its 3x3 convolution) and fb.resnet.torch's
//! pre-activation ResNet-200 (He et al. 2016, `models/preresnet.lua`).

use crate::net::{Builder, ConvSpec, Dims, Graph, TensorId};

#[derive(Clone, Copy, Debug)]
pub enum Block {
    /// Two 3x3 convolutions (ResNet-18, -34).
    Basic,
    /// 1x1 reduce, 3x3, 1x1 expand by 4 (ResNet-50 and deeper).
    Bottleneck,
}

/// Widths of the four stages' 3x3 convolutions.
const PLANES: [usize; 4] = [64, 128, 256, 512];

/// torchvision's `resnet{18,34,50,101,152}`, `blocks` per stage.
pub fn resnet(name: &str, block: Block, blocks: [usize; 4]) -> Graph {
    let (mut builder, x) = Builder::new(name, Dims::new(224, 224, 3));
    let b = &mut builder;
    let mut x = stem(b, x);
    for (i, (&count, planes)) in blocks.iter().zip(PLANES).enumerate() {
        for j in 0..count {
            let stride = if i > 0 && j == 0 { 2 } else { 1 };
            let p = format!("layer{}.{j}", i + 1);
            x = match block {
                Block::Basic => basic(b, &p, x, planes, stride),
                Block::Bottleneck => bottleneck(b, &p, x, planes, stride),
            };
        }
    }
    let x = b.global_avg_pool("avgpool", x);
    let x = b.linear("fc", x, 1000);
    builder.finish(x)
}

/// 7x7/2 convolution, batch norm, ReLU, 3x3/2 max pool: 224 → 56.
fn stem(b: &mut Builder, x: TensorId) -> TensorId {
    let x = b.conv("conv1", x, ConvSpec::square(64, 7, 2, 3));
    let x = b.bn("bn1", x);
    let x = b.relu("relu", x);
    b.max_pool("maxpool", x, 3, 2, 1)
}

/// `{p}.conv{i}`, `{p}.bn{i}`, then `{p}.relu{i}` when `relu`.
fn conv_bn(b: &mut Builder, p: &str, i: usize, x: TensorId, s: ConvSpec, relu: bool) -> TensorId {
    let x = b.conv(&format!("{p}.conv{i}"), x, s);
    let x = b.bn(&format!("{p}.bn{i}"), x);
    if relu {
        b.relu(&format!("{p}.relu{i}"), x)
    } else {
        x
    }
}

/// The identity, or a strided 1x1 convolution and batch norm
/// (`{p}.downsample.0`, `.1`) where the shape changes: shortcut type B.
fn shortcut(b: &mut Builder, p: &str, x: TensorId, oc: usize, stride: usize) -> TensorId {
    if stride == 1 && b.dims(x).c == oc {
        return x;
    }
    let x = b.conv(
        &format!("{p}.downsample.0"),
        x,
        ConvSpec::square(oc, 1, stride, 0),
    );
    b.bn(&format!("{p}.downsample.1"), x)
}

fn basic(b: &mut Builder, p: &str, x: TensorId, planes: usize, stride: usize) -> TensorId {
    let y = conv_bn(b, p, 1, x, ConvSpec::square(planes, 3, stride, 1), true);
    let y = conv_bn(b, p, 2, y, ConvSpec::square(planes, 3, 1, 1), false);
    let s = shortcut(b, p, x, planes, stride);
    let y = b.add(&format!("{p}.add"), y, s);
    b.relu(&format!("{p}.relu2"), y)
}

fn bottleneck(b: &mut Builder, p: &str, x: TensorId, planes: usize, stride: usize) -> TensorId {
    let y = conv_bn(b, p, 1, x, ConvSpec::square(planes, 1, 1, 0), true);
    let y = conv_bn(b, p, 2, y, ConvSpec::square(planes, 3, stride, 1), true);
    let y = conv_bn(b, p, 3, y, ConvSpec::square(4 * planes, 1, 1, 0), false);
    let s = shortcut(b, p, x, 4 * planes, stride);
    let y = b.add(&format!("{p}.add"), y, s);
    b.relu(&format!("{p}.relu3"), y)
}

/// fb.resnet.torch's pre-activation ResNet (`models/preresnet.lua`,
/// shortcut type B, ImageNet), `blocks` per stage of bottlenecks.
///
/// Faithful to the Lua rather than to the paper, which the parameter count
/// (64,672,808 for ResNet-200) pins down:
/// - the stem keeps conv1 → BN → ReLU → max pool;
/// - *every* block of the first stage skips its pre-activation BN-ReLU
///   (preresnet.lua passes `'first'` to the whole `layer(...)`, not only
///   its first block);
/// - the other blocks start with BN-ReLU on their input, which feeds only
///   the residual branch; the shortcut takes the raw input and, where the
///   shape changes, is a 1x1 convolution *followed by batch norm*;
/// - no ReLU after the add; one BN-ReLU after the last stage, before the
///   7x7 average pool.
///
/// Convolutions have no bias (ConvInit drops it with cuDNN ≥ 4).
///
/// Against torchvision-style post-activation blocks [3, 24, 36, 3]
/// (64,673,832): the first stage's blocks lose bn3 (−3·2·256), the other
/// stages' first blocks normalise 2n input channels instead of 4n outputs
/// (−2·(256 + 512 + 1024)), the final BN adds 2·2048: −1,024 in all.
/// Against the paper's reading (BN-ReLU before every block but the very
/// first, bare 1x1 shortcut convolutions, 64,666,152): +2·(256 + 512 +
/// 1024 + 2048) for the shortcut BNs, −2·2·256 for layer1.1 and layer1.2.
pub fn preresnet(name: &str, blocks: [usize; 4]) -> Graph {
    let (mut builder, x) = Builder::new(name, Dims::new(224, 224, 3));
    let b = &mut builder;
    let mut x = stem(b, x);
    for (i, (&count, planes)) in blocks.iter().zip(PLANES).enumerate() {
        for j in 0..count {
            let stride = if i > 0 && j == 0 { 2 } else { 1 };
            let p = format!("layer{}.{j}", i + 1);
            x = preact_bottleneck(b, &p, x, planes, stride, i > 0);
        }
    }
    let x = b.bn("bn_final", x);
    let x = b.relu("relu_final", x);
    let x = b.global_avg_pool("avgpool", x);
    let x = b.linear("fc", x, 1000);
    builder.finish(x)
}

/// `{p}.bn0` → `{p}.relu0` (when `preact`) → conv1 → bn1 → relu1 → conv2 →
/// bn2 → relu2 → conv3, plus the shortcut of the block's input.
fn preact_bottleneck(
    b: &mut Builder,
    p: &str,
    x: TensorId,
    planes: usize,
    stride: usize,
    preact: bool,
) -> TensorId {
    let mut y = x;
    if preact {
        y = b.bn(&format!("{p}.bn0"), y);
        y = b.relu(&format!("{p}.relu0"), y);
    }
    let y = conv_bn(b, p, 1, y, ConvSpec::square(planes, 1, 1, 0), true);
    let y = conv_bn(b, p, 2, y, ConvSpec::square(planes, 3, stride, 1), true);
    let y = b.conv(
        &format!("{p}.conv3"),
        y,
        ConvSpec::square(4 * planes, 1, 1, 0),
    );
    let s = shortcut(b, p, x, 4 * planes, stride);
    b.add(&format!("{p}.add"), y, s)
}
