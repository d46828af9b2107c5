"""Document classification (paper §3.6, appendix "Details on document classification datasets").

Datasets, each a task of its own, read from their standard layouts under the data folder
(``task.data_dir``, else ``$UWBENCH_DATA``, else ``./data``; see docs/data.md):

    ag_news        ag_news_csv/{train,test}.csv               4 classes   (title, description)
    yelp_polarity  yelp_review_polarity_csv/{train,test}.csv  2 classes   (text)
    yelp_full      yelp_review_full_csv/{train,test}.csv      5 classes   (text)
    dbpedia        dbpedia_csv/{train,test}.csv              14 classes   (title, content)
    yahoo_answers  yahoo_answers_csv/{train,test}.csv        10 classes   (title, question, answer)
    imdb           aclImdb/{train,test}/{neg,pos}/*.txt       2 classes

The CSV files (Zhang et al. 2015) have one document per row: the 1-based class index, then the text
fields, all double-quoted, quotes doubled, line breaks written as a literal backslash-n.

Pipeline (``tasks/text.py``): text -> tokens (lower-cased, words, clitics such as n't and 's split off
as GloVe's tokenizer does, punctuation marks) -> ids in a vocabulary built on the training split
(``min_count``, ``max_vocab``; PAD = 0, OOV = 1) -> 300-d vectors.

Embedding (a choice the paper leaves to us). The task returns dense float inputs (B, T, 300), so the
models keep their one interface ``model(inputs, decoder_inputs, lengths)``:
- ``embedding: glove`` (default, the paper's setting): a frozen table inside the task, rows from a
  local ``glove.*.txt`` file; words of the vocabulary that GloVe lacks get fixed seeded random vectors
  of GloVe's scale; PAD is zero.
- ``embedding: trainable`` (the explicit fallback when no GloVe file is at hand): an ``nn.Embedding``
  the task embeds its batches with. It is the task's input module (``input_modules``): the model
  builder (``build_model(..., task=task)``) makes it the model's ``task_embedding``, so it is moved,
  optimised and checkpointed with the model. ``sample`` refuses to run before a model took it.

One length per batch (what keeps a batch-shared write schedule correct for every sample). Documents
are grouped into length buckets with boundaries 1, 2, 3, ... growing by ``bucket_ratio`` (each next
boundary is max(b + 1, ceil(b * ratio))), and every document is cut to its bucket's boundary, the
largest boundary not above its length: it keeps its first tokens and loses at most 1 - 1/ratio of
them (under 10% at the default 1.1; none for ratio 1.0, which gives one bucket per length). A batch
holds documents of one bucket only, so all its samples have the same encoder length and no ``lengths``
are passed. The cut applies to every split, test included. ``max_len`` additionally caps every
document (the paper does not cap; the longest has 4,392 words).

The classifier is read after the last word: the decoder runs one all-zero step and predicts the class
(cross-entropy, accuracy). Training batches pick a bucket with probability proportional to its size,
then min(batch_size, bucket size) distinct documents in it. The validation split is a seeded
``val_fraction`` of the training file (the datasets ship only train and test); ``eval_batches`` draws
from it; ``test_batches`` walks the test split bucket by bucket.

Memory size: the paper picks D from the average document length for a 10-20% compression ratio
(D+1)/T; ``suggest_memory_size`` does that (and ``DocumentTask.suggested_memory_size`` on the loaded
data). Early stopping after 5 epochs without improvement is the trainer's ``early_stop_evals`` with
``eval_every`` = ``task.steps_per_epoch(batch_size)``.
"""
from __future__ import annotations

import csv
import glob
import html
import math
import os
import sys
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Literal, Optional, Sequence, Tuple

import numpy as np
import torch

from uwbench.errors import DataNotFoundError, UserError
from uwbench.registry import TASKS
from uwbench.tasks.base import TEST_CHUNK, Batch, ClassificationTask
from uwbench.tasks.realdata import DataStatus, LazyBatches, data_root, missing_error
from uwbench.tasks.text import (GLOVE_PREFERRED, OOV, PAD, Vocabulary, find_glove, glove_embedding,
                                glove_missing_message, tokenize)



# ----------------------------------------------------------------------------------------- datasets
@dataclass(frozen=True)
class DocumentDataset:
    name: str  # the task name
    folder: str  # under the data folder, as the archive unpacks
    layout: str  # "csv" or "imdb" (a key of READERS)
    num_classes: int
    paper_average_length: int  # words per document (paper's appendix table)
    source: str  # where the archive comes from, for the missing-data message


