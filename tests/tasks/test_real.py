"""The paper's real-world tasks: sinusoid regression, pixel MNIST / digits, documents.

Every data file is generated here (no downloads): IDX files, Zhang-style CSVs, an aclImdb tree and a
tiny GloVe file. Training checks use the `lstm` baseline through the real trainer, a few dozen steps.
"""
from __future__ import annotations

import gzip
import math
import os

import numpy as np
import pytest
import torch

from uwbench.errors import DataNotFoundError
from uwbench.tasks import build_task
from uwbench.tasks import documents as docs
from uwbench.tasks import text as texts
from uwbench.tasks import pixels, sinusoid
from uwbench.tasks.realdata import DATA_ENV, LazyBatches
from uwbench.training.loop import train

from tests.helpers.data import write_csv, write_imdb, write_mnist
from tests.helpers.learning import _one_thread  # noqa: F401  (autouse: one torch thread on shared 2-core machines)


def make_task(name, **values):
    return build_task(name, values)


# ---------------------------------------------------------------------------------------- sinusoid
def test_sinusoid_generator_statistics():
    cfg = sinusoid.SinusoidConfig()
    g = sinusoid.generate(cfg, 4000, torch.Generator().manual_seed(1))
    a, f, phi = g["amplitude"], g["frequency"], g["phase"]
    assert 1 <= a.min() and a.max() <= 5 and abs(a.mean() - 3) < 0.1
    assert 10 <= f.min() and f.max() <= 30 and abs(f.mean() - 20) < 0.5
    assert 0 <= phi.min() and phi.max() <= 100 and abs(phi.mean() - 50) < 2
    t = torch.arange(1, 201, dtype=torch.float64)
    eps = g["x"] * 1000 - t  # x_t = (t + eps_1)/1000, one eps_1 per step
    assert eps.abs().max() <= 1 and eps.std() > 0.5 and eps[:, 0].std() > 0.5
    expected = 5 + a[:, None] * torch.sin(2 * math.pi * f[:, None] * g["x"] + phi[:, None])
    torch.testing.assert_close(g["clean"], expected)
    assert torch.equal(g["inputs"], g["clean"][:, :100])  # clean variant: no noise
    assert abs(g["clean"].mean() - 5) < 0.1


def test_sinusoid_noise_and_batch_layout():
    task = make_task("sinusoid_noisy")
    assert task.config.noise == 2.0 and task.input_size == task.output_size == 1
    cfg = task.config
    g = sinusoid.generate(cfg, 2000, torch.Generator().manual_seed(2))
    noise = g["inputs"] - g["clean"][:, :100]
    assert noise.abs().max() <= 2 and abs(noise.mean()) < 0.02 and abs(noise.var() - 4 / 3) < 0.05
    batch = task.sample(8, torch.Generator().manual_seed(3))
    assert batch.inputs.shape == (8, 100, 1) and batch.targets.shape == (8, 100, 1)
    assert batch.decoder_inputs.shape == (8, 100, 1) and not batch.decoder_inputs.any()
    assert batch.lengths is None and task.max_encoder_steps() == 100 and task.metric == "mse"


def test_sinusoid_per_sequence_jitter():
    cfg = sinusoid.SinusoidConfig(jitter="sequence", seq_len=10, out_len=5)
    g = sinusoid.generate(cfg, 50, torch.Generator().manual_seed(0))
    eps = g["x"] * 1000 - torch.arange(1, 16, dtype=torch.float64)
    torch.testing.assert_close(eps, eps[:, :1].expand_as(eps))


def test_sinusoid_is_deterministic():
    task = make_task("sinusoid", seq_len=12, out_len=6, test_size=70)
    a = task.sample(4, torch.Generator().manual_seed(7))
    b = task.sample(4, torch.Generator().manual_seed(7))
    c = task.sample(4, torch.Generator().manual_seed(8))
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)
    assert not torch.equal(a.inputs, c.inputs)
    other = make_task("sinusoid", seq_len=12, out_len=6, test_size=70)
    t1, t2 = task.test_batches(), other.test_batches()
    assert [x.size for x in t1] == [64, 6]
    assert all(torch.equal(x.targets, y.targets) for x, y in zip(t1, t2))


