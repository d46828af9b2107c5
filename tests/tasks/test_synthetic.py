import pytest
import torch

from uwbench.tasks import build_task
from uwbench.tasks.base import TEST_CHUNK


def make(name, **values):
    return build_task(name, values)


X = torch.tensor([[3, 1, 4, 1, 5, 9], [2, 7, 1, 8, 2, 8]])  # (B=2, T=6)


@pytest.mark.parametrize(
    "name, expected",
    [
        ("copy", [[3, 1, 4, 1, 5, 9, 0], [2, 7, 1, 8, 2, 8, 0]]),
        ("reverse", [[9, 5, 1, 4, 1, 3, 0], [8, 2, 8, 1, 7, 2, 0]]),
        ("double", [[3, 1, 4, 1, 5, 9, 3, 1, 4, 1, 5, 9, 0], [2, 7, 1, 8, 2, 8, 2, 7, 1, 8, 2, 8, 0]]),
        # add: floor((x_i + x_{T+1-i})/2): (3+9)/2=6, (1+5)/2=3, (4+1)/2=2 ; (2+8)/2=5, (7+2)/2=4, (1+8)/2=4
        ("add", [[6, 3, 2, 0], [5, 4, 4, 0]]),
        # max: max(x_1,x_2), max(x_3,x_4), max(x_5,x_6)
        ("max", [[3, 4, 9, 0], [7, 8, 8, 0]]),
    ],
)
def test_targets_for_hand_made_inputs(name, expected):
    task = make(name, seq_len=6)
    batch = task.make_batch(X)
    assert batch.targets.tolist() == expected
    # encoder: T tokens + end marker, one-hot
    assert batch.inputs.shape == (2, 7, task.config.vocab_size)
    assert batch.inputs.argmax(-1).tolist() == [[3, 1, 4, 1, 5, 9, 0], [2, 7, 1, 8, 2, 8, 0]]
    assert torch.all(batch.inputs.sum(-1) == 1)
    # decoder: all-zero inputs, one per target step
    assert batch.decoder_inputs.shape == (2, len(expected[0]), task.config.vocab_size)
    assert batch.decoder_inputs.abs().sum() == 0


def test_odd_length_add_and_max_drop_the_middle():
    task = make("add", seq_len=5)
    y = task.make_batch(torch.tensor([[1, 2, 3, 4, 5]])).targets
    assert y.tolist() == [[3, 3, 0]]  # floor((1+5)/2), floor((2+4)/2), end
    task = make("max", seq_len=5)
    assert task.make_batch(torch.tensor([[1, 2, 3, 4, 5]])).targets.tolist() == [[2, 4, 0]]


def test_tokens_cover_one_to_v_minus_one_only():
    task = make("copy", seq_len=50)
    b = task.sample(256, torch.Generator().manual_seed(0))
    tokens = b.inputs[:, :-1].argmax(-1)
    assert tokens.min() == 1 and tokens.max() == 9  # V=10: tokens 1..9, 0 is the end marker
    assert make("max").config.vocab_size == 50


def test_determinism_by_seed():
    task = make("reverse", seq_len=10)
    a = task.sample(8, torch.Generator().manual_seed(3))
    b = task.sample(8, torch.Generator().manual_seed(3))
    c = task.sample(8, torch.Generator().manual_seed(4))
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)
    assert not torch.equal(a.inputs, c.inputs)


def test_one_length_per_batch_drawn_from_the_range():
    task = make("copy", seq_len=12, seq_len_min=4)
    g = torch.Generator().manual_seed(0)
    lengths = {task.sample(4, g).inputs.shape[1] - 1 for _ in range(60)}
    assert lengths <= set(range(4, 13)) and len(lengths) > 3


def test_fixed_test_set_is_seeded_and_sized():
    t1, t2 = make("copy", seq_len=5, test_size=130), make("copy", seq_len=5, test_size=130)
    b1, b2 = t1.test_batches(), t2.test_batches()
    assert [b.size for b in b1] == [TEST_CHUNK, TEST_CHUNK, 2]
    assert all(torch.equal(x.inputs, y.inputs) for x, y in zip(b1, b2))
    other = make("copy", seq_len=5, test_size=130, test_seed=1).test_batches()
    assert not torch.equal(b1[0].inputs, other[0].inputs)


def test_invalid_settings_are_clear():
    from uwbench.config import ConfigError

    with pytest.raises(ConfigError, match="seq_len_min"):
        make("copy", seq_len=5, seq_len_min=9)