DATASETS: Dict[str, DocumentDataset] = {d.name: d for d in (
    DocumentDataset("ag_news", "ag_news_csv", "csv", 4, 44, "ag_news_csv.tgz (Zhang et al. 2015 text datasets)"),
    DocumentDataset("imdb", "aclImdb", "imdb", 2, 282, "aclImdb_v1.tar.gz (Maas et al. 2011, ai.stanford.edu/~amaas/data/sentiment)"),
    DocumentDataset("yelp_polarity", "yelp_review_polarity_csv", "csv", 2, 156, "yelp_review_polarity_csv.tgz (Zhang et al. 2015)"),
    DocumentDataset("yelp_full", "yelp_review_full_csv", "csv", 5, 158, "yelp_review_full_csv.tgz (Zhang et al. 2015)"),
    DocumentDataset("dbpedia", "dbpedia_csv", "csv", 14, 55, "dbpedia_csv.tgz (Zhang et al. 2015)"),
    DocumentDataset("yahoo_answers", "yahoo_answers_csv", "csv", 10, 112, "yahoo_answers_csv.tgz (Zhang et al. 2015)"),
)}


def clean_text(text: str) -> str:
    """Undo the storage escapes: literal backslash-n line breaks (CSV sets), <br /> tags (IMDb), HTML
    entities."""
    text = text.replace("\\n", " ").replace("<br />", " ").replace("<br/>", " ")
    return html.unescape(text)


def read_csv_documents(path: str, num_classes: Optional[int] = None) -> Tuple[List[str], np.ndarray]:
    """Read a Zhang et al. CSV file: each row is the 1-based class index, then text fields. Returns the
    texts (fields joined by a space) and the 0-based labels (N,)."""
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # Yahoo! Answers has fields over the 128 KiB default
    texts, labels = [], []
    with open(path, "r", encoding="utf-8", newline="") as f:
        for line, row in enumerate(csv.reader(f), 1):
            if not row or (len(row) == 1 and not row[0].strip()):
                continue  # a blank line
            if len(row) < 2:
                raise UserError(f"{path}, row {line}: expected a class index then text fields, got {row!r:.80}")
            try:
                label = int(row[0])
            except ValueError:
                raise UserError(f"{path}, row {line}: the class index must be an integer, got {row[0]!r:.40}") from None
            if label < 1 or (num_classes is not None and label > num_classes):
                top = num_classes if num_classes is not None else "the number of classes"
                raise UserError(f"{path}, row {line}: `1 <= class index <= {top}` must hold, got {label}")
            texts.append(clean_text(" ".join(field.strip() for field in row[1:])))
            labels.append(label - 1)
    return texts, np.asarray(labels, dtype=np.int64)


IMDB_LABELS = (("neg", 0), ("pos", 1))


def read_imdb_documents(folder: str) -> Tuple[List[str], np.ndarray]:
    """Read one split of the aclImdb layout: ``folder/{neg,pos}/*.txt`` (neg = 0, pos = 1), files in
    name order. ``unsup`` is not read."""
    texts, labels = [], []
    for sub, label in IMDB_LABELS:
        sub_dir = os.path.join(folder, sub)
        if not os.path.isdir(sub_dir):
            raise DataNotFoundError(f"IMDb folder {sub_dir} is missing (the aclImdb layout is "
                                    "aclImdb/{train,test}/{neg,pos}/*.txt)")
        for path in sorted(glob.glob(os.path.join(sub_dir, "*.txt"))):
            with open(path, "r", encoding="utf-8") as f:
                texts.append(clean_text(f.read()))
            labels.append(label)
    return texts, np.asarray(labels, dtype=np.int64)


def _csv_split_paths(root: str, ds: DocumentDataset) -> Dict[str, str]:
    return {split: os.path.join(root, ds.folder, f"{split}.csv") for split in ("train", "test")}


def _imdb_split_paths(root: str, ds: DocumentDataset) -> Dict[str, str]:
    return {split: os.path.join(root, ds.folder, split) for split in ("train", "test")}


def _csv_missing(paths: Dict[str, str]) -> List[str]:
    return [os.path.basename(p) for p in paths.values() if not os.path.isfile(p)]


