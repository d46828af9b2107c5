"""Flattened-image classification: pixel MNIST and permuted MNIST (paper §3.5), and an offline variant
on scikit-learn's bundled 8x8 digits.

An image is read one pixel per encoder step (input size 1, values scaled to [0, 1]; 784 steps for
MNIST, the paper's "768" is a typo, docs/reference.md §11). The class is read after the last pixel: the decoder
runs one all-zero step and its output (10 logits) is the prediction, scored by cross-entropy and
accuracy (``ClassificationTask``). The permuted variants reorder the pixels of every image by one fixed
permutation drawn from ``permutation_seed``.

Splits. MNIST: the first 50,000 images of the standard training files train, the last 10,000
validate (``val_size``), the 10,000 ``t10k`` images test (paper §3.5: 50k/10k/10k). Digits (1,797
images): one seeded shuffle, then test, validation and training sets in that order.
``sample`` draws training images uniformly with replacement; ``eval_batches`` draws validation images;
``test_batches`` is the test split in file order.

The paper's model settings for this task (GRU controller of 100 units, RMSprop lr 1e-4, memory 15,
cache 10) belong to the studies, not to the task.

MNIST files: the four IDX files (``train-images-idx3-ubyte`` etc., gzipped or not) in ``<data>/mnist/``
(or torchvision's ``<data>/MNIST/raw/``), where ``<data>`` is ``task.data_dir``, ``$UWBENCH_DATA`` or
``./data``.
"""
from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

from uwbench.errors import UserError
from uwbench.registry import TASKS
from uwbench.tasks.base import TEST_CHUNK, Batch, ClassificationTask
from uwbench.tasks.realdata import DataStatus, LazyBatches, data_root, find_first, missing_error

# IDX type codes (third magic byte) -> big-endian numpy dtypes
IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
GZIP_MAGIC = b"\x1f\x8b"

