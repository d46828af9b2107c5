"""Data files written the way the real tasks' sources lay them out (no downloads): fake MNIST IDX files,
Zhang-style CSVs, an aclImdb tree. Used by tests/tasks/test_real.py and tests/test_contracts.py."""
from __future__ import annotations

import os

import numpy as np

from uwbench.tasks import pixels


def write_mnist(folder, n_train=60, n_test=20, gz=True):
    """Fake MNIST: pixel 0 tells the image's index (train: 1 + i, test: 101 + i)."""
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(0)
    for split, n, base in (("train", n_train, 1), ("t10k", n_test, 101)):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        images[:, 0, 0] = base + np.arange(n)
        labels = (np.arange(n) % 10).astype(np.uint8)
        ext = ".gz" if gz else ""
        pixels.write_idx(os.path.join(folder, f"{split}-images-idx3-ubyte{ext}"), images)
        pixels.write_idx(os.path.join(folder, f"{split}-labels-idx1-ubyte"), labels)  # labels plain


def write_csv(path, rows):
    """Zhang et al. style: every field double-quoted, quotes doubled, line breaks as a literal \\n."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
        for row in rows:
            f.write(",".join('"' + str(x).replace('"', '""') + '"' for x in row) + "\n")


def write_imdb(root, n=3):
    for split in ("train", "test"):
        for sub in ("neg", "pos"):
            folder = os.path.join(root, "aclImdb", split, sub)
            os.makedirs(folder, exist_ok=True)
            for i in range(n):
                text = f"{sub} review {i}.<br /><br />Ünïcödé “quotes” — great!" + " word" * (3 * i)
                with open(os.path.join(folder, f"{i}_{7 if sub == 'pos' else 2}.txt"), "w", encoding="utf-8") as f:
                    f.write(text)