def _imdb_missing(paths: Dict[str, str]) -> List[str]:
    return [f"{split}/{sub}/*.txt" for split, p in paths.items() for sub, _ in IMDB_LABELS
            if not os.path.isdir(os.path.join(p, sub))]


@dataclass(frozen=True)
class Layout:
    paths: Callable[[str, DocumentDataset], Dict[str, str]]  # (data root, dataset) -> split -> path
    missing: Callable[[Dict[str, str]], List[str]]  # what of it is absent, as names to place
    read: Callable[[str, DocumentDataset], Tuple[List[str], np.ndarray]]  # (path, dataset) -> texts, labels


READERS: Dict[str, Layout] = {
    "csv": Layout(_csv_split_paths, _csv_missing, lambda p, ds: read_csv_documents(p, ds.num_classes)),
    "imdb": Layout(_imdb_split_paths, _imdb_missing, lambda p, ds: read_imdb_documents(p)),
}


# -------------------------------------------------------------------------------- lengths, buckets
def bucket_boundaries(max_len: int, ratio: float) -> List[int]:
    """1, 2, ... with each next boundary max(b + 1, ceil(b * ratio)); the last one is ``max_len``."""
    if max_len < 1:
        raise ValueError(f"`max_len >= 1` must hold, got {max_len}")
    bounds = [1]
    while bounds[-1] < max_len:
        nxt = max(bounds[-1] + 1, math.ceil(bounds[-1] * ratio))
        bounds.append(min(nxt, max_len))
    return bounds


def cut_lengths(lengths: np.ndarray, bounds: Sequence[int]) -> np.ndarray:
    """Each length cut down to its bucket boundary: the largest boundary <= the length."""
    b = np.asarray(bounds)
    return b[np.searchsorted(b, lengths, side="right") - 1]


def suggest_memory_size(average_length: float, ratio: float = 0.15) -> int:
    """D for a compression ratio (D+1)/T close to ``ratio`` at T = the average document length (the paper
    keeps it within 10-20%, §3.6); at least 1."""
    if average_length <= 0:
        raise ValueError(f"`average_length > 0` must hold, got {average_length}")
    if not 0 < ratio <= 1:
        raise ValueError(f"`0 < ratio <= 1` must hold, got {ratio}")
    return max(1, round(ratio * average_length) - 1)


def paper_memory_size(name: str, ratio: float = 0.15) -> int:
    """``suggest_memory_size`` at the paper's average length of dataset ``name`` (no data needed)."""
    return suggest_memory_size(DATASETS[name].paper_average_length, ratio)


@dataclass
class EncodedSplit:
    """Documents as one flat id array: doc i is ids[offsets[i] : offsets[i] + cuts[i]]."""

    ids: np.ndarray  # (total tokens,) int32
    offsets: np.ndarray  # (N,) int64
    lengths: np.ndarray  # (N,) int64, tokens after max_len
    labels: np.ndarray  # (N,) int64
    cuts: np.ndarray = field(default=None)  # (N,) int64, the length actually read (bucket boundary)
    buckets: Dict[int, np.ndarray] = field(default_factory=dict)  # cut length -> doc indices

    def __len__(self) -> int:
        return len(self.labels)

    def bucketize(self, bounds: Sequence[int]) -> None:
        self.cuts = cut_lengths(self.lengths, bounds)
        order = np.argsort(self.cuts, kind="stable")
        values, starts = np.unique(self.cuts[order], return_index=True)
        self.buckets = {int(v): idx for v, idx in zip(values, np.split(order, starts[1:]))}


