"""Reading a study file: YAML (with numbers such as ``1e-4`` read as numbers) into a validated
``StudySpec``; the file must be named by its id."""
from __future__ import annotations

import os
import re
from typing import Any, Dict, Mapping

import yaml
from pydantic import ValidationError

from uwbench.spec.errors import SpecError, format_validation_error
from uwbench.spec.schema import StudySpec

# ---------------------------------------------------------------------------------------------
# YAML: PyYAML follows YAML 1.1, where ``1e-4`` (no dot) is a string; studies mean a number.
# ---------------------------------------------------------------------------------------------


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:\d[\d_]*(?:\.\d*)?|\.\d+)[eE][-+]?\d+$"),
    list("-+0123456789."),
)


MAX_DEPTH = 64  # mappings and lists within each other: a study file needs under ten levels


class _DuplicateKey(yaml.YAMLError):
    def __init__(self, key: Any, line: int, first: int):
        super().__init__(f"line {line}: key {key!r} appears twice in one mapping (first on line {first}); a "
                         "second value would silently replace the first: keep one")


def _construct_mapping(loader, node, deep=False):
    """PyYAML's mapping, refusing a key given twice (PyYAML keeps the last value without a word)."""
    seen = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            first = seen.get(key)
        except TypeError:  # an unhashable key: PyYAML's own error follows
            break
        if first is not None:
            raise _DuplicateKey(key, key_node.start_mark.line + 1, first)
        seen[key] = key_node.start_mark.line + 1
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                        lambda loader, node: _construct_mapping(loader, node))


def _check_depth(text: str, path: str) -> None:
    """Refuse nesting deeper than ``MAX_DEPTH`` before the file is built into objects (PyYAML builds them
    recursively: thousands of nested brackets would end in a RecursionError). The events are read flat."""
    depth = 0
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                raise SpecError(f"{path}: line {event.start_mark.line + 1}: `nesting depth <= {MAX_DEPTH}` must hold "
                                "(mappings and lists within each other), got deeper: a study file needs a few "
                                "levels; check the brackets")
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1


def read_yaml(path: str) -> Any:
    """The YAML of a study file; ``SpecError`` naming the file for text that is not UTF-8, nesting deeper than
    ``MAX_DEPTH``, a key given twice in one mapping, or YAML that does not parse. Text parsed before in this
    process is not parsed again (a report reads every study file several times: its plans, the index's
    budgets); each caller gets its own copy."""
    import copy
    import hashlib

    with open(path, "rb") as fh:
        raw = fh.read()
    key = (path, hashlib.blake2b(raw, digest_size=16).digest())
    if key not in _PARSED:
        if len(_PARSED) >= 256:
            _PARSED.clear()
        _PARSED[key] = _parse_yaml(raw, path)
    return copy.deepcopy(_PARSED[key])


_PARSED: Dict[Any, Any] = {}  # read_yaml's parsed texts, by file and content


def _parse_yaml(raw: bytes, path: str) -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise SpecError(f"{path}: line {line}: not UTF-8 text ({exc.reason} at byte {exc.start}); save the file as "
                        "UTF-8") from None
    try:
        _check_depth(text, path)
        return yaml.load(text, Loader=_Loader)
    except _DuplicateKey as exc:
        raise SpecError(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: not valid YAML: {exc}") from None
    except RecursionError:
        raise SpecError(f"{path}: nested too deeply to read (`nesting depth <= {MAX_DEPTH}` must hold); check the "
                        "brackets") from None


def scalar(text: str) -> Any:
    """A ``--set`` value read as a study file reads it (``8`` an int, ``1e-4`` a float, ``true`` a bool,
    anything else the string itself)."""
    try:
        value = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError:
        return text
    return value if value is None or isinstance(value, (bool, int, float, str)) else text


def parse(data: Any, path: str = "<study>") -> StudySpec:
    if not isinstance(data, Mapping):
        raise SpecError(f"{path}: a study file is a mapping of keys (id, title, ...), got {type(data).__name__}")
    try:
        return StudySpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc, path)) from None


def load(path: str) -> StudySpec:
    """Read and validate the structure of a study file (components are checked by ``expand``)."""
    data = read_yaml(path)
    try:
        spec = parse(data, path)
    except RecursionError:  # a deep value pydantic walks (read_yaml bounds the depth; this is the backstop)
        raise SpecError(f"{path}: nested too deeply to check (`nesting depth <= {MAX_DEPTH}` must hold)") from None
    stem = os.path.splitext(os.path.basename(path))[0]
    if stem != spec.id:
        raise SpecError(f"{path}: id: a study file is named by its id, so id must be {stem!r}, got {spec.id!r}")
    return spec
