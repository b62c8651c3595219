use super::*;
use crate::net::{Dims, Op};

/// Learnable parameters, as `sum(p.numel() for p in model.parameters())`
/// in PyTorch (torchvision's `num_params` for its models).
const PARAMS: &[(&str, usize)] = &[
    ("alexnet", 60_965_224),
    ("googlenet", 6_624_904),
    ("inception-v3", 23_834_568),
    ("vgg16", 138_357_544),
    ("vgg19", 143_667_240),
    ("resnet18", 11_689_512),
    ("resnet34", 21_797_672),
    ("resnet50", 25_557_032),
    ("resnet101", 44_549_160),
    ("resnet152", 60_192_808),
    ("resnet200", 64_672_808),
    // Keras's `model.summary()` totals for its examples.
    ("mnist-mlp", 669_706),
    ("mnist-cnn", 1_199_882),
    ("cifar10-cnn", 1_250_858),
    ("imdb-fasttext", 1_000_051),
    ("imdb-bilstm", 2_658_945),
    ("lstm-text", 102_585),
];

/// What each model classifies into (sigmoid models: one logit).
fn classes(name: &str) -> usize {
    match name {
        "mnist-mlp" | "mnist-cnn" | "cifar10-cnn" => 10,
        "imdb-fasttext" | "imdb-bilstm" => 1,
        "lstm-text" => keras::NIETZSCHE_CHARS,
        _ => 1000,
    }
}

fn model(name: &str) -> Graph {
    build(name).unwrap_or_else(|| panic!("no model {name}"))
}

fn dims(g: &Graph, layer: &str) -> Dims {
    let n = g.nodes.iter().find(|n| n.name == layer);
    n.unwrap_or_else(|| panic!("{}: no layer {layer}", g.name))
        .out
}

#[test]
fn zoo_every_model_builds_with_its_name() {
    assert_eq!(NAMES.len(), PARAMS.len());
    for &name in NAMES {
        let g = model(name);
        assert_eq!(g.name, name);
        assert_eq!(g.classes(), classes(name), "{name}");
    }
    assert!(build("resnet").is_none());
}

#[test]
fn zoo_parameter_counts_match_the_references() {
    for (&name, &(pname, params)) in NAMES.iter().zip(PARAMS) {
        assert_eq!(name, pname);
        assert_eq!(model(name).params(), params, "{name}");
    }
}

#[test]
fn zoo_spot_shapes() {
    let d = Dims::new;
    assert_eq!(dims(&model("alexnet"), "pool5"), d(6, 6, 256));
    assert_eq!(dims(&model("alexnet"), "conv2"), d(27, 27, 256));
    assert_eq!(dims(&model("googlenet"), "maxpool1"), d(56, 56, 64));
    assert_eq!(dims(&model("googlenet"), "inception5b.cat"), d(7, 7, 1024));
    assert_eq!(dims(&model("inception-v3"), "maxpool2"), d(35, 35, 192));
    assert_eq!(dims(&model("inception-v3"), "Mixed_6e.cat"), d(17, 17, 768));
    assert_eq!(dims(&model("inception-v3"), "Mixed_7c.cat"), d(8, 8, 2048));
    assert_eq!(dims(&model("vgg16"), "features.30"), d(7, 7, 512));
    assert_eq!(dims(&model("vgg19"), "features.36"), d(7, 7, 512));
    assert_eq!(dims(&model("resnet18"), "layer4.1.relu2"), d(7, 7, 512));
    assert_eq!(
        dims(&model("resnet50"), "layer1.0.downsample.1"),
        d(56, 56, 256)
    );
    assert_eq!(dims(&model("resnet50"), "layer2.0.conv2"), d(28, 28, 128));
    assert_eq!(dims(&model("resnet50"), "layer4.2.relu3"), d(7, 7, 2048));
    assert_eq!(dims(&model("resnet200"), "layer4.2.add"), d(7, 7, 2048));
    assert_eq!(dims(&model("mnist-cnn"), "max_pooling2d_1"), d(12, 12, 64));
    assert_eq!(dims(&model("cifar10-cnn"), "max_pooling2d_2"), d(6, 6, 64));
    assert_eq!(dims(&model("imdb-fasttext"), "embedding_1"), d(1, 400, 50));
    assert_eq!(
        dims(&model("imdb-fasttext"), "global_average_pooling1d_1"),
        d(1, 1, 50)
    );
    assert_eq!(dims(&model("imdb-bilstm"), "bidirectional_1"), d(1, 1, 128));
    assert_eq!(dims(&model("lstm-text"), "lstm_1"), d(1, 1, 128));
}

#[test]
fn zoo_keras_models_take_ids_and_labels_as_their_losses_need() {
    for name in ["imdb-fasttext", "imdb-bilstm"] {
        let g = model(name);
        assert_eq!(g.input_vocab(), Some(20_000), "{name}");
        assert_eq!(g.label_classes(), 2, "{name}");
        let ids = crate::net::init::input(&g, 3, 1);
        assert!(ids
            .iter()
            .all(|&v| v.fract() == 0.0 && (0.0..20_000.0).contains(&v)));
    }
    let g = model("lstm-text");
    assert_eq!((g.input_vocab(), g.label_classes()), (None, 57));
    // The LSTM's parameters are named as PyTorch's, with Keras's one bias.
    let names: Vec<&str> = (0..6)
        .map(|k| model("imdb-bilstm").nodes[2].op.spec().param_name(k))
        .collect();
    assert_eq!(names[..3], ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0"]);
    assert_eq!(names[5], "bias_ih_l0_reverse");
}

#[test]
fn zoo_bn_networks_have_no_conv_bias() {
    for &name in NAMES {
        let g = model(name);
        let has_bn = g.nodes.iter().any(|n| matches!(n.op, Op::BatchNorm { .. }));
        for n in &g.nodes {
            if let Op::Conv(s) = n.op {
                assert_eq!(s.bias, !has_bn, "{name}: {}", n.name);
            }
        }
    }
}

#[test]
fn zoo_resnet50_macs() {
    // torchvision reports 4.09 "GFLOPS", which are multiply-accumulates.
    let macs = model("resnet50").macs();
    assert_eq!(macs, 4_089_184_256);
    assert!((macs as f64 / 4.09e9 - 1.0).abs() < 0.01);
}

/// Prints `model name params macs`, then every layer for comparison with
/// PyTorch (`name kind h w c`, and
/// for convolutions `ic oc kh kw sh sw ph pw g bias ih iw`):
/// `cargo test -p cnnbench-layers zoo_dump -- --ignored --nocapture`.
#[test]
#[ignore]
fn zoo_dump() {
    for &name in NAMES {
        let g = model(name);
        println!("model {name} {} {}", g.params(), g.macs());
        for (i, n) in g.nodes.iter().enumerate() {
            let o = n.out;
            print!("{} {} {} {} {}", n.name, n.op.kind(), o.h, o.w, o.c);
            if let Op::Conv(s) = n.op {
                let x = g.nodes[n.inputs[0]].out;
                print!(
                    " conv {} {} {} {} {} {} {} {} {} {} {} {}",
                    x.c, s.oc, s.kh, s.kw, s.sh, s.sw, s.ph, s.pw, s.groups, s.bias as u8, x.h, x.w
                );
            }
            println!(" params {}", g.node_params(i));
        }
    }
}
