//! Built-in problem lists, in benchdnn batch-file form.

/// The 23 distinct convolutions of ResNet-50 (torchvision / fb.resnet.torch,
/// stride on the 3x3) at batch 16 and 224x224, in network order. Where two
/// layers share a shape (layer1's conv3 and its downsample), the first name
/// stands for both.
const RESNET50: &str = r#"# ResNet-50 v1.5 convolutions, batch 16, 224x224
mb16ic3ih224oc64oh112kh7sh2ph3n"resnet50:conv1"
mb16ic64ih56oc64oh56kh1n"resnet50:layer1.0.conv1"
mb16ic64ih56oc64oh56kh3ph1n"resnet50:layer1.0.conv2"
mb16ic64ih56oc256oh56kh1n"resnet50:layer1.0.conv3"
mb16ic256ih56oc64oh56kh1n"resnet50:layer1.1.conv1"
mb16ic256ih56oc128oh56kh1n"resnet50:layer2.0.conv1"
mb16ic128ih56oc128oh28kh3sh2ph1n"resnet50:layer2.0.conv2"
mb16ic128ih28oc512oh28kh1n"resnet50:layer2.0.conv3"
mb16ic256ih56oc512oh28kh1sh2n"resnet50:layer2.0.downsample"
mb16ic512ih28oc128oh28kh1n"resnet50:layer2.1.conv1"
mb16ic128ih28oc128oh28kh3ph1n"resnet50:layer2.1.conv2"
mb16ic512ih28oc256oh28kh1n"resnet50:layer3.0.conv1"
mb16ic256ih28oc256oh14kh3sh2ph1n"resnet50:layer3.0.conv2"
mb16ic256ih14oc1024oh14kh1n"resnet50:layer3.0.conv3"
mb16ic512ih28oc1024oh14kh1sh2n"resnet50:layer3.0.downsample"
mb16ic1024ih14oc256oh14kh1n"resnet50:layer3.1.conv1"
mb16ic256ih14oc256oh14kh3ph1n"resnet50:layer3.1.conv2"
mb16ic1024ih14oc512oh14kh1n"resnet50:layer4.0.conv1"
mb16ic512ih14oc512oh7kh3sh2ph1n"resnet50:layer4.0.conv2"
mb16ic512ih7oc2048oh7kh1n"resnet50:layer4.0.conv3"
mb16ic1024ih14oc2048oh7kh1sh2n"resnet50:layer4.0.downsample"
mb16ic2048ih7oc512oh7kh1n"resnet50:layer4.1.conv1"
mb16ic512ih7oc512oh7kh3ph1n"resnet50:layer4.1.conv2"
"#;

const LISTS: [(&str, &str); 1] = [("resnet50", RESNET50)];

pub fn lookup(name: &str) -> Option<&'static str> {
    LISTS.iter().find(|(n, _)| *n == name).map(|(_, l)| *l)
}

pub fn names() -> Vec<&'static str> {
    LISTS.iter().map(|(n, _)| *n).collect()
}
