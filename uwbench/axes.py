"""The run axes: every setting a run is described and compared by, written once.

An axis is a name (the MLflow tag of a run, its ``runs.csv`` column, the key of a report cell's axes), the
config path it is read from (``model.memory_size``), its type, the short form that names it in labels
(``D=4``) and cell ids (``D4``), and the rule for when it applies (``cache_size`` only with the
cached-uniform writer, paper Section 2.3.1). A derived axis (the compression ratio (D+1)/T of paper
Section 2.2, computed by ``uwbench.theory.compression_ratio``) has no path and a function instead.

Everything else asks this module: the sweep's child-run tags (``run_tags``), ``uwbench train``'s tags,
the runs.csv columns and their types (``csv_columns``, ``int_columns``, ``float_columns``,
``param_paths``), a report cell's axes (``cell_axes``), label parts (``label``) and cell-id tokens and
their order (``id_token``, ``id_rank``). Adding an axis is one ``register`` call.
"""
from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

from uwbench.config import KEY_PATTERN, SECTIONS
from uwbench.errors import UserError

NONE = "none"  # the tag value of an axis that does not apply (e.g. the writer of the LSTM baseline)
DEFAULT_ID_RANK = 9  # grid axes without a rank come after the named ones in a cell id
SEED_PARAM = "seed"  # the seed axis; faithful grids enumerate seeds as a parameter of a job, so each (point,
#                       seed) is one trial, and every consumer strips it from the searched params by this name


def _present(values: Mapping[str, Any], name: str) -> bool:
    v = values.get(name)
    if v is None or (isinstance(v, float) and v != v):
        return False
    return not (isinstance(v, str) and v in ("", NONE))


@dataclass(frozen=True)
class Axis:
    """One run axis.

    ``applies(values)`` and ``derive(values)`` see the flat mapping of axis name -> raw value (read from
    a resolved config by ``raw_values``, or a report row), so a rule is written once for configs and rows.
    """

    name: str  # tag, runs.csv column, report axis key
    path: Optional[str]  # config path "section.key"; None for a derived axis
    type: type  # int | float | str
    short: Optional[str] = None  # "T": label "T=50", id token "T50"; "": the value alone; None: the name
    cell: bool = True  # describes a cell (model, task, T, D...) rather than one run of it (lr, clip, seed)
    id_rank: int = DEFAULT_ID_RANK  # position of a grid axis in cell ids (lower first)
    label_rank: Optional[int] = None  # position in a model label's "(D=4, L=2, ...)"; None: never there
    display: Mapping[str, str] = field(default_factory=dict)  # display names of values (ln_lstm -> LN-LSTM)
    # what a value adds to its model's label (uniform -> DNC+UW), in the order tables list the values
    suffix: Mapping[str, str] = field(default_factory=dict)
    applies: Optional[Callable[[Mapping[str, Any]], bool]] = None  # default: the value is present
    derive: Optional[Callable[[Mapping[str, Any]], Any]] = None  # a derived axis's value (when it applies)
    tag_digits: Optional[int] = None  # round a float tag to these digits
    description: str = ""

    def __post_init__(self):
        if not re.match(r"^[a-z][a-z0-9_]*$", self.name):
            raise UserError(f"axis name must be lower_case, got {self.name!r}")
        if self.path is None and self.derive is None:
            raise UserError(f"axis {self.name!r} needs a config `path` or a `derive` function")
        if self.path is not None and not KEY_PATTERN.match(self.path):
            raise UserError(f"axis {self.name!r}: path must be section.key with section one of "
                             f"{', '.join(SECTIONS)}, got {self.path!r}")
        if self.type not in (int, float, str):
            raise UserError(f"axis {self.name!r}: type must be int, float or str, got {self.type!r}")

    def applies_to(self, values: Mapping[str, Any]) -> bool:
        if self.applies is not None:
            return bool(self.applies(values))
        if self.derive is not None:
            return True
        return _present(values, self.name)


def _compression_ratio(values: Mapping[str, Any]) -> Optional[float]:
    from uwbench.theory import compression_ratio

    seq_len, memory_size = values.get("seq_len"), values.get("memory_size")
    if not _present(values, "memory_size") or not _present(values, "seq_len"):
        return None
    try:
        seq_len, memory_size = float(seq_len), float(memory_size)
    except (TypeError, ValueError):
        return None
    if not seq_len.is_integer() or seq_len <= 0:
        return None
    return compression_ratio(int(seq_len), memory_size)


def _decoder_write(values: Mapping[str, Any]) -> Optional[str]:
    """The decoder protocol of a memory model as "true" (writes every step, the authors' released code) or
    "false" (read-only, the paper's synthetic runs; docs/reference.md §5.4); None for a model without memory."""
    v = values.get("decoder_write")
    if v is None or (isinstance(v, float) and v != v) or v in ("", NONE):
        return None
    if isinstance(v, str):
        return {"true": "true", "false": "false"}.get(v.strip().lower())
    return "true" if bool(v) else "false"


