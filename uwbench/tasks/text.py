"""Text to vectors for the document tasks (``tasks/documents.py``): tokens (lower-cased words, clitics
such as n't and 's split off as GloVe's tokenizer does, punctuation marks), a vocabulary built on the
training split (PAD = 0, OOV = 1), and GloVe vectors read from a local ``glove.*.txt`` file."""
from __future__ import annotations

import glob
import os
import re
import unicodedata
from collections import Counter
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from uwbench.errors import DataNotFoundError, UserError
from uwbench.tasks.realdata import root_hint

PAD, OOV = 0, 1  # reserved vocabulary ids
PAD_TOKEN, OOV_TOKEN = "<pad>", "<unk>"


# ------------------------------------------------------------------------------ tokens, vocabulary
TOKEN_RE = re.compile(r"\w+(?=n't\b)|n't\b|'(?:s|re|ve|ll|d|m)\b|\w+|[^\w\s]")


def tokenize(text: str, lowercase: bool = True) -> List[str]:
    """Unicode-normalised (NFKC) words, clitics (n't, 's, 're, 've, 'll, 'd, 'm) and punctuation marks,
    roughly as GloVe's corpora were tokenized. ``\\w`` is Unicode-aware: accented and non-Latin words
    stay whole."""
    text = unicodedata.normalize("NFKC", text)
    if lowercase:
        text = text.lower()
    return TOKEN_RE.findall(text)


class Vocabulary:
    """Words <-> ids; id 0 is PAD, id 1 is OOV (every word not kept)."""

    def __init__(self, words: Sequence[str]):
        self.words: List[str] = [PAD_TOKEN, OOV_TOKEN] + [w for w in words if w not in (PAD_TOKEN, OOV_TOKEN)]
        self.index: Dict[str, int] = {w: i for i, w in enumerate(self.words)}

    @classmethod
    def from_counts(cls, counts: Dict[str, int], min_count: int = 1, max_size: Optional[int] = None) -> "Vocabulary":
        """Keep words seen at least ``min_count`` times, the ``max_size`` most frequent (ties by word,
        so the vocabulary does not depend on reading order); PAD and OOV come on top."""
        kept = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
        return cls(kept[:max_size] if max_size is not None else kept)

    @classmethod
    def build(cls, token_lists: Iterable[Sequence[str]], min_count: int = 1,
              max_size: Optional[int] = None) -> "Vocabulary":
        counts: Counter = Counter()
        for tokens in token_lists:
            counts.update(tokens)
        return cls.from_counts(counts, min_count, max_size)

    def __len__(self) -> int:
        return len(self.words)

    def encode(self, tokens: Sequence[str]) -> np.ndarray:
        get = self.index.get
        return np.fromiter((get(t, OOV) for t in tokens), dtype=np.int32, count=len(tokens))


# ------------------------------------------------------------------------------------------- GloVe
GLOVE_PREFERRED = ("glove.840B.300d.txt", "glove.42B.300d.txt", "glove.6B.300d.txt")


def find_glove(root: str, dim: int = 300) -> Optional[str]:
    """The GloVe file under ``<root>/glove/`` or ``<root>/``: the preferred 300-d files first, then any
    ``glove.*<dim>d*.txt``."""
    folders = (os.path.join(root, "glove"), root)
    for name in GLOVE_PREFERRED if dim == 300 else ():
        for folder in folders:
            if os.path.isfile(os.path.join(folder, name)):
                return os.path.join(folder, name)
    for folder in folders:
        found = sorted(glob.glob(os.path.join(folder, f"glove.*{dim}d*.txt")))
        if found:
            return found[0]
    return None


def glove_missing_message(root: str, data_dir: Optional[str], dim: int) -> str:
    return (f"GloVe vectors not found: put {GLOVE_PREFERRED[0]} (or another glove.*.{dim}d.txt, e.g. "
            f"glove.6B.{dim}d.txt, unzipped) in {os.path.join(root, 'glove')}, or set task.glove_file=PATH. "
            "To train without GloVe, set task.embedding=trainable (not the paper's setting). "
            + root_hint(data_dir))


def glove_dim(path: str, probe: int = 100) -> int:
    """The vector width: the most common field count - 1 over the first ``probe`` lines (a line whose
    word contains spaces cannot mislead it)."""
    counts: Counter = Counter()
    with open(path, "r", encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.strip():
                counts[len(line.rstrip().split(" ")) - 1] += 1
                if sum(counts.values()) >= probe:
                    break
    if not counts:
        raise UserError(f"{path}: the GloVe file is empty")
    dim = counts.most_common(1)[0][0]
    if dim < 1:
        raise UserError(f"{path}: expected lines of a word then its vector")
    return dim


def load_glove(path: str, words: Optional[Iterable[str]] = None, lowercase: bool = False
               ) -> Tuple[List[str], np.ndarray]:
    """Read a GloVe text file (``word v_1 ... v_d`` per line). With ``words``, keep only those (the
    file can be 5 GB; other lines are skipped without parsing). With ``lowercase``, words are matched
    lower-cased and the first occurrence wins (GloVe files are sorted by frequency). Returns the words
    found and their vectors (n, d) float32."""
    if not os.path.isfile(path):
        raise DataNotFoundError(f"GloVe file {path} does not exist (set task.glove_file to an existing "
                                "glove.*.txt, or task.embedding=trainable)")
    wanted = None if words is None else set(words)
    found_words: List[str] = []
    rows: List[np.ndarray] = []
    seen = set()
    dim = glove_dim(path)
    with open(path, "r", encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n").rstrip("\r")
            if not line.strip():
                continue
            head = line.split(" ", 1)[0]
            key = head.lower() if lowercase else head
            if key in seen or (wanted is not None and key not in wanted):
                continue  # a word with spaces inside (840B has a few) never matches a token: skip too
            parts = line.rstrip().rsplit(" ", dim)
            if len(parts) != dim + 1:
                raise UserError(f"{path}, line {number}: expected a word and {dim} numbers, got "
                                 f"{len(parts) - 1} fields")
            if parts[0] != head:
                continue  # the word itself contains a space
            try:
                rows.append(np.asarray(parts[1:], dtype=np.float32))
            except ValueError:
                raise UserError(f"{path}, line {number}: a vector value is not a number") from None
            found_words.append(key)
            seen.add(key)
    vectors = np.stack(rows) if rows else np.zeros((0, dim), dtype=np.float32)
    return found_words, vectors


def glove_embedding(vocab: Vocabulary, path: str, lowercase: bool, seed: int) -> Tuple[np.ndarray, float]:
    """The frozen table (V, d): GloVe rows for the words it has; seeded N(0, sigma^2) rows (sigma =
    GloVe's value spread) for the others and OOV; zeros for PAD. Returns it and the fraction of
    vocabulary words GloVe covers."""
    words, vectors = load_glove(path, vocab.words[2:], lowercase=lowercase)
    dim = vectors.shape[1]
    sigma = float(vectors.std()) if vectors.size else 0.1
    rng = np.random.default_rng(seed)
    table = rng.normal(0.0, sigma, size=(len(vocab), dim)).astype(np.float32)
    table[PAD] = 0.0
    if words:
        table[[vocab.index[w] for w in words]] = vectors
    return table, len(words) / max(len(vocab) - 2, 1)