def test_sinusoid_config_is_validated():
    with pytest.raises(ValueError, match="amp_min <= amp_max"):
        sinusoid.SinusoidConfig(amp_min=3, amp_max=2)


def test_lstm_lowers_sinusoid_mse():
    result = train({"task": {"name": "sinusoid", "seq_len": 20, "out_len": 20, "test_size": 64},
                    "model": {"name": "lstm", "hidden_size": 16, "controller": "lstm"},
                    "train": {"steps": 60, "batch_size": 16, "lr": 0.02, "eval_every": 20, "eval_batches": 1}},
                   progress=False)
    assert result.status == "finished" and result.metric == "mse"
    curve = result.history["eval_mse"]
    assert min(curve[1:]) < curve[0]
    # an untrained model outputs ~0 against targets around 5 (MSE ~ 30); the mean alone gives ~ 5
    assert result.test < 10


def test_plot_sinusoid_returns_a_figure():
    from matplotlib.figure import Figure

    fig = sinusoid.plot_sinusoid(np.zeros(10), np.ones(5), torch.ones(5, 1), write_gates=np.linspace(0, 1, 15),
                                 title="UW")
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    assert len(sinusoid.plot_sinusoid(np.zeros(10), np.ones(5), np.ones(5)).axes) == 1
    with pytest.raises(ValueError, match="write_gates"):
        sinusoid.plot_sinusoid(np.zeros(10), np.ones(5), np.ones(5), write_gates=np.ones(3))


# ------------------------------------------------------------------------------------------- IDX
@pytest.mark.parametrize("name", ["a-idx3-ubyte", "a-idx3-ubyte.gz"])
def test_idx_round_trip_plain_and_gzip(tmp_path, name):
    images = np.random.default_rng(0).integers(0, 256, (7, 28, 28), dtype=np.uint8)
    path = str(tmp_path / name)
    pixels.write_idx(path, images)
    with open(path, "rb") as f:
        assert (f.read(2) == b"\x1f\x8b") == name.endswith(".gz")
    out = pixels.read_idx(path)
    assert out.dtype == np.uint8 and np.array_equal(out, images)
    for arr in (np.arange(5, dtype=np.int32) - 2, np.linspace(0, 1, 6, dtype=np.float32).reshape(2, 3)):
        pixels.write_idx(path, arr)
        assert np.array_equal(pixels.read_idx(path), arr)


def test_idx_gzip_is_detected_from_content_and_errors_are_clear(tmp_path):
    labels = np.arange(10, dtype=np.uint8)
    raw = bytes([0, 0, 8, 1]) + (10).to_bytes(4, "big") + labels.tobytes()
    (tmp_path / "labels").write_bytes(gzip.compress(raw))  # gzip content, no .gz name
    assert np.array_equal(pixels.read_idx(str(tmp_path / "labels")), labels)
    (tmp_path / "bad").write_bytes(b"\x01\x02\x08\x01" + raw[4:])
    with pytest.raises(pixels.IDXFormatError, match="not an IDX file"):
        pixels.read_idx(str(tmp_path / "bad"))
    (tmp_path / "short").write_bytes(raw[:-3])
    with pytest.raises(pixels.IDXFormatError, match="needs 10 data bytes"):
        pixels.read_idx(str(tmp_path / "short"))
    (tmp_path / "type").write_bytes(bytes([0, 0, 0x42, 1]) + raw[4:])
    with pytest.raises(pixels.IDXFormatError, match="type code 0x42"):
        pixels.read_idx(str(tmp_path / "type"))


