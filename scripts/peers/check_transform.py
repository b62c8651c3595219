#!/usr/bin/env python3
"""Compare cnnbench's eval transform of one image with torchvision's.

Usage:

    .venv/bin/python scripts/peers/check_transform.py IMAGE NPY [--size 224]
        [--tolerance 0.02]

IMAGE is a JPEG or PNG; NPY is cnnbench's dump of the same image through
its eval transform (`cnnbench data dump`): float32, HWC, [size, size, 3],
normalized. The reference is what torchvision's ImageFolder would feed a
network at evaluation: PIL's `Image.open(f).convert("RGB")` (ImageFolder's
loader), then Resize(round(size*256/224)) (256 for 224), CenterCrop(size),
ToTensor, Normalize(ImageNet mean, std), permuted to HWC.

Prints the mean and max absolute difference (in normalized units; one 8-bit
level is about 1/255/0.225 = 0.017) and the share of values more than one
level apart. The two differ by JPEG decoders' roundings (libjpeg-turbo's
IDCT and chroma upsampling against zune-jpeg's) and resamplers' (Pillow's
against fast_image_resize's, same filter): a few hundredths at most.

Exits 1 if the mean difference is above --tolerance (0.02), 2 on bad input.
"""

import argparse
import sys

import numpy as np
import PIL
import torch
import torchvision
from PIL import Image
from torchvision import transforms

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
ONE_LEVEL = 1.0 / 255.0 / max(STD)


class Parser(argparse.ArgumentParser):
    def error(self, message):
        sys.stderr.write(f"check_transform.py: error: {message}\n")
        sys.exit(2)


def reference(path, size):
    """torchvision's eval recipe on PIL, as HWC float32."""
    with open(path, "rb") as f:
        img = Image.open(f).convert("RGB")
    t = transforms.Compose([
        transforms.Resize(round(size * 256 / 224)),
        transforms.CenterCrop(size),
        transforms.ToTensor(),
        transforms.Normalize(MEAN, STD),
    ])
    return t(img).permute(1, 2, 0).contiguous().numpy()


def main(argv):
    p = Parser(description="Compare cnnbench's eval transform of an image with torchvision's.")
    p.add_argument("image")
    p.add_argument("npy")
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--tolerance", type=float, default=0.02)
    a = p.parse_args(argv)
    if a.size < 1:
        p.error(f"--size must be at least 1, got {a.size}")
    try:
        want = reference(a.image, a.size)
    except (OSError, PIL.UnidentifiedImageError) as e:
        p.error(f"cannot read '{a.image}': {e}")
    try:
        got = np.load(a.npy)
    except (OSError, ValueError) as e:
        p.error(f"cannot read '{a.npy}': {e}")
    if got.shape != want.shape:
        p.error(f"{a.npy} is {list(got.shape)}, expected {list(want.shape)} (HWC, --size {a.size})")
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    mean, worst = float(diff.mean()), float(diff.max())
    over = float((diff > 1.5 * ONE_LEVEL).mean())
    ok = mean <= a.tolerance
    print(f"{a.image}: mean |diff| {mean:.5f}, max {worst:.5f}, "
          f"{100 * over:.2f}% of values more than one level apart "
          f"(torch {torch.__version__}, torchvision {torchvision.__version__}, "
          f"pillow {PIL.__version__}): {'ok' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
