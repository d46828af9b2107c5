"""DNC memory: the batched operations against a written-out per-sample loop of docs/reference.md §4, the
allocation on hand-made usage vectors, temporal-link invariants, the interface layout of docs/reference.md
§3.3 and the initial state."""
from __future__ import annotations

import math

import pytest
import torch

from uwbench.models import dnc_memory as dm
from uwbench.models.dnc_memory import DNCMemory, DNCState

torch.set_num_threads(1)  # CI runners and the dev machine have 2 shared cores

F64 = torch.float64


# ---- a slow, per-sample version of docs/reference.md §4 in plain Python floats ----


def slow_content(memory, key, beta):
    """memory [N][W], key [W], beta float -> [N]."""
    def unit(v):
        return [x / math.sqrt(max(sum(y * y for y in v), 1e-12)) for x in v]

    k = unit(key)
    scores = [beta * sum(a * b for a, b in zip(unit(row), k)) for row in memory]
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    return [e / sum(exps) for e in exps]


def slow_allocation(usage):
    order = sorted(range(len(usage)), key=lambda i: (usage[i], i))
    alloc = [0.0] * len(usage)
    prod = 1.0
    for i in order:
        alloc[i] = (1 - usage[i]) * prod
        prod *= usage[i]
    return alloc


def slow_step(state, iface):
    """One write then one read for one sample; every argument is nested Python lists / floats."""
    memory, usage, prec, link, ww_prev, wr_prev = state
    n, w = len(memory), len(memory[0])
    r_heads = len(wr_prev)
    psi = [1.0] * n
    for r in range(r_heads):
        for i in range(n):
            psi[i] *= 1 - iface["free"][r] * wr_prev[r][i]
    usage = [(usage[i] + ww_prev[i] - usage[i] * ww_prev[i]) * psi[i] for i in range(n)]
    alloc = slow_allocation(usage)
    content = slow_content(memory, iface["write_key"], iface["write_strength"])
    ga, gw = iface["alloc_gate"], iface["write_gate"]
    ww = [gw * (ga * alloc[i] + (1 - ga) * content[i]) for i in range(n)]
    new_link = [[0.0 if i == j else (1 - ww[i] - ww[j]) * link[i][j] + ww[i] * prec[j] for j in range(n)]
                for i in range(n)]
    total = sum(ww)
    prec = [(1 - total) * prec[i] + ww[i] for i in range(n)]
    memory = [[memory[i][k] * (1 - ww[i] * iface["erase"][k]) + ww[i] * iface["write_vector"][k] for k in range(w)]
              for i in range(n)]
    reads, wr = [], []
    for r in range(r_heads):
        c = slow_content(memory, iface["read_keys"][r], iface["read_strengths"][r])
        fwd = [sum(new_link[i][j] * wr_prev[r][j] for j in range(n)) for i in range(n)]
        bwd = [sum(new_link[j][i] * wr_prev[r][j] for j in range(n)) for i in range(n)]
        pi = iface["read_modes"][r]
        weights = [pi[0] * bwd[i] + pi[1] * c[i] + pi[2] * fwd[i] for i in range(n)]
        wr.append(weights)
        reads.append([sum(weights[i] * memory[i][k] for i in range(n)) for k in range(w)])
    return (memory, usage, prec, new_link, ww, wr), reads


def random_state(b, n, w, r, gen) -> DNCState:
    """A valid but arbitrary state: weights are sub-stochastic, usage in [0, 1)."""
    def subsoft(*shape):
        return torch.softmax(torch.randn(*shape, n + 1, generator=gen, dtype=F64), -1)[..., :n]

    link = subsoft(b, n) * (1 - torch.eye(n, dtype=F64))  # (B, N, N) rows sub-stochastic, zero diagonal
    return DNCState(
        memory=torch.randn(b, n, w, generator=gen, dtype=F64),
        usage=torch.rand(b, n, generator=gen, dtype=F64),
        precedence=subsoft(b),
        link=link,
        write_weights=subsoft(b),
        read_weights=subsoft(b, r),
    )