def _cached_uniform(values: Mapping[str, Any]) -> bool:
    """The cache size L only matters for the cached-uniform writer (paper Section 2.3.1)."""
    return values.get("writer") == "cached_uniform" and _present(values, "cache_size")


_BUILTIN = (
    Axis("task", "task.name", str, short="", id_rank=2, description="the task"),
    Axis("model", "model.name", str, short="", display={"lstm": "LSTM", "dnc": "DNC", "ntm": "NTM"},
         description="the model"),
    Axis("controller", "model.controller", str, short="", id_rank=1, label_rank=3,
         display={"ln_lstm": "LN-LSTM", "lstm": "LSTM", "gru": "GRU", "rnn": "RNN"},
         description="the controller of a memory model"),
    # a writer not in `suffix` (a plugin) shows as +<name>, after these
    Axis("writer", "model.writer", str, short="", id_rank=0, description="the memory writing strategy",
         suffix={"none": "", "regular": "", "random": "+RW", "uniform": "+UW", "cached_uniform": "+CUW"}),
    Axis("seq_len", "task.seq_len", int, short="T", id_rank=5, description="input length T"),
    Axis("memory_size", "model.memory_size", int, short="D", id_rank=6, label_rank=0,
         description="memory slots D"),
    Axis("cache_size", "model.cache_size", int, short="L", id_rank=7, label_rank=2, applies=_cached_uniform,
         description="cache length L (cached uniform writing only)"),
    Axis("hidden_size", "model.hidden_size", int, short="H", id_rank=8, label_rank=1,
         description="controller units"),
    Axis("compression_ratio", None, float, short="(D+1)/T", derive=_compression_ratio, tag_digits=6,
         description="(D+1)/T, paper Section 2.2"),
    Axis("lr", "train.lr", float, cell=False, description="learning rate"),
    Axis("clip", "train.clip", float, cell=False, description="gradient clipping threshold"),
    Axis("clip_mode", "train.clip_mode", str, cell=False,
         description="how the clip applies: per_tensor, per_variable, global or none"),
    Axis("decoder_write", "model.decoder_write", str, cell=False, derive=_decoder_write,
         applies=lambda v: _decoder_write(v) is not None,
         description="the decoder protocol: true (writes every step) or false (read-only)"),
    Axis(SEED_PARAM, "train.seed", int, cell=False, description="the run's seed"),
)

_AXES: Dict[str, Axis] = {a.name: a for a in _BUILTIN}


# --------------------------------------------------------------------------------------------------
# The registry
# --------------------------------------------------------------------------------------------------


def register(axis: Axis) -> Axis:
    """Add an axis (after the built-in ones); its name and config path must be new."""
    if axis.name in _AXES:
        raise UserError(f"axis {axis.name!r} is already registered")
    if axis.path is not None and by_path(axis.path) is not None:
        raise UserError(f"config path {axis.path!r} is already the axis {by_path(axis.path).name!r}")
    _AXES[axis.name] = axis
    return axis


def unregister(name: str) -> None:
    if name not in _AXES:
        raise KeyError(f"no axis {name!r}; axes: {', '.join(_AXES)}")
    if any(a.name == name for a in _BUILTIN):
        raise UserError(f"axis {name!r} is built in and cannot be removed")
    del _AXES[name]


@contextlib.contextmanager
def registered(axis: Axis) -> Iterator[Axis]:
    """``with axes.registered(Axis(...)):`` the axis exists inside the block only (tests)."""
    register(axis)
    try:
        yield axis
    finally:
        unregister(axis.name)


def names() -> Tuple[str, ...]:
    return tuple(_AXES)


def get(name: str) -> Axis:
    try:
        return _AXES[name]
    except KeyError:
        raise KeyError(f"no axis {name!r}; axes: {', '.join(_AXES)}") from None


def by_path(path: str) -> Optional[Axis]:
    for a in _AXES.values():
        if a.path == path:
            return a
    return None


def cell_names() -> Tuple[str, ...]:
    """The axes that describe a cell and are read from the config (task, model, controller, ...)."""
    return tuple(a.name for a in _AXES.values() if a.cell and a.path is not None)


# --------------------------------------------------------------------------------------------------
# Values from a config or a row
# --------------------------------------------------------------------------------------------------


def raw_values(config: Mapping[str, Mapping[str, Any]]) -> Dict[str, Any]:
    """Axis name -> the config's value at the axis path (None where the config has no such key)."""
    out = {}
    for a in _AXES.values():
        if a.path is not None:
            section, key = a.path.split(".", 1)
            out[a.name] = (config.get(section) or {}).get(key)
    return out


