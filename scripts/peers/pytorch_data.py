#!/usr/bin/env python3
"""torchvision peer of `cnnbench data bench`: times an ImageFolder DataLoader.

Set up once (creates .venv at the repository root, see setup.sh):

    scripts/peers/setup.sh

Run:

    .venv/bin/python scripts/peers/pytorch_data.py DIR [--batch 64] [--workers N]
        [--transform train|eval] [--size 224] [--images M] [--warmup-batches K]
        [--seed S] [--format json|table]

DIR is an ImageFolder tree (one folder per class), the same tree cnnbench
reads. The pipeline is torchvision's ImageNet recipe, as its reference
training scripts build it:

  train  RandomResizedCrop(size) + RandomHorizontalFlip + ToTensor + Normalize,
         shuffled
  eval   Resize(round(size*256/224)) + CenterCrop(size) + ToTensor + Normalize,
         in order

through `torchvision.datasets.ImageFolder` (PIL decodes: Pillow's bundled
libjpeg-turbo) and `DataLoader(batch_size, shuffle, num_workers=N,
persistent_workers=N > 0, drop_last=True)`. N worker processes each run one
image at a time with torch limited to one thread (DataLoader's default);
N = 0 loads in the main process, with torch set to one thread too, so that
N = 0 and N = 1 both mean one loading thread.

Timing: K warm-up batches first (worker start-up, page cache), then
ceil(M / batch) batches, each whole, timed together with
time.perf_counter() (epochs are restarted as needed; M defaults to the
tree's size, at most 1000, as cnnbench's). images_per_sec counts the
batches' images; mb_per_sec the bytes of their files (MB = 10^6 bytes).

Output: one JSON object (--format json, the default) with tool
"torchvision", the torch/torchvision/pillow versions, workers, batch,
transform, size, images, batches, seconds, images_per_sec, mb_per_sec,
ms_per_batch and the median wait for a batch; or a two-line table. Bad input
prints one line on stderr and exits 2.
"""

import argparse
import json
import os
import statistics
import sys
import time

import PIL
import torch
import torchvision
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


class InputError(Exception):
    """Bad user input: reported as one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message):
        sys.stderr.write(f"pytorch_data.py: error: {message}\n")
        sys.exit(2)


class SizedImageFolder(datasets.ImageFolder):
    """ImageFolder whose samples also carry their file's size in bytes
    (read once here, not while timing), for MB/s."""

    def __init__(self, root, transform):
        super().__init__(root, transform=transform)
        self.file_bytes = [os.path.getsize(path) for path, _ in self.samples]

    def __getitem__(self, index):
        image, target = super().__getitem__(index)
        return image, target, self.file_bytes[index]


def recipe(kind, size):
    """torchvision's ImageNet transforms (references/classification/presets.py)."""
    tail = [transforms.ToTensor(), transforms.Normalize(MEAN, STD)]
    if kind == "train":
        return transforms.Compose([transforms.RandomResizedCrop(size),
                                   transforms.RandomHorizontalFlip(), *tail])
    return transforms.Compose([transforms.Resize(round(size * 256 / 224)),
                               transforms.CenterCrop(size), *tail])


def batches_forever(loader):
    """Batches epoch after epoch (a persistent worker pool is reused)."""
    while True:
        for b in loader:
            yield b


def run(a):
    try:
        ds = SizedImageFolder(a.dir, recipe(a.transform, a.size))
    except (OSError, FileNotFoundError, RuntimeError) as e:
        raise InputError(f"cannot read the ImageFolder tree '{a.dir}': {e}") from None
    if len(ds) < a.batch:
        raise InputError(f"{a.dir} holds {len(ds)} images, fewer than one batch of {a.batch}")
    images = a.images if a.images is not None else min(len(ds), 1000)
    batches = -(-images // a.batch)
    if a.workers == 0:
        torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    loader = DataLoader(ds, batch_size=a.batch, shuffle=a.transform == "train",
                        num_workers=a.workers, persistent_workers=a.workers > 0,
                        drop_last=True)
    it = batches_forever(loader)
    for _ in range(a.warmup_batches):
        next(it)
    waits, nbytes = [], 0
    t0 = time.perf_counter()
    for _ in range(batches):
        t = time.perf_counter()
        x, _, sizes = next(it)
        waits.append((time.perf_counter() - t) * 1e3)
        nbytes += int(sizes.sum())
    seconds = time.perf_counter() - t0
    if tuple(x.shape) != (a.batch, 3, a.size, a.size):
        raise RuntimeError(f"a batch of shape {tuple(x.shape)}")
    n = batches * a.batch
    return {
        "tool": "torchvision",
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "pillow": PIL.__version__,
        "path": a.dir,
        "images_in_tree": len(ds),
        "workers": a.workers,
        "batch": a.batch,
        "transform": a.transform,
        "size": a.size,
        "warmup_batches": a.warmup_batches,
        "images": n,
        "batches": batches,
        "seconds": seconds,
        "images_per_sec": n / seconds,
        "mb_per_sec": nbytes / seconds / 1e6,
        "ms_per_batch": seconds * 1e3 / batches,
        "batch_wait_ms_median": statistics.median(waits),
    }


def table(r):
    head = ["tool", "workers", "batch", "transform", "size", "images", "seconds",
            "images/s", "MB/s", "ms/batch"]
    row = [r["tool"], r["workers"], r["batch"], r["transform"], r["size"], r["images"],
           f"{r['seconds']:.2f}", f"{r['images_per_sec']:.1f}", f"{r['mb_per_sec']:.1f}",
           f"{r['ms_per_batch']:.1f}"]
    widths = [max(len(str(h)), len(str(v))) for h, v in zip(head, row)]
    line = lambda cells: "  ".join(str(c).rjust(w) for c, w in zip(cells, widths))
    return (line(head) + "\n" + line(row) + "\n"
            + f"(torch {r['torch']}, torchvision {r['torchvision']}, pillow {r['pillow']})\n")


def main(argv):
    p = Parser(description="Time torchvision's ImageFolder DataLoader (the peer of cnnbench data bench).")
    p.add_argument("dir")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--transform", choices=["train", "eval"], default="train")
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--images", type=int, default=None,
                   help="images timed, in whole batches (default: the tree, at most 1000)")
    p.add_argument("--warmup-batches", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--format", choices=["json", "table"], default="json")
    a = p.parse_args(argv)
    for name, v, lo in (("--batch", a.batch, 1), ("--workers", a.workers, 0), ("--size", a.size, 1),
                        ("--warmup-batches", a.warmup_batches, 0)):
        if v < lo:
            p.error(f"{name} must be at least {lo}, got {v}")
    if a.images is not None and a.images < 1:
        p.error(f"--images must be at least 1, got {a.images}")
    try:
        r = run(a)
    except InputError as e:
        p.error(str(e))
    sys.stdout.write(json.dumps(r, indent=2) + "\n" if a.format == "json" else table(r))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
