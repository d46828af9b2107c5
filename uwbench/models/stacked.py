"""K models of one shape run as one: the forward of a population (``uwbench/training/population.py``).

The members are ordinary models, each with its own parameters (built from its own seed), its own optimiser
and its own batches. What they share is every shape, so their forward can be one computation with a leading
member axis:

    torch path    members with the same write schedule form a group; the group's parameters are stacked
                  (K, ...) and the first member's forward is mapped over them with ``torch.func.vmap``:
                  each product is one batched product over the group, each memory operation (they have
                  no weights) one operation over K·B rows, so on a GPU K members launch the kernels of one
                  (``StackedGroup``). The stack is part of the graph: each member's gradient reaches its
                  own parameters, exactly as its own forward's would (to round-off: a batched product sums
                  in another order than K single ones).
    native path   the C++ whole-sequence node (``native.py``) takes one member per call: each member runs
                  its own node, so a member's arithmetic is its solo run's, bit for bit. A member alone in
                  its group (random writing's own mask) runs its own forward the same way.

A member's write schedule is its writer's (random writing draws one mask per member), so members whose
schedules differ are in different groups: a held step is a Python branch, not a masked computation, and
each group keeps the speed of its own schedule. ``group_members`` is the rule; ``PopulationForward`` keeps
one ``StackedGroup`` per group and, on CUDA with ``cuda_graph``, captures each group's forward and backward
as CUDA graphs (``cuda_graph.GraphedTraining``: the whole population step is then two replays per group).
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import torch
from torch import nn
from torch.func import functional_call, vmap


class StackedGroup(nn.Module):
    """Members with one shape and one write schedule, run as one: ``forward(inputs, decoder_inputs)`` takes
    (K, B, Te, I) and (K, B, Td, I) and returns (K, B, Td, O), row k being member k's forward of its own
    batch. The members stay the owners of their parameters (this module only registers them, so that a
    CUDA-graph capture sees them as its inputs)."""

    capturable = True  # the members' forwards are free of host synchronisation (cuda_graph.unsupported_reason)
    tracing = False

    def __init__(self, members: Sequence[nn.Module]):
        super().__init__()
        if not members:
            raise ValueError("a stacked group needs at least one member")
        self.members = nn.ModuleList(members)
        self.template = members[0]  # whose forward is mapped (its writer's schedule is the group's)
        self.param_names = [n for n, _ in self.template.named_parameters()]
        self.buffer_names = [n for n, _ in self.template.named_buffers()]

    def stacked(self) -> Tuple[Dict[str, torch.Tensor], Dict[str, torch.Tensor]]:
        """The members' parameters and buffers, stacked along a new first axis (differentiable)."""
        named = [(dict(m.named_parameters()), dict(m.named_buffers())) for m in self.members]
        params = {n: torch.stack([p[n] for p, _ in named]) for n in self.param_names}
        buffers = {n: torch.stack([b[n] for _, b in named]) for n in self.buffer_names}
        return params, buffers

    def forward(self, inputs: torch.Tensor, decoder_inputs: torch.Tensor, lengths=None) -> torch.Tensor:
        if lengths is not None:
            raise ValueError("a population's forward takes no per-sequence lengths: `lengths is None` must hold")
        params, buffers = self.stacked()
        template = self.template

        def one(p, b, x, xd):
            return functional_call(template, (p, b), (x, xd))

        return vmap(one)(params, buffers, inputs, decoder_inputs)


def schedule_key(model: nn.Module, encoder_steps: int) -> Tuple:
    """What decides whether two members can be mapped together: their write schedule at this length (None
    for a model without a writer: every member of it runs the same steps)."""
    writer = getattr(model, "writer", None)
    if writer is None:
        return ()
    return tuple(bool(s) for s in writer.schedule(encoder_steps))


def group_members(models: Sequence[nn.Module], members: Sequence[int], native: Sequence[bool],
                  encoder_steps: int) -> List[Tuple[int, ...]]:
    """The groups ``members`` (indices into ``models``) run in: a native member alone, the others by write
    schedule, in the members' order."""
    groups: Dict[Tuple, List[int]] = {}
    order: List[Tuple] = []
    for i in members:
        key = ("native", i) if native[i] else ("stacked", schedule_key(models[i], encoder_steps))
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(i)
    return [tuple(groups[k]) for k in order]


class PopulationForward:
    """The population's training forward: ``outputs = forward(members, batches)`` with ``batches`` a dict
    member index -> its batch (``inputs``, ``decoder_inputs``), returning member index -> output; or group
    by group, ``forward.run(group, batches)`` for each of ``forward.groups(members, encoder_steps)``. Groups
    (``group_members``) are built once per set of members and reused; a member that stops leaves its group,
    which is rebuilt without it at the next call; a member that joins (``add``) gets the next index."""

    def __init__(self, models: Sequence[nn.Module], native: Sequence[bool], cuda_graph: bool = False):
        self.models, self.native, self.cuda_graph = list(models), list(native), cuda_graph
        self._groups: Dict[Tuple[int, ...], object] = {}
        self._plan: Dict[Tuple, List[Tuple[int, ...]]] = {}

    def add(self, model: nn.Module, native: bool) -> int:
        """A member that joins the population (a refilled slot): its index."""
        self.models.append(model)
        self.native.append(native)
        return len(self.models) - 1

    def groups(self, members: Sequence[int], encoder_steps: int) -> List[Tuple[int, ...]]:
        key = (tuple(members), encoder_steps)
        if key not in self._plan:
            self._plan[key] = group_members(self.models, members, self.native, encoder_steps)
        return self._plan[key]

    def _runner(self, group: Tuple[int, ...]):
        runner = self._groups.get(group)
        if runner is None:
            stacked = StackedGroup([self.models[i] for i in group])
            if self.cuda_graph:
                from uwbench.models.cuda_graph import GraphedTraining

                runner = GraphedTraining(stacked)
            else:
                runner = stacked
            self._groups[group] = runner
        return runner

    def run(self, group: Tuple[int, ...], batches) -> Dict[int, torch.Tensor]:
        """The forward of one group (from ``groups``): member index -> its output."""
        if len(group) == 1:  # a member alone (native, or its own schedule): its own forward
            i = group[0]
            return {i: self.models[i](batches[i].inputs, batches[i].decoder_inputs, batches[i].lengths)}
        inputs = torch.stack([batches[i].inputs for i in group])
        decoder_inputs = torch.stack([batches[i].decoder_inputs for i in group])
        stacked = self._runner(group)(inputs, decoder_inputs)
        return {i: stacked[k] for k, i in enumerate(group)}

    def __call__(self, members: Sequence[int], batches) -> Dict[int, torch.Tensor]:
        """Every group's forward: member index -> its output."""
        out: Dict[int, torch.Tensor] = {}
        for group in self.groups(members, int(batches[members[0]].inputs.shape[1])):
            out.update(self.run(group, batches))
        return out