def values(config: Mapping[str, Mapping[str, Any]]) -> Dict[str, Any]:
    """Axis name -> value for a (resolved) config: None where the axis does not apply."""
    return from_values(raw_values(config))


def from_values(raw: Mapping[str, Any]) -> Dict[str, Any]:
    """Apply each axis's rule to a flat mapping (a config's raw values or a report row): None where an
    axis does not apply, derived axes computed."""
    out: Dict[str, Any] = {}
    for a in _AXES.values():
        if a.derive is not None:
            out[a.name] = a.derive(raw) if a.applies_to(raw) else None
        else:
            out[a.name] = raw.get(a.name) if a.applies_to(raw) else None
    return out


def applies(name: str, values_: Mapping[str, Any]) -> bool:
    """Does axis ``name`` apply to this flat mapping (e.g. is the cache size meaningful for this row)?"""
    return get(name).applies_to(values_)


def run_tags(config: Mapping[str, Mapping[str, Any]]) -> Dict[str, Any]:
    """The axis tags of a run from its resolved config (``NONE`` where an axis does not apply)."""
    out = {}
    for name, v in values(config).items():
        a = _AXES[name]
        if v is None:
            out[name] = NONE
        elif a.tag_digits is not None and isinstance(v, float):
            out[name] = round(v, a.tag_digits)
        else:
            out[name] = v
    return out


def cell_axes(config: Mapping[str, Mapping[str, Any]]) -> Dict[str, Any]:
    """A cell's describing axes (those that apply) from its config, for the report."""
    vals = values(config)
    return {n: vals[n] for n in cell_names() if vals[n] is not None}


def compression_ratio(row: Mapping[str, Any]) -> Optional[float]:
    """(D+1)/T of a row or config values (None where there is no memory or no length)."""
    return get("compression_ratio").derive(row)


# --------------------------------------------------------------------------------------------------
# runs.csv columns
# --------------------------------------------------------------------------------------------------


def csv_columns(exclude: Tuple[str, ...] = ()) -> Tuple[str, ...]:
    """The axis columns of runs.csv, in registry order (``exclude``: those placed elsewhere)."""
    return tuple(n for n in _AXES if n not in exclude)


def int_columns() -> Tuple[str, ...]:
    return tuple(a.name for a in _AXES.values() if a.type is int)


def float_columns() -> Tuple[str, ...]:
    return tuple(a.name for a in _AXES.values() if a.type is float)


def param_paths() -> Dict[str, str]:
    """Column -> the flattened config param it can be read from when a run has no tag for it."""
    return {a.name: a.path for a in _AXES.values() if a.path is not None}


# --------------------------------------------------------------------------------------------------
# Labels and cell ids
# --------------------------------------------------------------------------------------------------


def display(name: str, value: Any) -> str:
    """A value's display name (``ln_lstm`` -> ``LN-LSTM``), else the value as text."""
    a = _AXES.get(name)
    text = _text(value)
    return a.display.get(text, text) if a is not None else text


def label(name: str, value: Any) -> str:
    """The label part of one axis value: ``T=50``, ``D=4``, ``LN-LSTM``, ``word_size=32``."""
    a = get(name)
    if a.short == "":
        return display(name, value)
    return f"{a.short if a.short is not None else a.name}={_text(value)}"


def label_axes() -> Tuple[str, ...]:
    """The axes that can tell cells apart in a model label (``label_rank`` set), in their order there."""
    ranked = sorted((a for a in _AXES.values() if a.label_rank is not None), key=lambda a: a.label_rank)
    return tuple(a.name for a in ranked)


def id_rank(path: str) -> Tuple[int, str]:
    """Sort key of a grid axis in cell ids: writer, controller, task, linked axes, T, D, L, H, others."""
    if "." not in path:  # linked axes (e.g. a dataset bundle) read best right after the task
        return (3, path)
    a = by_path(path)
    return (a.id_rank if a is not None else DEFAULT_ID_RANK, path)


def id_token(path: str, value: Any) -> str:
    """The cell-id token of one grid value: ``T50``, ``uniform``, ``no_flag`` / ``flag``, ``key3``."""
    key = path.rsplit(".", 1)[-1]
    a = by_path(path)
    if isinstance(value, bool):
        text = key if value else "no_" + key
    elif a is not None and a.short == "":
        text = str(value)
    elif a is not None and a.short:
        text = f"{a.short}{value}"
    else:
        text = f"{a.name if a is not None else key}{value}"
    return re.sub(r"[^A-Za-z0-9_.]+", "", text)


def _text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def describe() -> List[str]:
    """One line per axis (``uwbench ls``-style listings and docs)."""
    return [f"{a.name:<18} {a.path or '(derived)':<20} {a.type.__name__:<6} {a.description}" for a in _AXES.values()]
