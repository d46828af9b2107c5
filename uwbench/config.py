"""Run configuration: component config dataclasses, overrides and flattening.

A run is fully described by a nested dict ``{"task": {...}, "model": {...}, "train": {...}}``. Each
section names its component (``name``) and carries the fields of that component's config dataclass
(the one home of its defaults; YAML and the CLI only say what differs). ``resolve`` fills in every
default, so what MLflow records is the complete configuration.

Parts. A component may be made of a smaller one chosen by name, such as a memory model's writer. The
config dataclass lists it in ``PARTS`` (``Part("writer", WRITERS, "writer_config")``): the field
``writer`` names it, and the part's own settings (its registered config dataclass) sit flat in the same
section (``model.cache_size``). ``build`` checks them against the chosen part's config and stores the
built part config in the hidden field ``writer_config``; ``as_dict`` flattens it back, so a section's
flat keys survive a round trip. A setting that belongs to a part other than the chosen one is an error
that names its owner.

Values. Each value given is checked by pydantic against its field's annotation, as the study files are
(``uwbench/spec/schema.py``): the type (a string from ``--set`` converted to it) and the rules written in
``Annotated`` metadata, once each, with messages in the form ``train: `steps >= 1` must hold, got 0``
(see "values" below). A ``__post_init__`` may check what an annotation cannot say (rules between fields).
"""
from __future__ import annotations

import dataclasses
import functools
import math
import re
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from pydantic import BeforeValidator, ConfigDict, TypeAdapter, ValidationError
from pydantic_core import PydanticCustomError

from uwbench import suggest
from uwbench.errors import UserError

SECTIONS = ("task", "model", "train")  # the sections of a run config: the one list every module asks
KEY_PATTERN = re.compile(rf"^({'|'.join(SECTIONS)})\.[a-z_][a-z0-9_]*$")  # a config path: section.key


class ConfigError(UserError):
    """A configuration value or key that is not allowed; the message names the key and the fix."""


# ---- values: each field checked by pydantic, against its annotation ----
#
# A config dataclass's annotations are its rules: the type, and the bounds in ``Annotated`` metadata
# (``steps: Annotated[int, Field(ge=1)] = 10000``), with a ``Why`` for a bound whose message needs its reason.
# pydantic checks each value given (from YAML, a study or ``--set``: a string) in its lax mode, held a little
# stricter: a bool is not a number, NaN is not a number, and "none" or "null" is None where None is allowed.
# Its errors become the messages below (``_message``), each kind once.

NONE_WORDS = ("none", "null")
BOUNDS = {"greater_than_equal": (">=", "ge"), "greater_than": (">", "gt"), "less_than_equal": ("<=", "le"),
          "less_than": ("<", "lt")}
REASON_OF = {**{kind: name for kind, (_, name) in BOUNDS.items()}, "finite_number": "finite",
             "string_pattern_mismatch": "pattern"}  # the ``Why`` key that explains each kind of broken rule
KINDS = {  # pydantic's error types (and ours) -> what the value must be
    "int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
    "float_type": "a number", "float_parsing": "a number", "nan": "a number",
    "bool_type": "true or false", "bool_parsing": "true or false", "string_type": "a string",
}


class Why:
    """The reason behind a field's rule, added to its message: ``Why(le="the largest step ...")``, keyed by the
    bound it explains (``ge``, ``gt``, ``le``, ``lt``), ``finite``, or ``pattern`` (the forms a string may take,
    said in words instead of the pattern)."""

    def __init__(self, **reasons: str):
        self.reasons = reasons


def _no_bool(kind: str):
    def check(value: Any) -> Any:
        if isinstance(value, bool):
            raise PydanticCustomError(kind, "a bool is not a number")
        return value

    return check


def _no_nan(value: Any) -> Any:
    if isinstance(value, bool):
        raise PydanticCustomError("float_type", "a bool is not a number")
    try:
        nan = math.isnan(float(value))
    except (TypeError, ValueError, OverflowError):
        return value  # pydantic's own check names it
    if nan:
        raise PydanticCustomError("nan", "NaN is not a number")
    return value