# -------------------------------------------------------------------------------------------- task
@dataclass
class DocumentConfig:
    data_dir: Optional[str] = None  # the data folder; None: $UWBENCH_DATA, else ./data
    embedding: Literal["glove", "trainable"] = "glove"  # frozen GloVe (paper) or a trained table
    glove_file: Optional[str] = None  # None: <data>/glove/glove.840B.300d.txt, else a glove.*.300d.txt there
    embedding_dim: int = 300  # must match the GloVe file's; the trainable table's width
    lowercase: bool = True
    min_count: int = 1  # keep words seen this often in the training split
    max_vocab: Optional[int] = 100_000  # at most this many words (most frequent), PAD and OOV besides
    max_len: Optional[int] = None  # cap every document at its first max_len tokens (paper: no cap)
    bucket_ratio: float = 1.1  # length-bucket growth; a document loses < 1 - 1/ratio of its tokens
    val_fraction: float = 0.1  # of the training file, held out for validation (early stopping)
    max_train_docs: Optional[int] = None  # a seeded subset of the training file (smoke runs)
    test_size: Optional[int] = None  # None: the whole test file; N: a seeded subset of N
    split_seed: int = 0  # seeds the validation split, the subsets and GloVe-less words' vectors

    def __post_init__(self):
        checks = [
            ("embedding_dim >= 1", self.embedding_dim >= 1, self.embedding_dim),
            ("min_count >= 1", self.min_count >= 1, self.min_count),
            ("bucket_ratio >= 1", self.bucket_ratio >= 1, self.bucket_ratio),
            ("0 < val_fraction < 1", 0 < self.val_fraction < 1, self.val_fraction),
        ]
        for name in ("max_vocab", "max_len", "max_train_docs", "test_size"):
            value = getattr(self, name)
            if value is not None:
                checks.append((f"{name} >= 1", value >= 1, value))
        for rule, ok, value in checks:
            if not ok:
                raise ValueError(f"`{rule}` must hold, got {value}")


def _seeded_subset(n: int, size: Optional[int], seed: int) -> np.ndarray:
    """Indices 0..n-1 in file order, or a seeded subset of ``size`` of them (still in file order)."""
    if size is None or size >= n:
        return np.arange(n)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).numpy()
    return np.sort(perm[:size])


class TokenInterner:
    """Tokens -> provisional int32 ids, one dictionary for all splits, so a corpus of a million
    documents is held as int32 arrays, not as lists of strings, until the vocabulary is known."""

    def __init__(self):
        self.index: Dict[str, int] = {}
        self.words: List[str] = []

    def __call__(self, tokens: Sequence[str]) -> np.ndarray:
        index, words = self.index, self.words
        out = np.empty(len(tokens), dtype=np.int32)
        for k, t in enumerate(tokens):
            i = index.get(t)
            if i is None:
                i = index[t] = len(words)
                words.append(t)
            out[k] = i
        return out

    def vocabulary(self, train_docs: Sequence[np.ndarray], min_count: int, max_size: Optional[int]
                   ) -> Tuple[Vocabulary, np.ndarray]:
        """The vocabulary counted on ``train_docs`` and the map provisional id -> vocabulary id (OOV for
        words not kept)."""
        flat = np.concatenate(train_docs) if len(train_docs) else np.zeros(0, np.int32)
        counts = np.bincount(flat, minlength=len(self.words))
        vocab = Vocabulary.from_counts({w: int(c) for w, c in zip(self.words, counts) if c}, min_count, max_size)
        remap = np.fromiter((vocab.index.get(w, OOV) for w in self.words), dtype=np.int32, count=len(self.words))
        return vocab, remap


def encode_split(docs: Sequence[np.ndarray], labels: np.ndarray, max_len: Optional[int]) -> EncodedSplit:
    """Per-document id arrays -> one flat id array; an empty document becomes the single OOV token."""
    empty = np.array([OOV], dtype=np.int32)
    pieces = [(d[:max_len] if max_len is not None else d) if len(d) else empty for d in docs]
    lengths = np.fromiter((len(p) for p in pieces), dtype=np.int64, count=len(pieces))
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64) if len(pieces) else np.zeros(0, np.int64)
    ids = np.concatenate(pieces) if pieces else np.zeros(0, np.int32)
    return EncodedSplit(ids=ids, offsets=offsets, lengths=lengths, labels=np.asarray(labels, dtype=np.int64))


