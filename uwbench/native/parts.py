"""What a model part declares to run on the native kernels, and the check of it against the kernels.

A part of a model (a controller, a memory, a cached writer's attention) that has a kernel says so next
to its torch code, with a method of its own class::

    def native_kernel(self) -> CellKernel | MemoryKernel | AttentionKernel

The declaration names the kernel (its entry points ``<kernel>_fwd_<f32|f64>``, ``<kernel>_bwd_...``
and size queries, typed in ``uwbench.native.SIGNATURES``), gives the kernel's size arguments for this
part, and, for a memory, its state layout (``StateLayout``: one list of fields from which the flatten
to the kernel's per-row buffer and the unflatten back are made). A declaration is not inherited: a
subclass may compute another function, so it runs the torch path until its own class declares a kernel
(``native_kernel = Parent.native_kernel`` re-uses the parent's when the function is the same).

``check`` compares what the declarations compute (state size, interface size, parameter counts, ...)
with what the loaded kernels export for the same size arguments; a mismatch is a ``NativeUnavailable``
naming both numbers, before any buffer is handed to a kernel. ``uwbench.models.native`` runs a model
on the kernels only when every part of it declares one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch

from uwbench.native import KERNELS, NativeUnavailable

KERNEL_METHOD = "native_kernel"


def fields_tuple(*fields):
    """A state that is a plain tuple of its fields (``StateLayout.make``'s default)."""
    return tuple(fields)


@dataclass(frozen=True)
class StateLayout:
    """A memory state's per-row layout in the kernel's order: ``fields`` is (name, per-row shape) for each
    tensor of the state, in the order the state tuple holds them and the kernel reads them; ``make``
    builds the state back from its fields (a NamedTuple class; default a plain tuple)."""

    fields: Tuple[Tuple[str, Tuple[int, ...]], ...]
    make: Callable[..., Any] = fields_tuple

    @property
    def sizes(self) -> List[int]:
        return [math.prod(shape) for _, shape in self.fields]

    @property
    def size(self) -> int:
        """S, the floats per row."""
        return sum(self.sizes)

    def flatten(self, state: Sequence[torch.Tensor]) -> torch.Tensor:
        """The state's tensors (B, *shape) each -> one (B, S) tensor (under autograd)."""
        if len(state) != len(self.fields):
            raise NativeUnavailable(f"the state layout declares {len(self.fields)} fields "
                                    f"({', '.join(n for n, _ in self.fields)}), the memory's state has {len(state)}")
        rows = []
        for (name, shape), t in zip(self.fields, state):
            if tuple(t.shape[1:]) != tuple(shape):
                raise NativeUnavailable(f"the state layout declares {name} of {tuple(shape)} per row, the memory's "
                                        f"state has {tuple(t.shape[1:])}")
            rows.append(t.reshape(t.shape[0], -1))
        return torch.cat(rows, dim=1)  # (B, S)

    def unflatten(self, flat: torch.Tensor):
        """(B, S) -> the state, each field (B, *shape)."""
        b = flat.shape[0]
        pieces = flat.split(self.sizes, dim=1)
        return self.make(*(p.reshape(b, *shape) for p, (_, shape) in zip(pieces, self.fields)))


@dataclass(frozen=True)
class CellKernel:
    """A controller cell: h_t (and c_t) from z_t = gx_t + h_{t-1} W_hh (+ r_{t-1} W_read).

    ``sizes`` = (H,); ``gate_size`` G, the columns of W_hh (checked against ``<kernel>_gate_size``);
    ``has_cell``: an LSTM cell c is carried beside h; ``params``: the cell's own parameters as one flat
    tensor made under autograd, or None (its length is checked against ``<kernel>_params_size``)."""

    kernel: str
    sizes: Tuple[int, ...]
    gate_size: int
    has_cell: bool
    params: Callable[[], Optional[torch.Tensor]]

    def expected(self) -> Dict[str, int]:
        p = self.params()
        return {"gate_size": self.gate_size, "params_size": 0 if p is None else p.numel()}


@dataclass(frozen=True)
class MemoryKernel:
    """An external memory: one step (write, then read) from the raw interface xi_t and the state.

    ``sizes``: the kernel's size arguments (DNC: N, W, R; NTM: N, M); ``interface_size`` |xi| and
    ``read_size`` as the Python memory has them; ``layout`` its state, whose size S is checked against
    ``<kernel>_state_size``."""

    kernel: str
    sizes: Tuple[int, ...]
    interface_size: int
    read_size: int
    layout: StateLayout

    def expected(self) -> Dict[str, int]:
        return {"state_size": self.layout.size, "interface_size": self.interface_size, "read_size": self.read_size}


@dataclass(frozen=True)
class AttentionKernel:
    """A cached writer's attention over its cache: (h_{t-1}, cache, r_{t-1}) -> (a_t, alpha).

    ``sizes``: the kernel's size arguments after the batch and cache length (CUW: H, read_size, A);
    ``params``: the module's parameters in the kernel's order; ``backward_params`` turns their detached
    values into what the kernel's backward takes (CUW: the three matrices transposed)."""

    kernel: str
    sizes: Tuple[int, ...]
    params: Tuple[torch.Tensor, ...]
    backward_params: Callable[[List[torch.Tensor]], List[torch.Tensor]] = list

    def expected(self) -> Dict[str, int]:
        return {"params_size": sum(p.numel() for p in self.params)}


Kernel = Union[CellKernel, MemoryKernel, AttentionKernel]
FAMILY = {CellKernel: "cell", MemoryKernel: "memory", AttentionKernel: "attention"}


def declaration(part) -> Optional[Kernel]:
    """The kernel ``part``'s own class declares (see the module docstring), or None."""
    if part is None:
        return None
    method = type(part).__dict__.get(KERNEL_METHOD)
    return None if method is None else method(part)


def check(lib, role: str, part, kernel: Kernel) -> None:
    """Compare what ``kernel`` (the declaration of ``part``, the model's ``role``) computes with what the
    loaded kernels export for its size arguments; raise ``NativeUnavailable`` naming both on a mismatch.
    A memory's layout is also tried on the memory's own initial state (its fields' shapes)."""
    where = f"the {role} {type(part).__name__} (kernel {kernel.kernel!r})"
    family = FAMILY[type(kernel)]
    if KERNELS.get(kernel.kernel, (None,))[0] != family:
        known = ", ".join(k for k, (f, _) in KERNELS.items() if f == family)
        raise NativeUnavailable(f"{where} names no {family} kernel the library has; the {family} kernels are {known}")
    arity = KERNELS[kernel.kernel][1]
    if len(kernel.sizes) != arity:
        raise NativeUnavailable(f"{where} declares {len(kernel.sizes)} size arguments {tuple(kernel.sizes)}, the "
                                f"kernel takes {arity}")
    for name, ours in kernel.expected().items():
        theirs = getattr(lib, f"{kernel.kernel}_{name}")(*kernel.sizes)
        if theirs != ours:
            raise NativeUnavailable(f"{where}: the declaration gives {name} {ours}, the kernel {kernel.kernel}_{name}"
                                    f"{tuple(kernel.sizes)} gives {theirs}; the declaration next to the part's torch "
                                    "code and the kernel's source must agree (set train.native=false meanwhile)")
    if isinstance(kernel, MemoryKernel):
        state = part.initial_state(1, torch.device("cpu"), torch.float64)
        try:
            flat = kernel.layout.flatten(state)  # raises on a field of the wrong shape
        except NativeUnavailable as exc:
            raise NativeUnavailable(f"{where}: {exc}") from None
        back = kernel.layout.unflatten(flat)
        if not all(torch.equal(a, b) for a, b in zip(back, state)):
            raise NativeUnavailable(f"{where}: the state layout's unflatten does not give back the state it flattened")