def _none_word(value: Any) -> Any:
    return None if isinstance(value, str) and value.lower() in NONE_WORDS else value


def _lenient(annotation: Any) -> Any:
    """``annotation`` as a run config reads it (see above): its bounds kept, bools and NaN refused as numbers,
    the words for None accepted where None is."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        return Annotated[(_lenient(args[0]), *annotation.__metadata__)]
    if origin is typing.Union:
        union = typing.Union[tuple(_lenient(a) for a in args)]
        return Annotated[union, BeforeValidator(_none_word)] if type(None) in args else union
    if annotation is int:
        return Annotated[int, BeforeValidator(_no_bool("int_type"))]
    if annotation is float:
        return Annotated[float, BeforeValidator(_no_nan)]
    return annotation


def _bare(annotation: Any) -> Any:
    """``annotation`` without its bounds: what converts a value that broke a bound, for its message."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        return _bare(args[0])
    if origin is typing.Union:
        return typing.Union[tuple(_bare(a) for a in args)]
    return annotation


def _reasons(annotation: Any) -> Dict[str, str]:
    """The ``Why`` reasons anywhere in ``annotation`` (an ``Optional`` of an annotated type included)."""
    out: Dict[str, str] = {}
    if typing.get_origin(annotation) is Annotated:
        for meta in annotation.__metadata__:
            if isinstance(meta, Why):
                out.update(meta.reasons)
    for arg in typing.get_args(annotation):
        if typing.get_origin(arg) is Annotated or typing.get_origin(arg) is typing.Union:
            out.update(_reasons(arg))
    return out


def _literals(annotation: Any) -> Tuple[Any, ...]:
    if typing.get_origin(annotation) is typing.Literal:
        return typing.get_args(annotation)
    return tuple(v for a in typing.get_args(annotation) for v in _literals(a))


def _takes_bool(annotation: Any) -> bool:
    return annotation is bool or any(_takes_bool(a) for a in typing.get_args(annotation))


LAX = ConfigDict(coerce_numbers_to_str=True)  # a number given for a string field (a name such as 1) is a string


@dataclass(frozen=True)
class _Field:
    """One field's checks: its annotation, the pydantic adapter of it, and of its type without bounds."""

    annotation: Any
    adapter: TypeAdapter
    bare: TypeAdapter
    reasons: Mapping[str, str]

    def validate(self, key: str, value: Any, where: str) -> Any:
        try:
            return self.adapter.validate_python(value)
        except ValidationError as exc:
            raise ConfigError(self._message(exc.errors()[0], key, value, where)) from None

    def _message(self, err: Mapping[str, Any], key: str, value: Any, where: str) -> str:
        kind, ctx = err["type"], err.get("ctx") or {}
        at = f"{where}.{key}" if where else key
        prefix = f"{where}: " if where else ""
        why = self.reasons.get(REASON_OF.get(kind, ""))
        if kind in BOUNDS:
            bound = ctx[BOUNDS[kind][1]]
            bound = bound if isinstance(bound, int) else f"{bound:.4g}"
            got = self.bare.validate_python(value)
            return f"{prefix}`{key} {BOUNDS[kind][0]} {bound}` must hold, got {got}" + (f"; {why}" if why else "")
        if kind == "finite_number":
            return f"{prefix}`{key}` must be finite, got {err['input']}" + (f"; {why}" if why else "")
        if kind == "string_pattern_mismatch":
            return f"{prefix}`{key}` must be {why or 'of the form ' + ctx['pattern']}, got {value!r}"
        if kind == "nan":
            return f"{at} must be a number, got NaN"
        if kind in KINDS:
            return f"{at} must be {KINDS[kind]}, got {value!r}"
        if kind == "literal_error":
            choices = [repr(v) for v in _literals(self.annotation)] + (["true", "false"] if _takes_bool(self.annotation) else [])
            return f"{at} must be one of {', '.join(choices)}, got {value!r}"
        return f"{at}: {err['msg'].removeprefix('Value error, ')}, got {value!r}"