class DocumentTask(ClassificationTask):
    """Documents as sequences of word vectors; one-step decoder predicts the class. See module doc."""

    def __init__(self, config: DocumentConfig, dataset: DocumentDataset):
        super().__init__(config)
        cfg = config
        self.name = dataset.name
        self.dataset = dataset
        self.output_size = dataset.num_classes
        self.input_size = cfg.embedding_dim
        root = data_root(cfg.data_dir)
        layout = READERS[dataset.layout]
        paths = layout.paths(root, dataset)
        missing = layout.missing(paths)
        if missing:
            raise missing_error(dataset.name, os.path.join(root, dataset.folder), missing, cfg.data_dir,
                                dataset.source)
        glove_path = None
        if cfg.embedding == "glove":  # find the vectors before the slow part
            glove_path = os.path.expanduser(cfg.glove_file) if cfg.glove_file else find_glove(root, cfg.embedding_dim)
            if glove_path is None:
                raise DataNotFoundError(glove_missing_message(root, cfg.data_dir, cfg.embedding_dim))
            if not os.path.isfile(glove_path):
                raise DataNotFoundError(f"task.glove_file={cfg.glove_file} does not exist; put the GloVe "
                                        "file there or set task.embedding=trainable")

        # texts -> splits: validation is a seeded fraction of the (optionally subsampled) training file
        train_texts, train_labels = layout.read(paths["train"], dataset)
        test_texts, test_labels = layout.read(paths["test"], dataset)
        pool = _seeded_subset(len(train_texts), cfg.max_train_docs, cfg.split_seed)
        pool = pool[torch.randperm(len(pool), generator=torch.Generator().manual_seed(cfg.split_seed + 1)).numpy()]
        n_val = max(1, int(round(cfg.val_fraction * len(pool))))
        if len(pool) - n_val < 1:
            raise UserError(f"{dataset.name}: {len(pool)} training documents leave none to train on after "
                             f"a validation fraction of {cfg.val_fraction}")
        split_index = {"train": np.sort(pool[n_val:]), "val": np.sort(pool[:n_val])}
        test_index = _seeded_subset(len(test_texts), cfg.test_size, cfg.split_seed + 2)
        if len(test_index) == 0:
            raise UserError(f"{dataset.name}: the test file {paths['test']} has no documents")

        intern = TokenInterner()
        docs = {split: [intern(tokenize(train_texts[i], cfg.lowercase)) for i in idx]
                for split, idx in split_index.items()}
        docs["test"] = [intern(tokenize(test_texts[i], cfg.lowercase)) for i in test_index]
        labels = {"train": train_labels[split_index["train"]], "val": train_labels[split_index["val"]],
                  "test": test_labels[test_index]}
        del train_texts, test_texts
        self.vocab, remap = intern.vocabulary(docs["train"], cfg.min_count, cfg.max_vocab)  # train split only
        self.splits: Dict[str, EncodedSplit] = {
            split: encode_split([remap[d] for d in split_docs], labels[split], cfg.max_len)
            for split, split_docs in docs.items()}
        del docs, intern
        longest = max(int(s.lengths.max()) for s in self.splits.values())
        self.bounds = bucket_boundaries(longest, cfg.bucket_ratio)
        for s in self.splits.values():
            s.bucketize(self.bounds)

        self.glove_file = glove_path
        self.glove_coverage: Optional[float] = None
        self.embedding: Optional[torch.nn.Embedding] = None
        self.vectors: Optional[torch.Tensor] = None
        self._taken = False  # whether a model builder took the trainable embedding (input_modules)
        if cfg.embedding == "glove":
            table, self.glove_coverage = glove_embedding(self.vocab, glove_path, cfg.lowercase, cfg.split_seed)
            if table.shape[1] != cfg.embedding_dim:
                raise UserError(f"{glove_path} has {table.shape[1]}-d vectors; `embedding_dim == "
                                 f"{table.shape[1]}` must hold, got {cfg.embedding_dim}")
            self.vectors = torch.from_numpy(table)  # (V, d) frozen
        else:
            self.embedding = torch.nn.Embedding(len(self.vocab), cfg.embedding_dim, padding_idx=PAD)
            torch.nn.init.normal_(self.embedding.weight, std=0.1)  # seeded by the run's global seed
            with torch.no_grad():
                self.embedding.weight[PAD].zero_()

    # -- the trainable embedding, the model's input module ------------------------------------------
    def input_modules(self) -> Dict[str, torch.nn.Module]:
        """The trainable embedding as ``task_embedding`` (none for the frozen GloVe table); the model
        builder makes it a submodule of the model, so the optimizer, the device move and the checkpoint
        include it."""
        if self.embedding is None:
            return {}
        self._taken = True
        return {"task_embedding": self.embedding}

    # -- sizes -------------------------------------------------------------------------------------
    def max_encoder_steps(self) -> int:
        return max(int(s.cuts.max()) for s in self.splits.values())

    def average_length(self, split: str = "train") -> float:
        """Mean encoder length (tokens actually read, after max_len and the bucket cut)."""
        return float(self.splits[split].cuts.mean())

    def suggested_memory_size(self, ratio: float = 0.15) -> int:
        return suggest_memory_size(self.average_length(), ratio)

    def steps_per_epoch(self, batch_size: int) -> int:
        """Updates per pass over the training split (use as ``eval_every`` to stop early in epochs)."""
        return max(1, math.ceil(len(self.splits["train"]) / batch_size))

    # -- batches -----------------------------------------------------------------------------------
    def make_batch(self, split: str, docs: np.ndarray, length: int) -> Batch:
        """Documents ``docs`` of ``split``, all of bucket ``length``: each read for its first ``length``
        tokens."""
        s = self.splits[split]
        if not np.all(s.cuts[docs] == length):
            raise ValueError(f"a batch must hold documents of one length bucket ({length})")
        index = s.offsets[docs][:, None] + np.arange(length)[None, :]  # (B, T)
        ids = torch.from_numpy(s.ids[index].astype(np.int64))  # (B, T)
        if self.vectors is not None:
            inputs = self.vectors[ids]  # (B, T, d) frozen GloVe rows
        else:
            inputs = self.embedding(ids.to(self.embedding.weight.device))  # (B, T, d), with grad when training
        b = len(docs)
        return Batch(inputs=inputs,
                     decoder_inputs=torch.zeros(b, 1, self.input_size, device=inputs.device),  # (B, 1, d)
                     targets=torch.from_numpy(s.labels[docs]).unsqueeze(1).to(inputs.device))  # (B, 1)

    def sample_split(self, split: str, batch_size: int, generator: torch.Generator) -> Batch:
        """One bucket, drawn with probability proportional to its size, then min(batch_size, its size)
        distinct documents of it."""
        buckets = self.splits[split].buckets
        keys = list(buckets)
        sizes = torch.tensor([len(buckets[k]) for k in keys], dtype=torch.float64)
        k = keys[int(torch.multinomial(sizes, 1, generator=generator))]
        members = buckets[k]
        pick = torch.randperm(len(members), generator=generator)[:batch_size].numpy()
        return self.make_batch(split, members[pick], k)

    def sample(self, batch_size: int, generator: torch.Generator) -> Batch:
        if self.embedding is not None and not self._taken:
            raise RuntimeError(
                "embedding: trainable needs a model built with this task (uwbench.models.base.build_model(..., "
                "task=task) takes the embedding as the model's input module), or the embedding never learns; "
                "use embedding: glove, or build the model with its task")
        return self.sample_split("train", batch_size, generator)

    def eval_batches(self, n: int, batch_size: int, generator: torch.Generator) -> List[Batch]:
        """``n`` fresh batches of validation documents (model selection never sees the test split)."""
        return [self.sample_split("val", batch_size, generator) for _ in range(n)]

    def ordered_batches(self, split: str, chunk: int = TEST_CHUNK) -> LazyBatches:
        """The whole split, bucket by bucket (shortest first), ``chunk`` documents a batch."""
        plan: List[Tuple[int, np.ndarray]] = []
        for length, members in sorted(self.splits[split].buckets.items()):
            plan += [(length, members[i : i + chunk]) for i in range(0, len(members), chunk)]
        return LazyBatches(len(plan), lambda i: self.make_batch(split, plan[i][1], plan[i][0]))

    def validation_batches(self) -> LazyBatches:
        return self.ordered_batches("val")

    def test_batches(self) -> LazyBatches:
        if self._test is None:
            self._test = self.ordered_batches("test")
        return self._test


def _register(ds: DocumentDataset) -> None:
    @TASKS.register(ds.name, config=DocumentConfig,
                    help=f"document classification, {ds.num_classes} classes, {ds.folder}/ (paper §3.6)")
    def factory(cfg: DocumentConfig) -> DocumentTask:
        return DocumentTask(cfg, ds)


for _ds in DATASETS.values():
    _register(_ds)


def data_status(data_dir: Optional[str] = None) -> List[DataStatus]:
    """For ``uwbench data check``: each document dataset, and the GloVe vectors."""
    root = data_root(data_dir)
    out = []
    for ds in DATASETS.values():
        layout = READERS[ds.layout]
        missing = layout.missing(layout.paths(root, ds))
        out.append(DataStatus(ds.name, (ds.name,), not missing, os.path.join(root, ds.folder), missing, ds.source))
    glove = find_glove(root)
    out.append(DataStatus("glove", tuple(DATASETS), glove is not None,
                          glove or os.path.join(root, "glove"),
                          [] if glove else [f"{GLOVE_PREFERRED[0]} (or another glove.*.300d.txt)"],
                          "nlp.stanford.edu/projects/glove (unzip); needed unless task.embedding=trainable"))
    return out
