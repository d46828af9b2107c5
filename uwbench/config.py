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
"""
from __future__ import annotations

import dataclasses
import functools
import math
import re
import typing
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from uwbench import suggest
from uwbench.errors import UserError

SECTIONS = ("task", "model", "train")  # the sections of a run config: the one list every module asks
KEY_PATTERN = re.compile(rf"^({'|'.join(SECTIONS)})\.[a-z_][a-z0-9_]*$")  # a config path: section.key


class ConfigError(UserError):
    """A configuration value or key that is not allowed; the message names the key and the fix."""


def _coerce(value: Any, annotation: Any, where: str) -> Any:
    """Convert ``value`` (possibly a string from the CLI) to the field type ``annotation``."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Union:  # Optional[X] and unions: None, then the first type that accepts it
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
            if type(None) in args:
                return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, where)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0] if errors else f"{where}: cannot use {value!r}")
    if origin is typing.Literal:
        for allowed in args:
            if value == allowed or (isinstance(value, str) and str(allowed) == value):
                return allowed
        raise ConfigError(f"{where} must be one of {', '.join(map(repr, args))}, got {value!r}")
    if annotation is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "1", "yes", "on"):
            return True
        if isinstance(value, str) and value.lower() in ("false", "0", "no", "off"):
            return False
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise ConfigError(f"{where} must be true or false, got {value!r}")
    if annotation is int:
        if isinstance(value, bool):
            raise ConfigError(f"{where} must be an integer, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
        raise ConfigError(f"{where} must be an integer, got {value!r}")
    if annotation is float:
        if isinstance(value, bool):
            raise ConfigError(f"{where} must be a number, got {value!r}")
        try:
            out = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{where} must be a number, got {value!r}") from None
        if math.isnan(out):
            raise ConfigError(f"{where} must be a number, got NaN")
        return out
    if annotation is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        raise ConfigError(f"{where} must be a string, got {value!r}")
    return value


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
    hints = _type_hints(cls)
    for key, value in values.items():
        if key not in allowed:
            raise ConfigError(_unknown_key(cls, key, where, allowed, values))
        kwargs[key] = _coerce(value, hints[key], f"{where}.{key}")
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from None


@functools.lru_cache(maxsize=None)
def _type_hints(cls: type) -> Dict[str, Any]:
    """``typing.get_type_hints`` of a config class, once per class: resolving the string annotations
    (``from __future__ import annotations``) is most of the cost of building a config, and a study's
    expansion builds thousands. Read-only: callers do not mutate the dict."""
    return typing.get_type_hints(cls)


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