@functools.lru_cache(maxsize=None)
def _fields(cls: type) -> Dict[str, _Field]:
    """The checks of each field of ``cls`` a section sets (its parts' hidden config fields left out), once per
    class: resolving the annotations and building the adapters is most of the cost of building a config, and
    a study's expansion builds thousands. Read-only: callers do not mutate the dict."""
    hints = typing.get_type_hints(cls, include_extras=True)
    out = {}
    for key in own_keys(cls):
        annotation = hints[key]
        lenient = _lenient(annotation)
        config = LAX if _takes_config(lenient) else None
        out[key] = _Field(annotation, TypeAdapter(lenient, config=config),
                          TypeAdapter(_lenient(_bare(annotation)), config=config), _reasons(annotation))
    return out


def _takes_config(annotation: Any) -> bool:
    """Whether a pydantic adapter of ``annotation`` may be given a config (not for a model or a dataclass)."""
    return not (isinstance(annotation, type) and (dataclasses.is_dataclass(annotation)
                                                  or hasattr(annotation, "model_fields")))


def check(instance: Any) -> None:
    """Check every field of a config dataclass made directly (``TrainConfig(steps=0)``), as ``build`` checks
    the values it is given, and store each as its type (``"5"`` as 5): call it first in ``__post_init__``.
    A ``ConfigError`` names the first field that breaks its rule."""
    for key, field in _fields(type(instance)).items():
        object.__setattr__(instance, key, field.validate(key, getattr(instance, key), ""))


@dataclass(frozen=True)
class Part:
    """A smaller component a config is made of (see the module docstring): ``name_field`` names it in
    ``registry``; ``config_field`` (hidden from the flat keys) holds its built config, or None when the
    chosen component has no settings."""

    name_field: str
    registry: Any  # uwbench.registry.Registry
    config_field: str

    def chosen(self, cls: type, values: Mapping[str, Any]) -> str:
        """The part's name in ``values``, else the default of ``cls``'s name field."""
        if self.name_field in values:
            return str(values[self.name_field])
        return next(f.default for f in dataclasses.fields(cls) if f.name == self.name_field)

    def keys(self, name: str) -> List[str]:
        """The flat keys (settings) of the registered part ``name``."""
        cfg = self.registry.entry(name).config
        return [f.name for f in dataclasses.fields(cfg)] if cfg else []

    def owners(self, key: str) -> List[str]:
        """The registered parts that have the setting ``key``."""
        return [e.name for e in self.registry if e.config and key in {f.name for f in dataclasses.fields(e.config)}]


def parts_of(cls: type) -> Tuple[Part, ...]:
    return tuple(getattr(cls, "PARTS", ()))


def own_keys(cls: type) -> List[str]:
    """The fields of ``cls`` a section may set directly (the parts' hidden config fields left out)."""
    hidden = {p.config_field for p in parts_of(cls)}
    return [f.name for f in dataclasses.fields(cls) if f.name not in hidden]


def section_keys(cls: type, values: Optional[Mapping[str, Any]] = None) -> Set[str]:
    """The flat keys a section of ``cls`` accepts: its own fields plus the settings of the parts chosen
    in ``values``; with ``values`` None, the settings of every registered part (what some choice of
    parts accepts)."""
    keys = set(own_keys(cls))
    for part in parts_of(cls):
        if values is None:
            for entry in part.registry:
                keys.update(part.keys(entry.name))
        elif part.chosen(cls, values) in part.registry:
            keys.update(part.keys(part.chosen(cls, values)))
    return keys