def raw_interface(mem: DNCMemory, b, gen) -> torch.Tensor:
    return (torch.randn(b, mem.interface_size, generator=gen, dtype=F64) * 3).clamp(-20, 20)


def iface_sample(iface: dm.DNCInterface, s: int) -> dict:
    return {
        "read_keys": iface.read_keys[s].tolist(),
        "read_strengths": iface.read_strengths[s].tolist(),
        "write_key": iface.write_key[s].tolist(),
        "write_strength": float(iface.write_strength[s, 0]),
        "erase": iface.erase[s].tolist(),
        "write_vector": iface.write_vector[s].tolist(),
        "free": iface.free_gates[s].tolist(),
        "alloc_gate": float(iface.allocation_gate[s, 0]),
        "write_gate": float(iface.write_gate[s, 0]),
        "read_modes": iface.read_modes[s].tolist(),
    }


@pytest.mark.parametrize("n,w,r", [(1, 3, 1), (4, 5, 1), (5, 3, 2), (3, 4, 3)])
def test_write_and_read_match_slow_loop(n, w, r):
    gen = torch.Generator().manual_seed(100 * n + 10 * w + r)
    mem = DNCMemory(n, w, r)
    b = 4
    state = random_state(b, n, w, r, gen)
    iface = mem.parse(raw_interface(mem, b, gen))
    written = mem.write(state, iface)
    reads, after = mem.read(written, iface)
    assert reads.shape == (b, w * r)
    for s in range(b):
        slow_state, slow_reads = slow_step(tuple(t[s].tolist() for t in state), iface_sample(iface, s))
        for fast, slow in zip(after, slow_state):
            torch.testing.assert_close(fast[s], torch.tensor(slow, dtype=F64), rtol=1e-10, atol=1e-12)
        # vec(r) is the [W, R] read matrix flattened row-major: index w * R + head
        want = torch.tensor(slow_reads, dtype=F64).T.reshape(-1)
        torch.testing.assert_close(reads[s], want, rtol=1e-10, atol=1e-12)
    # the write leaves the read weights alone; the read leaves everything but them alone
    assert torch.equal(written.read_weights, state.read_weights)
    for name in ("memory", "usage", "precedence", "link", "write_weights"):
        assert torch.equal(getattr(after, name), getattr(written, name))