MNIST_FILES = {  # role -> standard file name (also accepted with ".gz")
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
MNIST_FOLDERS = ("mnist", os.path.join("MNIST", "raw"))  # under the data folder; the first is the one we ask for
MNIST_NOTE = "the MNIST database's four IDX files, gzipped or not, e.g. yann.lecun.com/exdb/mnist"
NUM_CLASSES = 10
DIGITS_SIZE = 1797  # images in sklearn.datasets.load_digits


# ---------------------------------------------------------------------------------------------- IDX
class IDXFormatError(UserError):
    """A file that is not a well-formed IDX file; the message names the file and the problem."""


def read_idx(path: str) -> np.ndarray:
    """Read an IDX file (gzip-compressed or plain, detected from its first bytes) into an array.

    Format: magic 0x00 0x00 <type> <ndim>, then ndim big-endian uint32 sizes, then the values.
    """
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise IDXFormatError(f"{path}: a damaged gzip file ({exc})") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise IDXFormatError(f"{path}: not an IDX file (the magic number must start with two zero bytes, "
                             f"got {raw[:4].hex() or 'an empty file'})")
    code, ndim = raw[2], raw[3]
    if code not in IDX_TYPES:
        raise IDXFormatError(f"{path}: unknown IDX type code 0x{code:02x} (known: "
                             f"{', '.join(f'0x{c:02x}' for c in IDX_TYPES)})")
    header = 4 + 4 * ndim
    if ndim < 1 or len(raw) < header:
        raise IDXFormatError(f"{path}: truncated IDX header ({ndim} dimensions, {len(raw)} bytes)")
    shape = tuple(int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    dtype = np.dtype(IDX_TYPES[code])
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(raw) - header != expected:
        raise IDXFormatError(f"{path}: shape {shape} of {dtype.name} needs {expected} data bytes, "
                             f"the file has {len(raw) - header}")
    return np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape).astype(dtype.newbyteorder("="))


def write_idx(path: str, array: np.ndarray) -> None:
    """Write ``array`` as an IDX file (gzip-compressed when ``path`` ends in ``.gz``)."""
    array = np.asarray(array)
    codes = {np.dtype(v).newbyteorder("=").str: k for k, v in IDX_TYPES.items()}
    key = array.dtype.newbyteorder("=").str
    if key not in codes:
        raise ValueError(f"IDX cannot store dtype {array.dtype}; use one of uint8, int8, int16, int32, "
                         "float32, float64")
    code = codes[key]
    header = bytes([0, 0, code, array.ndim]) + np.asarray(array.shape, dtype=">u4").tobytes()
    data = header + array.astype(IDX_TYPES[code]).tobytes()
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wb") as f:
        f.write(data)


# -------------------------------------------------------------------------------------------- MNIST
def _mnist_candidates(root: str, filename: str) -> List[str]:
    return [os.path.join(root, folder, filename + ext) for folder in MNIST_FOLDERS for ext in ("", ".gz")]


def find_mnist(root: str) -> Tuple[Dict[str, str], List[str]]:
    """(role -> path found, missing file names) for the four MNIST files under the data folder."""
    found, missing = {}, []
    for role, filename in MNIST_FILES.items():
        path = find_first(_mnist_candidates(root, filename))
        if path is None:
            missing.append(filename + "(.gz)")
        else:
            found[role] = path
    return found, missing


def mnist_status(data_dir: Optional[str] = None) -> DataStatus:
    root = data_root(data_dir)
    found, missing = find_mnist(root)
    where = os.path.dirname(next(iter(found.values()))) if found and not missing else \
        os.path.join(root, MNIST_FOLDERS[0])
    return DataStatus("mnist", ("pixel_mnist", "pixel_mnist_permuted"), not missing, where, missing, MNIST_NOTE)


def load_mnist(data_dir: Optional[str] = None) -> Dict[str, np.ndarray]:
    """The four MNIST arrays: train/test images (N, 28, 28) uint8 and labels (N,)."""
    root = data_root(data_dir)
    found, missing = find_mnist(root)
    if missing:
        raise missing_error("MNIST", os.path.join(root, MNIST_FOLDERS[0]), missing, data_dir, MNIST_NOTE)
    arrays = {role: read_idx(path) for role, path in found.items()}
    for split in ("train", "test"):
        images, labels = arrays[f"{split}_images"], arrays[f"{split}_labels"]
        if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
            raise IDXFormatError(f"MNIST {split}: expected images (N, rows, cols) and labels (N,), got "
                                 f"{images.shape} and {labels.shape} ({found[f'{split}_images']})")
        if labels.size and not (0 <= labels.min() and labels.max() < NUM_CLASSES):
            raise IDXFormatError(f"MNIST {split}: labels must be in 0..9, got {labels.min()}..{labels.max()}")
    return arrays


# --------------------------------------------------------------------------------------------- task
@dataclass
class PixelMNISTConfig:
    data_dir: Optional[str] = None  # the data folder; None: $UWBENCH_DATA, else ./data
    val_size: int = 10000  # the last val_size training images validate (paper: 50k/10k)
    test_size: Optional[int] = None  # None: all 10,000 test images; N: the first N

    def __post_init__(self):
        if self.val_size < 1:
            raise ValueError(f"`val_size >= 1` must hold, got {self.val_size}")
        if self.test_size is not None and self.test_size < 1:
            raise ValueError(f"`test_size >= 1` must hold, got {self.test_size}")


@dataclass
class PermutedPixelMNISTConfig(PixelMNISTConfig):
    permutation_seed: int = 0  # seeds the one fixed pixel permutation


@dataclass
class DigitsConfig:
    val_size: int = 270  # of scikit-learn's 1,797 8x8 digits (about 15%)
    test_size: int = 270  # about 15%; the remaining 1,257 train
    split_seed: int = 0  # seeds the one shuffle before the split

    def __post_init__(self):
        for name in ("val_size", "test_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"`{name} >= 1` must hold, got {getattr(self, name)}")
        if self.val_size + self.test_size >= DIGITS_SIZE:
            raise ValueError(f"`val_size + test_size < {DIGITS_SIZE}` must hold, got "
                             f"{self.val_size + self.test_size}")


@dataclass
class PermutedDigitsConfig(DigitsConfig):
    permutation_seed: int = 0



def pixel_permutation(n_pixels: int, seed: int) -> torch.Tensor:
    """The fixed pixel order of the permuted variants: a permutation of 0..n_pixels-1 drawn from seed."""
    return torch.randperm(n_pixels, generator=torch.Generator().manual_seed(int(seed)))


class PixelTask(ClassificationTask):
    """Images (N, P) as P one-value steps; a one-step decoder predicts the class."""

    input_size = 1
    output_size = NUM_CLASSES

    def __init__(self, config, name: str, splits: Dict[str, Tuple[np.ndarray, np.ndarray]], scale: float,
                 permutation: Optional[torch.Tensor] = None):
        super().__init__(config)
        self.name = name
        self.scale = float(scale)
        self.permutation = permutation
        # split -> (uint8 images (N, P), int64 labels (N,)); kept as uint8, scaled per batch
        self.splits = {k: (torch.from_numpy(np.ascontiguousarray(x.reshape(len(x), -1))),
                           torch.from_numpy(np.asarray(y, dtype=np.int64))) for k, (x, y) in splits.items()}
        self.n_pixels = self.splits["train"][0].shape[1]
        for split, (x, _) in self.splits.items():
            if len(x) == 0:
                raise UserError(f"the {split} split of {name} is empty")

    def max_encoder_steps(self) -> int:
        return self.n_pixels

    def split_size(self, split: str) -> int:
        return len(self.splits[split][1])

    def make_batch(self, split: str, index: torch.Tensor) -> Batch:
        images, labels = self.splits[split]
        x = images[index].float() / self.scale  # (B, P) in [0, 1]
        if self.permutation is not None:
            x = x[:, self.permutation]
        b = x.shape[0]
        return Batch(inputs=x.unsqueeze(-1),  # (B, P, 1)
                     decoder_inputs=torch.zeros(b, 1, 1),  # (B, 1, 1): one all-zero read-out step
                     targets=labels[index].unsqueeze(1))  # (B, 1)

    def sample_split(self, split: str, batch_size: int, generator: torch.Generator) -> Batch:
        index = torch.randint(0, self.split_size(split), (batch_size,), generator=generator)
        return self.make_batch(split, index)

    def sample(self, batch_size: int, generator: torch.Generator) -> Batch:
        return self.sample_split("train", batch_size, generator)

    def eval_batches(self, n: int, batch_size: int, generator: torch.Generator) -> List[Batch]:
        """``n`` fresh batches of validation images (model selection never sees the test split)."""
        return [self.sample_split("val", batch_size, generator) for _ in range(n)]

    def ordered_batches(self, split: str, limit: Optional[int] = None) -> LazyBatches:
        """The split in file order, in chunks of TEST_CHUNK images (the first ``limit`` only if given)."""
        n = self.split_size(split) if limit is None else min(limit, self.split_size(split))
        return LazyBatches((n + TEST_CHUNK - 1) // TEST_CHUNK,
                           lambda i: self.make_batch(split, torch.arange(i * TEST_CHUNK, min(n, (i + 1) * TEST_CHUNK))))

    def validation_batches(self) -> LazyBatches:
        return self.ordered_batches("val")

    def test_batches(self) -> LazyBatches:
        if self._test is None:
            self._test = self.ordered_batches("test", self.config.test_size)
        return self._test


def _mnist_task(cfg: PixelMNISTConfig, name: str, permutation: Optional[torch.Tensor]) -> PixelTask:
    arrays = load_mnist(cfg.data_dir)
    x, y = arrays["train_images"], arrays["train_labels"]
    if cfg.val_size >= len(x):
        raise UserError(f"`val_size < {len(x)}` (the training images) must hold, got {cfg.val_size}")
    cut = len(x) - cfg.val_size
    splits = {"train": (x[:cut], y[:cut]), "val": (x[cut:], y[cut:]),
              "test": (arrays["test_images"], arrays["test_labels"])}
    return PixelTask(cfg, name, splits, scale=255.0, permutation=permutation)


@TASKS.register("pixel_mnist", config=PixelMNISTConfig,
                help="MNIST read pixel by pixel (784 steps), class after the last pixel (paper §3.5)")
def build_pixel_mnist(cfg: PixelMNISTConfig) -> PixelTask:
    return _mnist_task(cfg, "pixel_mnist", None)


@TASKS.register("pixel_mnist_permuted", config=PermutedPixelMNISTConfig,
                help="pixel MNIST with one fixed seeded pixel permutation (pMNIST, paper §3.5)")
def build_pixel_mnist_permuted(cfg: PermutedPixelMNISTConfig) -> PixelTask:
    return _mnist_task(cfg, "pixel_mnist_permuted", pixel_permutation(28 * 28, cfg.permutation_seed))


def _digits_task(cfg: DigitsConfig, name: str, permutation: Optional[torch.Tensor]) -> PixelTask:
    from sklearn.datasets import load_digits  # bundled with scikit-learn: no download

    digits = load_digits()
    images = digits.images.reshape(len(digits.images), -1).astype(np.uint8)  # (1797, 64) values 0..16
    labels = digits.target.astype(np.int64)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(int(cfg.split_seed))).numpy()
    test, val, train = np.split(order, [cfg.test_size, cfg.test_size + cfg.val_size])
    splits = {"train": (images[train], labels[train]), "val": (images[val], labels[val]),
              "test": (images[test], labels[test])}
    return PixelTask(cfg, name, splits, scale=16.0, permutation=permutation)


@TASKS.register("digits", config=DigitsConfig,
                help="offline pixel MNIST: scikit-learn's bundled 8x8 digits read pixel by pixel (64 steps)")
def build_digits(cfg: DigitsConfig) -> PixelTask:
    return _digits_task(cfg, "digits", None)


@TASKS.register("digits_permuted", config=PermutedDigitsConfig,
                help="the 8x8 digits with one fixed seeded pixel permutation (offline pMNIST)")
def build_digits_permuted(cfg: PermutedDigitsConfig) -> PixelTask:
    return _digits_task(cfg, "digits_permuted", pixel_permutation(8 * 8, cfg.permutation_seed))


def data_status(data_dir: Optional[str] = None) -> List[DataStatus]:
    """For ``uwbench data check``: MNIST files, and the bundled digits."""
    try:
        import sklearn  # noqa: F401

        digits = DataStatus("digits (8x8)", ("digits", "digits_permuted"), True, "bundled with scikit-learn")
    except ImportError:
        digits = DataStatus("digits (8x8)", ("digits", "digits_permuted"), False, "scikit-learn",
                            ["pip install scikit-learn"], "bundled with scikit-learn")
    return [mnist_status(data_dir), digits]