def build(cls: type, values: Mapping[str, Any], where: str) -> Any:
    """Instantiate the config dataclass ``cls`` from ``values``, rejecting unknown keys.

    ``where`` names the section in error messages (e.g. ``"model (dnc)"``). The settings of ``cls``'s
    parts (see the module docstring) are built into the chosen part's config."""
    values = dict(values)
    kwargs: Dict[str, Any] = {}
    allowed = set(own_keys(cls))
    for part in parts_of(cls):
        name = part.chosen(cls, values)
        if name not in part.registry:
            raise ConfigError(f"{where}: {part.name_field}: {part.registry.unknown_message(name)}")
        keys = part.keys(name)
        clash = sorted(set(keys) & allowed)
        if clash:
            raise ConfigError(f"{part.registry.kind} {name!r} has settings named like {where}'s own "
                              f"({', '.join(clash)}); rename them in its config dataclass")
        part_cfg = part.registry.entry(name).config
        mine = {k: values.pop(k) for k in keys if k in values}
        kwargs[part.config_field] = build(part_cfg, mine, f"{where}, {part.registry.kind} {name}") if part_cfg else None
        allowed.update(keys)
    checks = _fields(cls)
    for key, value in values.items():
        if key not in allowed:
            raise ConfigError(_unknown_key(cls, key, where, allowed, values))
        kwargs[key] = checks[key].validate(key, value, where)
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _unknown_key(cls: type, key: str, where: str, allowed: Set[str], values: Mapping[str, Any]) -> str:
    """The message for a key ``cls`` does not take: the part that owns it, else a did-you-mean."""
    for part in parts_of(cls):
        owners = part.owners(key)
        if owners:
            kind = part.registry.kind
            chosen = part.chosen(cls, values)
            return (f"{where}: {key} is a setting of {kind} {' / '.join(map(repr, owners))}, not of {kind} "
                    f"{chosen!r} (the chosen {part.name_field}); choose {part.name_field} {owners[0]} or drop {key}")
    hint = suggest.hint(key, allowed, suggest.SENTENCE)
    return f"unknown key {key!r} in {where}.{hint} Allowed keys: {', '.join(sorted(allowed))}"


def as_dict(instance: Any) -> Dict[str, Any]:
    """A config dataclass as the flat dict of its section: its fields, with each part's settings in
    place of the part's hidden config field (``build`` reads this dict back to an equal config)."""
    out = dataclasses.asdict(instance)
    for part in parts_of(type(instance)):
        out.pop(part.config_field, None)
        part_cfg = getattr(instance, part.config_field)
        if part_cfg is not None:
            out.update(as_dict(part_cfg))
    return out


def flatten(nested: Mapping[str, Any], prefix: str = "") -> Dict[str, Any]:
    """``{"model": {"memory_size": 4}}`` -> ``{"model.memory_size": 4}``."""
    out: Dict[str, Any] = {}
    for key, value in nested.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def parse_assignments(items: Iterable[str]) -> Dict[str, Dict[str, Any]]:
    """Parse ``--set section.key=value`` items into ``{section: {key: value}}`` (values stay strings;
    ``build`` converts them to the field's type)."""
    out: Dict[str, Dict[str, Any]] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--set expects section.key=value, got {item!r}")
        key, value = item.split("=", 1)
        if "." not in key:
            raise ConfigError(
                f"--set key must be section.key with section one of {', '.join(SECTIONS)}, got {key!r}"
            )
        section, field = key.split(".", 1)
        if section not in SECTIONS:
            raise ConfigError(f"--set section must be one of {', '.join(SECTIONS)}, got {section!r}")
        out.setdefault(section, {})[field] = value
    return out


def merge(*layers: Optional[Mapping[str, Mapping[str, Any]]]) -> Dict[str, Dict[str, Any]]:
    """Merge nested run-config layers; later layers win key by key."""
    out: Dict[str, Dict[str, Any]] = {}
    for layer in layers:
        for section, values in (layer or {}).items():
            out.setdefault(section, {}).update(values or {})
    return out
