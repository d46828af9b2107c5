"""Run configuration: component config dataclasses, overrides and flattening.

A run is fully described by a nested dict ``{"task": {...}, "model": {...}, "train": {...}}``. Each
section names its component (``name``) and carries the fields of that component's config dataclass
(the one home of its defaults; YAML and the CLI only say what differs). ``resolve`` fills in every
default, so what MLflow records is the complete configuration.
"""
from __future__ import annotations

import dataclasses
import difflib
import math
import typing
from typing import Any, Dict, Iterable, Mapping, Optional

SECTIONS = ("task", "model", "train")


class ConfigError(ValueError):
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


def build(cls: type, values: Mapping[str, Any], where: str) -> Any:
    """Instantiate the config dataclass ``cls`` from ``values``, rejecting unknown keys.

    ``where`` names the section in error messages (e.g. ``"model (dnc)"``).
    """
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for key, value in values.items():
        if key not in fields:
            close = difflib.get_close_matches(key, list(fields), n=1, cutoff=0.5)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ConfigError(
                f"unknown key {key!r} in {where}.{hint} Allowed keys: {', '.join(sorted(fields))}"
            )
        kwargs[key] = _coerce(value, hints[key], f"{where}.{key}")
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from None


def as_dict(instance: Any) -> Dict[str, Any]:
    return dataclasses.asdict(instance)


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