def test_pixel_mnist_splits_and_batches(tmp_path, monkeypatch):
    write_mnist(str(tmp_path / "mnist"))
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    task = make_task("pixel_mnist", val_size=10)
    assert task.input_size == 1 and task.output_size == 10 and task.max_encoder_steps() == 784
    assert [task.split_size(s) for s in ("train", "val", "test")] == [50, 10, 20]
    b = task.sample(16, torch.Generator().manual_seed(0))
    assert b.inputs.shape == (16, 784, 1) and b.decoder_inputs.shape == (16, 1, 1) and b.targets.shape == (16, 1)
    assert 0 <= b.inputs.min() and b.inputs.max() <= 1 and not b.decoder_inputs.any()
    first = (b.inputs[:, 0, 0] * 255).round()
    assert first.min() >= 1 and first.max() <= 50  # training images only
    assert torch.equal(b.targets[:, 0], (first.long() - 1) % 10)
    val = task.eval_batches(2, 8, torch.Generator().manual_seed(0))
    first = torch.cat([(v.inputs[:, 0, 0] * 255).round() for v in val])
    assert first.min() >= 51 and first.max() <= 60  # the last 10 training images validate
    test = list(task.test_batches())
    order = torch.cat([(t.inputs[:, 0, 0] * 255).round() for t in test])
    assert torch.equal(order, torch.arange(101, 121, dtype=order.dtype))  # all of t10k, in file order


def test_torchvision_layout_and_test_size(tmp_path):
    write_mnist(str(tmp_path / "MNIST" / "raw"), gz=False)
    task = make_task("pixel_mnist", data_dir=str(tmp_path), val_size=10, test_size=5)
    assert sum(t.size for t in task.test_batches()) == 5


def test_permutation_is_fixed_by_seed(tmp_path):
    p0, p0b, p1 = pixels.pixel_permutation(784, 0), pixels.pixel_permutation(784, 0), pixels.pixel_permutation(784, 1)
    assert torch.equal(p0, p0b) and not torch.equal(p0, p1)
    assert torch.equal(p0.sort().values, torch.arange(784))
    write_mnist(str(tmp_path / "mnist"))
    plain = make_task("pixel_mnist", data_dir=str(tmp_path), val_size=10)
    perm = make_task("pixel_mnist_permuted", data_dir=str(tmp_path), val_size=10, permutation_seed=3)
    a = plain.sample(4, torch.Generator().manual_seed(5))
    b = perm.sample(4, torch.Generator().manual_seed(5))
    assert torch.equal(b.inputs, a.inputs[:, pixels.pixel_permutation(784, 3)])
    assert torch.equal(a.targets, b.targets)


