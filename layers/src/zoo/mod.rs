//! The model zoo: hand-assembled networks, each a short builder that reads
//! like its paper's table.
//!
//! Layer names follow torchvision's module names where torchvision defines
//! the model (`layer1.0.conv1`, `features.0`, `Mixed_5b.branch1x1.conv`).
//! What torchvision applies as a function or reuses as one module (ReLUs,
//! residual adds, concatenations, pools inside a module) gets an invented
//! name that is unique in the model (`layer1.0.relu2`, `layer1.0.add`,
//! `Mixed_5b.cat`). These classify into ImageNet's 1000 classes; the
//! Keras examples of seed 001 ([`keras`]) follow Keras's names and
//! datasets.

mod alexnet;
mod googlenet;
mod inception;
pub mod keras;
mod resnet;
#[cfg(test)]
mod tests;
mod vgg;

use crate::net::{Builder, ConvSpec, Graph, TensorId};
use resnet::Block;

/// Every model, in the order `cnnbench model all` runs them.
pub const NAMES: &[&str] = &[
    "alexnet",
    "googlenet",
    "inception-v3",
    "vgg16",
    "vgg19",
    "resnet18",
    "resnet34",
    "resnet50",
    "resnet101",
    "resnet152",
    "resnet200",
    "mnist-mlp",
    "mnist-cnn",
    "cifar10-cnn",
    "imdb-fasttext",
    "imdb-bilstm",
    "lstm-text",
];

/// The model called `name`, or `None`.
pub fn build(name: &str) -> Option<Graph> {
    Some(match name {
        "alexnet" => alexnet::alexnet(),
        "googlenet" => googlenet::googlenet(),
        "inception-v3" => inception::inception_v3(),
        "vgg16" => vgg::vgg(name, &vgg::VGG16),
        "vgg19" => vgg::vgg(name, &vgg::VGG19),
        "resnet18" => resnet::resnet(name, Block::Basic, [2, 2, 2, 2]),
        "resnet34" => resnet::resnet(name, Block::Basic, [3, 4, 6, 3]),
        "resnet50" => resnet::resnet(name, Block::Bottleneck, [3, 4, 6, 3]),
        "resnet101" => resnet::resnet(name, Block::Bottleneck, [3, 4, 23, 3]),
        "resnet152" => resnet::resnet(name, Block::Bottleneck, [3, 8, 36, 3]),
        "resnet200" => resnet::preresnet(name, [3, 24, 36, 3]),
        "mnist-mlp" => keras::mnist_mlp(),
        "mnist-cnn" => keras::mnist_cnn(),
        "cifar10-cnn" => keras::cifar10_cnn(),
        "imdb-fasttext" => keras::imdb_fasttext(),
        "imdb-bilstm" => keras::imdb_bilstm(),
        "lstm-text" => keras::lstm_text(),
        _ => return None,
    })
}

/// torchvision's `BasicConv2d` (GoogLeNet, Inception-v3): a convolution
/// without bias, batch norm with eps 0.001, ReLU; layers `{name}.conv`,
/// `{name}.bn`, `{name}.relu`.
fn basic_conv2d(b: &mut Builder, name: &str, x: TensorId, s: ConvSpec) -> TensorId {
    let x = b.conv(&format!("{name}.conv"), x, s);
    let x = b.bn_eps(&format!("{name}.bn"), x, 1e-3);
    b.relu(&format!("{name}.relu"), x)
}