def test_content_weighting_matches_slow_loop_and_handles_zero_vectors():
    gen = torch.Generator().manual_seed(0)
    memory = torch.randn(3, 5, 4, generator=gen, dtype=F64)
    memory[0, 2] = 0.0  # an all-zero row: TF's 1e-12 floor keeps the cosine finite (0)
    keys = torch.randn(3, 2, 4, generator=gen, dtype=F64)
    keys[1, 0] = 0.0
    strengths = 1 + torch.rand(3, 2, generator=gen, dtype=F64) * 5
    fast = dm.content_weighting(memory, keys, strengths)
    assert torch.isfinite(fast).all()
    for s in range(3):
        for k in range(2):
            slow = slow_content(memory[s].tolist(), keys[s, k].tolist(), float(strengths[s, k]))
            torch.testing.assert_close(fast[s, k], torch.tensor(slow, dtype=F64), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(fast[1, 0], torch.full((5,), 0.2, dtype=F64))  # zero key: uniform


@pytest.mark.parametrize(
    "usage,expected",
    [
        ([0.5, 0.2, 0.9, 0.4], [0.5 * 0.2 * 0.4, 0.8, 0.1 * 0.2 * 0.4 * 0.5, 0.6 * 0.2]),
        ([0.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]),  # ties: the lowest slot first, as TF's top_k
        ([1.0, 1.0, 1.0], [0.0, 0.0, 0.0]),  # a full memory allocates nothing (no epsilon)
        ([0.3, 0.3], [0.7, 0.7 * 0.3]),
        ([0.9, 0.0, 0.5], [0.1 * 0.0 * 0.5, 1.0, 0.0]),
        ([0.7], [0.3]),
    ],
)
def test_allocation_on_hand_made_usage(usage, expected):
    got = dm.allocation(torch.tensor([usage], dtype=F64))[0]
    torch.testing.assert_close(got, torch.tensor(expected, dtype=F64), rtol=0, atol=1e-15)
    # the allocation is a sub-distribution: sum = 1 - prod(u)
    torch.testing.assert_close(got.sum(), 1 - torch.tensor(usage, dtype=F64).prod())


def test_allocation_matches_slow_loop_in_batch():
    gen = torch.Generator().manual_seed(3)
    usage = torch.rand(16, 7, generator=gen, dtype=F64)
    usage[0, 3] = usage[0, 5]  # a tie inside a random row
    fast = dm.allocation(usage)
    for s in range(16):
        torch.testing.assert_close(fast[s], torch.tensor(slow_allocation(usage[s].tolist()), dtype=F64))


def test_link_invariants_over_many_writes():
    gen = torch.Generator().manual_seed(1)
    mem = DNCMemory(5, 4, 2).double()
    b = 8
    state = mem.initial_state(b, "cpu", F64)
    for _ in range(30):
        iface = mem.parse(raw_interface(mem, b, gen))
        state = mem.write(state, iface)
        _, state = mem.read(state, iface)
        link = state.link  # (B, N, N)
        assert torch.all(torch.diagonal(link, dim1=1, dim2=2) == 0)
        assert link.min() >= 0 and link.max() <= 1
        assert (link.sum(-1) <= 1 + 1e-12).all() and (link.sum(-2) <= 1 + 1e-12).all()
        ww = state.write_weights
        assert ww.min() >= 0 and (ww.sum(-1) <= 1 + 1e-12).all()
        assert state.usage.min() >= 0 and state.usage.max() <= 1
        assert (state.precedence.sum(-1) <= 1 + 1e-12).all()
        # forward/backward weights are L w, sub-stochastic, so a read weighting sums to at most 1
        assert state.read_weights.min() >= 0 and (state.read_weights.sum(-1) <= 1 + 1e-12).all()


def test_link_records_write_order():
    """Writing slot 0 then slot 2 (one-hot): L[2, 0] = 1 (2 was written after 0), read forward from 0
    lands on 2 and backward from 2 lands on 0."""
    n = 3
    link = torch.zeros(1, n, n, dtype=F64)
    prec = torch.zeros(1, n, dtype=F64)
    for slot in (0, 2):
        ww = torch.nn.functional.one_hot(torch.tensor([slot]), n).to(F64)
        link = dm.update_link(link, ww, prec)
        prec = dm.update_precedence(prec, ww)
    assert link[0, 2, 0] == 1 and link.sum() == 1
    content = torch.zeros(1, 1, n, dtype=F64)
    at = lambda slot: torch.nn.functional.one_hot(torch.tensor([[slot]]), n).to(F64)  # noqa: E731
    forward_mode = torch.tensor([[[0.0, 0.0, 1.0]]], dtype=F64)
    backward_mode = torch.tensor([[[1.0, 0.0, 0.0]]], dtype=F64)
    assert torch.equal(dm.read_weighting(link, at(0), content, forward_mode), at(2))
    assert torch.equal(dm.read_weighting(link, at(2), content, backward_mode), at(0))


def test_erase_and_add_one_hot_replaces_the_slot():
    memory = torch.randn(2, 4, 3, dtype=F64)
    ww = torch.zeros(2, 4, dtype=F64)
    ww[0, 1] = ww[1, 3] = 1.0
    v = torch.randn(2, 3, dtype=F64)
    out = dm.erase_and_add(memory, ww, torch.ones(2, 3, dtype=F64), v)
    for s, slot in ((0, 1), (1, 3)):
        assert torch.equal(out[s, slot], v[s])
        others = [i for i in range(4) if i != slot]
        assert torch.equal(out[s, others], memory[s, others])


def test_interface_layout_and_activations():
    w, r = 3, 2
    mem = DNCMemory(4, w, r)
    assert mem.interface_size == w * r + 3 * w + 5 * r + 3 == 28
    assert DNCMemory(4, 64, 1).interface_size == 264  # docs/reference.md §3.3
    xi = torch.arange(mem.interface_size, dtype=F64).unsqueeze(0) / 10  # distinct values in order
    iface = mem.parse(xi)
    x = xi[0]
    # read keys: TF reshape to [W, R], element (w, r) at w * R + r
    for wi in range(w):
        for ri in range(r):
            assert iface.read_keys[0, ri, wi] == x[wi * r + ri]
    o = w * r
    torch.testing.assert_close(iface.read_strengths[0], 1 + torch.nn.functional.softplus(x[o:o + r]))
    o += r
    assert torch.equal(iface.write_key[0], x[o:o + w])
    o += w
    torch.testing.assert_close(iface.write_strength[0, 0], 1 + torch.nn.functional.softplus(x[o]))
    o += 1
    torch.testing.assert_close(iface.erase[0], torch.sigmoid(x[o:o + w]))
    o += w
    assert torch.equal(iface.write_vector[0], x[o:o + w])  # linear
    o += w
    torch.testing.assert_close(iface.free_gates[0], torch.sigmoid(x[o:o + r]))
    o += r
    torch.testing.assert_close(iface.allocation_gate[0, 0], torch.sigmoid(x[o]))
    torch.testing.assert_close(iface.write_gate[0, 0], torch.sigmoid(x[o + 1]))
    o += 2
    # read modes: TF reshape to [3, R], element (m, r) at m * R + r, softmax over the 3 modes
    modes = x[o:o + 3 * r].reshape(3, r)
    assert o + 3 * r == mem.interface_size
    torch.testing.assert_close(iface.read_modes[0], torch.softmax(modes, dim=0).T)
    assert mem.write_gate(iface).shape == (1,)


def test_initial_state_per_reference():
    mem = DNCMemory(4, 6, 2)
    st = mem.initial_state(3, "cpu")
    assert st.memory.shape == (3, 4, 6) and torch.all(st.memory == 1e-6)
    assert torch.all(st.write_weights == 1e-6) and torch.all(st.read_weights == 1e-6)
    assert st.read_weights.shape == (3, 2, 4)
    for t in (st.usage, st.precedence, st.link):
        assert torch.all(t == 0)
    assert st.link.shape == (3, 4, 4)
    r = mem.initial_read(3, "cpu")
    assert r.shape == (3, 12) and torch.all(r == 1e-6)
    assert sum(p.numel() for p in mem.parameters()) == 0


def test_write_and_read_are_differentiable():
    """gradcheck through retention, usage, the sort-based allocation, link and the read modes."""
    gen = torch.Generator().manual_seed(5)
    mem = DNCMemory(3, 2, 2)
    state = random_state(2, 3, 2, 2, gen)
    xi = raw_interface(mem, 2, gen).requires_grad_(True)
    memory = state.memory.clone().requires_grad_(True)

    def f(xi, memory):
        iface = mem.parse(xi)
        st = mem.write(state._replace(memory=memory), iface)
        reads, st = mem.read(st, iface)
        return reads, st.usage, st.link

    assert torch.autograd.gradcheck(f, (xi, memory))


@pytest.mark.parametrize("bad", [dict(memory_size=0), dict(word_size=0), dict(read_heads=0)])
def test_invalid_sizes_are_errors(bad):
    with pytest.raises(ValueError, match=">= 1"):
        DNCMemory(**bad)