def test_missing_mnist_says_what_to_put_where(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    with pytest.raises(DataNotFoundError) as err:
        make_task("pixel_mnist")
    msg = str(err.value)
    assert "train-images-idx3-ubyte" in msg and "t10k-labels-idx1-ubyte" in msg
    assert str(tmp_path / "mnist") in msg and DATA_ENV in msg


def test_digits_split_is_deterministic_and_disjoint():
    a, b = make_task("digits"), make_task("digits")
    sizes = [a.split_size(s) for s in ("train", "val", "test")]
    assert sizes == [1257, 270, 270] and a.max_encoder_steps() == 64
    for split in ("train", "val", "test"):
        assert torch.equal(a.splits[split][0], b.splits[split][0])
    rows = {s: {tuple(r.tolist()) for r in a.splits[s][0]} for s in ("train", "test")}
    assert len(rows["train"] & rows["test"]) < 10  # a few duplicate images exist in the raw data
    p = make_task("digits_permuted", permutation_seed=4)
    x = p.sample(3, torch.Generator().manual_seed(0)).inputs
    assert x.shape == (3, 64, 1) and 0 <= x.min() and x.max() <= 1


def test_digits_trains_above_chance():
    result = train({"task": {"name": "digits"}, "model": {"name": "lstm", "hidden_size": 32, "controller": "lstm"},
                    "train": {"steps": 100, "batch_size": 32, "lr": 0.01, "eval_every": 50, "eval_batches": 1}},
                   progress=False)
    assert result.status == "finished" and result.test > 0.3  # chance is 0.1


# ------------------------------------------------------------------------------ document loaders


def test_csv_loader_quoting_and_unicode(tmp_path):
    path = str(tmp_path / "train.csv")
    write_csv(path, [
        (3, 'Title, with comma', 'He said "hi" \\n then left'),
        (1, "Café crème", "日本語のテキスト 🙂 naïve"),
        (2, "multi\nline", "x &amp; y"),
    ])
    texts, labels = docs.read_csv_documents(path, num_classes=4)
    assert labels.tolist() == [2, 0, 1]
    assert texts[0] == 'Title, with comma He said "hi"   then left'
    assert texts[1] == "Café crème 日本語のテキスト 🙂 naïve"
    assert texts[2] == "multi\nline x & y"
    yahoo = str(tmp_path / "y.csv")
    write_csv(yahoo, [(10, "q title", "q body", "best answer")])
    assert docs.read_csv_documents(yahoo, 10)[0] == ["q title q body best answer"]


def test_csv_loader_rejects_bad_class_index(tmp_path):
    path = str(tmp_path / "bad.csv")
    write_csv(path, [(1, "ok"), (5, "too big")])
    with pytest.raises(ValueError, match=r"row 2: `1 <= class index <= 4` must hold, got 5"):
        docs.read_csv_documents(path, 4)
    write_csv(path, [("x", "no index")])
    with pytest.raises(ValueError, match="must be an integer"):
        docs.read_csv_documents(path, 4)


def test_imdb_loader(tmp_path):
    write_imdb(str(tmp_path))
    texts, labels = docs.read_imdb_documents(str(tmp_path / "aclImdb" / "train"))
    assert labels.tolist() == [0, 0, 0, 1, 1, 1]
    assert texts[0].startswith("neg review 0.  Ünïcödé “quotes”") and "<br" not in texts[3]
    with pytest.raises(DataNotFoundError, match="pos"):
        docs.read_imdb_documents(str(tmp_path / "nowhere"))


def test_tokenizer_and_vocabulary():
    assert texts.tokenize("Don't stop, it's CAFÉ!") == ["do", "n't", "stop", ",", "it", "'s", "café", "!"]
    assert texts.tokenize("Ｆｕｌｌ width 日本語", lowercase=False) == ["Full", "width", "日本語"]
    vocab = texts.Vocabulary.build([["b", "a", "b", "c"], ["b", "a", "d"]], min_count=2)
    assert vocab.words == ["<pad>", "<unk>", "b", "a"] and texts.PAD == 0 and texts.OOV == 1
    assert vocab.encode(["a", "zzz", "b"]).tolist() == [3, 1, 2]
    assert texts.Vocabulary.build([["x", "y", "y", "z"]], max_size=1).words == ["<pad>", "<unk>", "y"]
    intern = docs.TokenInterner()  # the task's memory-lean path gives the same vocabulary and ids
    train_ids = [intern(["b", "a", "b", "c"]), intern(["b", "a", "d"])]
    test_ids = intern(["d", "a", "new"])
    lean, remap = intern.vocabulary(train_ids, min_count=2, max_size=None)
    assert lean.words == vocab.words and remap[test_ids].tolist() == vocab.encode(["d", "a", "new"]).tolist()


def write_glove(path, words, dim, extra=()):
    rng = np.random.default_rng(1)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for line in extra:
            f.write(line + "\n")
        for w in words:
            f.write(w + " " + " ".join(f"{v:.4f}" for v in rng.normal(0, 0.4, dim)) + "\n")


def test_glove_loader(tmp_path):
    path = str(tmp_path / "glove.tiny.4d.txt")
    write_glove(path, ["The", "the", "café", "cat"], 4, extra=[". . . 1 2 3 4"])
    words, vectors = texts.load_glove(path)
    assert words == ["The", "the", "café", "cat"] and vectors.shape == (4, 4) and vectors.dtype == np.float32
    words, vectors = texts.load_glove(path, words=["the", "café", "dog", "."], lowercase=True)
    assert words == ["the", "café"]  # "The" comes first and wins the lower-cased "the"
    all_words, all_vectors = texts.load_glove(path)
    assert np.array_equal(vectors[0], all_vectors[0])
    vocab = texts.Vocabulary(["the", "dog"])
    table, coverage = texts.glove_embedding(vocab, path, lowercase=True, seed=0)
    assert table.shape == (4, 4) and coverage == 0.5 and not table[texts.PAD].any()
    assert np.array_equal(table[2], all_vectors[0])
    with pytest.raises(DataNotFoundError, match="does not exist"):
        texts.load_glove(str(tmp_path / "nope.txt"))


def test_memory_size_suggestion_keeps_10_to_20_percent():
    for ds in docs.DATASETS.values():
        d = docs.paper_memory_size(ds.name)
        assert 0.1 <= (d + 1) / ds.paper_average_length <= 0.2, ds.name
    assert docs.paper_memory_size("imdb") == 41 and docs.suggest_memory_size(3.0) == 1


def test_bucket_boundaries_and_cuts():
    assert docs.bucket_boundaries(5, 1.0) == [1, 2, 3, 4, 5]
    bounds = docs.bucket_boundaries(4392, 1.1)
    assert bounds[:10] == list(range(1, 11)) and bounds[-1] == 4392 and len(bounds) < 90
    lengths = np.random.default_rng(0).integers(1, 4393, 5000)
    cuts = docs.cut_lengths(lengths, bounds)
    assert np.all(cuts <= lengths) and np.all(cuts >= lengths / 1.1) and set(cuts) <= set(bounds)


# ------------------------------------------------------------------------------- document task
def doc_fixture(root, dim=8, n_train=60, n_test=23):
    """AG-News-like CSVs (4 classes; the class word is in the text) and a tiny GloVe file."""
    rng = np.random.default_rng(0)
    classes = ["sports", "business", "science", "world"]
    filler = ["the", "a", "news", "today", "report", "über", "said"]

    def rows(n):
        out = []
        for i in range(n):
            c = int(rng.integers(0, 4))
            body = " ".join(rng.choice(filler, int(rng.integers(0, 40))))
            out.append((c + 1, f"Title {i}, \"{classes[c]}\"", f"{classes[c]} {body}"))
        return out

    write_csv(os.path.join(root, "ag_news_csv", "train.csv"), rows(n_train))
    write_csv(os.path.join(root, "ag_news_csv", "test.csv"), rows(n_test))
    write_glove(os.path.join(root, "glove", f"glove.tiny.{dim}d.txt"), classes + filler + [",", "title"], dim)
    return os.path.join(root, "glove", f"glove.tiny.{dim}d.txt")


def test_document_batches_have_one_length(tmp_path):
    glove = doc_fixture(str(tmp_path))
    task = make_task("ag_news", data_dir=str(tmp_path), glove_file=glove, embedding_dim=8, bucket_ratio=1.3)
    assert task.input_size == 8 and task.output_size == 4 and 0 < task.glove_coverage <= 1
    assert [len(task.splits[s]) for s in ("train", "val", "test")] == [54, 6, 23]
    g = torch.Generator().manual_seed(0)
    batches = [task.sample(8, g) for _ in range(30)] + task.eval_batches(5, 8, g) + list(task.test_batches())
    for b in batches:
        assert b.lengths is None and b.inputs.dim() == 3 and b.inputs.shape[2] == 8
        assert b.decoder_inputs.shape == (b.size, 1, 8) and b.targets.shape == (b.size, 1)
        assert b.inputs.shape[1] in task.bounds  # one encoder length for the whole batch
        assert (b.inputs.abs().sum(-1) > 0).all()  # and no padding: PAD is the only all-zero row
    assert len({b.inputs.shape[1] for b in batches}) > 3  # and several lengths across batches
    test = task.splits["test"]
    seen = np.concatenate([m for _, m in sorted(test.buckets.items())])
    assert sorted(seen.tolist()) == list(range(23)) and sum(b.size for b in task.test_batches()) == 23
    assert np.all(test.cuts <= test.lengths) and np.all(test.cuts >= test.lengths / 1.3)
    assert task.max_encoder_steps() == max(int(s.cuts.max()) for s in task.splits.values())
    assert task.suggested_memory_size() >= 1 and task.steps_per_epoch(8) == 7
    # the rows hold the right GloVe vectors: the first word of every document is "title"
    b = task.sample(4, torch.Generator().manual_seed(1))
    assert torch.equal(b.inputs[:, 0], task.vectors[task.vocab.index["title"]].expand(4, 8))


def test_document_task_trains_with_the_trainer(tmp_path):
    glove = doc_fixture(str(tmp_path))
    result = train({"task": {"name": "ag_news", "data_dir": str(tmp_path), "glove_file": glove, "embedding_dim": 8},
                    "model": {"name": "lstm", "hidden_size": 8, "controller": "lstm"},
                    "train": {"steps": 6, "batch_size": 8, "optimizer": "rmsprop", "lr": 1e-3, "eval_every": 3,
                              "eval_batches": 1}}, progress=False)
    assert result.status == "finished" and 0 <= result.test <= 1


def test_trainable_embedding_is_the_models_input_module_and_learns(tmp_path):
    doc_fixture(str(tmp_path))
    task = make_task("ag_news", data_dir=str(tmp_path), embedding="trainable", embedding_dim=6)
    g = torch.Generator().manual_seed(0)
    with pytest.raises(RuntimeError, match="a model built with this task"):
        task.sample(4, g)
    from uwbench.models.base import build_model

    values = {"hidden_size": 8, "controller": "lstm"}
    bare = build_model("lstm", task.input_size, task.output_size, values)
    model = build_model("lstm", task.input_size, task.output_size, values, task=task)
    assert model.task_embedding is task.embedding  # the builder gave it to the model; the task changed nothing
    assert any(p is task.embedding.weight for p in model.parameters())
    assert model.num_parameters() == bare.num_parameters() + task.embedding.weight.numel()
    assert "task_embedding.weight" in model.state_dict()  # saved with the model's checkpoint
    before = task.embedding.weight.detach().clone()
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    batch = task.sample(8, g)
    task.loss(model(batch.inputs, batch.decoder_inputs), batch).backward()
    opt.step()
    assert not torch.equal(before, task.embedding.weight)


def test_imdb_task_on_fixture(tmp_path):
    write_imdb(str(tmp_path), n=6)
    glove = str(tmp_path / "glove" / "glove.6B.300d.txt")
    write_glove(glove, ["great", "review", "word", "pos", "neg"], 300)
    task = make_task("imdb", data_dir=str(tmp_path), val_fraction=0.25)  # finds glove/glove.6B.300d.txt
    assert task.glove_file == glove and task.output_size == 2
    assert sorted(task.splits["test"].labels.tolist()) == [0] * 6 + [1] * 6
    b = next(iter(task.test_batches()))
    assert b.inputs.shape[2] == 300


def test_missing_documents_and_glove_say_what_to_put_where(tmp_path):
    with pytest.raises(DataNotFoundError) as err:
        make_task("dbpedia", data_dir=str(tmp_path))
    msg = str(err.value)
    assert "train.csv, test.csv" in msg and str(tmp_path / "dbpedia_csv") in msg and DATA_ENV in msg
    with pytest.raises(DataNotFoundError, match=r"test/pos/\*\.txt"):
        make_task("imdb", data_dir=str(tmp_path))
    write_csv(str(tmp_path / "ag_news_csv" / "train.csv"), [(1, "a", "b")])
    write_csv(str(tmp_path / "ag_news_csv" / "test.csv"), [(1, "a", "b")])
    with pytest.raises(DataNotFoundError) as err:
        make_task("ag_news", data_dir=str(tmp_path))
    msg = str(err.value)
    assert "glove.840B.300d.txt" in msg and str(tmp_path / "glove") in msg and "embedding=trainable" in msg


def test_data_check_lists_found_and_missing(tmp_path, capsys):
    from uwbench.cli import main

    doc_fixture(str(tmp_path), dim=300, n_train=2, n_test=1)
    os.rename(tmp_path / "glove" / "glove.tiny.300d.txt", tmp_path / "glove" / "glove.840B.300d.txt")
    write_mnist(str(tmp_path / "mnist"), n_train=2, n_test=1)
    assert main(["data", "check", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[1]: line.split()[0] for line in out.splitlines() if line.startswith(("found", "MISSING"))}
    assert lines["mnist"] == lines["ag_news"] == lines["glove"] == lines["digits"] == "found"
    assert lines["imdb"] == lines["dbpedia"] == "MISSING"
    assert f"train.csv, test.csv in {tmp_path / 'dbpedia_csv'}" in out


def test_lazy_batches():
    lazy = LazyBatches(3, lambda i: i * 10)
    assert len(lazy) == 3 and list(lazy) == [0, 10, 20] and lazy[-1] == 20
    with pytest.raises(IndexError):
        lazy[3]
