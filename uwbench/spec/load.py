"""Reading a study file: YAML (with numbers such as ``1e-4`` read as numbers) into a validated
``StudySpec``; the file must be named by its id."""
from __future__ import annotations

import os
import re
from typing import Any, Mapping

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


def read_yaml(path: str) -> Any:
    with open(path, encoding="utf-8") as fh:
        return yaml.load(fh, Loader=_Loader)


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
    try:
        data = read_yaml(path)
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: not valid YAML: {exc}") from None
    spec = parse(data, path)
    stem = os.path.splitext(os.path.basename(path))[0]
    if stem != spec.id:
        raise SpecError(f"{path}: id: a study file is named by its id, so id must be {stem!r}, got {spec.id!r}")
    return spec
