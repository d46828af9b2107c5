"""Expanding a study into cells for one profile, and checking every setting against the registered
components.

Each group expands to the product of its grid (axes ordered as ``uwbench.axes.id_rank``); a cell's id is
the group name followed by one token per grid value (``uwbench.axes.id_token``). Settings apply with
this precedence: the values named in a cell's id > ``--set`` > the profile's ``cell_set`` (the settings
of the cells matching a pattern; ``--set`` may not name a key it sets) > the rest of the profile > the
group's ``set`` and linked axes > ``fixed``. ``fixed`` and profile settings apply where the component has
the key (an error when no cell has it); the group's settings and a ``cell_set``'s are strict.
Components not registered yet make the plan *wait*
(``Plan.waits_for``) instead of failing.
"""
from __future__ import annotations

import copy
import fnmatch
import itertools
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

from uwbench import axes, suggest
from uwbench.config import ConfigError
from uwbench.spec.errors import SpecError
from uwbench.spec.hash import plan_hash
from uwbench.spec.plan import Cell, Plan
from uwbench.spec.plugins import import_plugins
from uwbench.spec.schema import BASE_PROFILE, SECTIONS, ChoiceParam, Group, Profile, StudySpec

Fail = Callable[[str], SpecError]


def load_plan(path: str, profile: Optional[str] = None, overrides: Optional[Mapping[str, Mapping[str, Any]]] = None,
              cells: Optional[Sequence[str]] = None) -> Plan:
    from uwbench.spec.load import load

    return expand(load(path), profile, path, overrides=overrides, cells=cells)


def expand(spec: StudySpec, profile: Optional[str] = None, path: str = "<study>",
           overrides: Optional[Mapping[str, Mapping[str, Any]]] = None, cells: Optional[Sequence[str]] = None) -> Plan:
    """Resolve ``spec`` for ``profile`` (default: the study's default profile) and expand its cells.

    Checks every setting against the registered components: keys must exist and values must be
    accepted by the components' config dataclasses. ``overrides`` (``{section: {key: value}}``, from
    ``uwbench sweep --set``) apply to every cell like the profile's settings, after them; they are part
    of the spec hash. ``cells`` (fnmatch patterns over cell ids, from ``--cells``) keep a subset of the
    cells; the spec hash stays the whole study's, so a subset's runs are the study's runs
    (``Plan.skipped_cells`` names the others)."""
    import_plugins()
    profile = profile or spec.default_profile
    prof = _profile(spec, profile, path)
    overrides = {s: dict(v) for s, v in (overrides or {}).items() if v}

    def fail(msg: str) -> SpecError:
        return SpecError(f"{path}: {msg}")

    groups = _groups_with_profile_grid(spec, prof, f"{path}: profiles.{profile}")
    _check_overrides(overrides, groups, {**spec.search, **prof.search}, fail)
    _check_cell_set_overrides(prof, profile, overrides, {**spec.search, **prof.search}, fail)
    ctx = _Context(train_fields=_train_fields(), profile=profile, cell_set=dict(prof.cell_set))
    cells_: List[Cell] = []
    seen: Dict[str, str] = {}
    overlays = [("fixed", spec.fixed.task, spec.fixed.model, spec.fixed.train),
                (f"profiles.{profile}", prof.task, prof.model, prof.train),
                ("--set", overrides.get("task", {}), overrides.get("model", {}), overrides.get("train", {}))]
    for gi, group in enumerate(groups):
        for cell in _group_cells(spec, group, f"cells[{gi}]", overlays, ctx, fail):
            if cell.id in seen:
                raise fail(f"cells[{gi}]: cell id {cell.id!r} is produced twice (also by {seen[cell.id]}); give "
                           "the groups distinct `name`s")
            seen[cell.id] = f"cells[{gi}]"
            cells_.append(cell)

    _check_cells(cells_, fail)
    _check_lenient(ctx, cells_, fail)
    cells_ = _profile_cells(prof, cells_, f"{path}: profiles.{profile}")
    _check_patterns(f"profiles.{profile}.cell_set", prof.cell_set, cells_, fail)
    search = {**spec.search, **prof.search}
    _check_search(search, cells_, ctx.train_fields, fail)
    cells_ = _with_paper_values(spec, profile, cells_, set(seen), fail)
    plan = _plan(spec, profile, prof, path, cells_, search, ctx.waits, fail, overrides)
    return _subset(plan, cells) if cells else plan


def _check_overrides(overrides, groups: Sequence[Group], search, fail: Fail) -> None:
    """``--set`` may not name what tells cells apart (a grid axis), what the search varies, or what a
    study fixes by name: it would be overridden, and a user's setting is never dropped silently."""
    for section, values in overrides.items():
        for key in values:
            path = f"{section}.{key}"
            if key == "name":
                raise fail(f"--set {path}: the {section} is chosen by the study (`task.name`, the groups' `model`), "
                           "not by --set")
            if section == "train" and key == "seed":
                raise fail("--set train.seed: a study's seeds are its `seeds` and `final_seeds`; use a profile")
            if any(path in g.grid for g in groups):
                raise fail(f"--set {path}: {path} is a grid axis of this study (cells differ by it); pick cells "
                           "with --cells, or give a profile a `grid` with the values")
            if path in search:
                raise fail(f"--set {path}: {path} is searched by this study (each trial draws it); give a profile a "
                           "`search` entry to narrow it")


def _check_cell_set_overrides(prof: Profile, profile: str, overrides, search, fail: Fail) -> None:
    """``--set`` may not name a key that a ``cell_set`` sets, nor may the search draw one: one of the two
    would be dropped for some cells."""
    for pattern, sections in prof.cell_set.items():
        for section in SECTIONS:
            for key in getattr(sections, section):
                if f"{section}.{key}" in search:
                    raise fail(f"profiles.{profile}.cell_set.{pattern}.{section}.{key}: {section}.{key} is searched "
                               "by this study (each trial draws it); give the profile a `search` entry to narrow it")
                if key in overrides.get(section, {}):
                    raise fail(f"--set {section}.{key}: profiles.{profile}.cell_set.{pattern} sets {section}.{key} "
                               "for the cells it matches; edit the profile (or give a profile of your own) instead")


def _check_patterns(where: str, patterns: Iterable[str], cells: Sequence[Cell], fail: Fail) -> None:
    """A profile's per-cell pattern (``cell_set``, ``cell_seeds``) that matches none of its cells is a typo:
    the cells it meant would silently run without their settings or seeds."""
    for pattern in patterns:
        if not any(fnmatch.fnmatchcase(c.id, pattern) for c in cells):
            raise fail(f"{where}.{pattern}: matches no cell; cells: {', '.join(c.id for c in cells)}")


def _subset(plan: Plan, patterns: Sequence[str]) -> Plan:
    """Keep the cells matching any of ``patterns`` (each must match one); the spec hash is unchanged."""
    ids = [c.id for c in plan.cells]
    for pattern in patterns:
        if not any(fnmatch.fnmatchcase(cid, pattern) for cid in ids):
            raise SpecError(f"{plan.path}: --cells {pattern!r} matches no cell of profile {plan.profile}; cells: "
                            f"{', '.join(ids)}")
    keep = [c for c in plan.cells if any(fnmatch.fnmatchcase(c.id, p) for p in patterns)]
    plan.skipped_cells = [c.id for c in plan.cells if c not in keep]
    plan.cells = keep
    return plan


# --------------------------------------------------------------------------------------------------
# Steps of the expansion
# --------------------------------------------------------------------------------------------------


@dataclass
class _Context:
    train_fields: set
    profile: str = ""
    cell_set: Dict[str, Any] = field(default_factory=dict)  # the profile's ``cell_set``: pattern -> Sections
    waits: List[str] = field(default_factory=list)  # "task name" / "model name" not registered yet
    lenient_hits: Dict[Tuple[str, str, str], bool] = field(default_factory=dict)  # (origin, section, key) -> used


def _profile(spec: StudySpec, profile: str, path: str) -> Profile:
    known = sorted({BASE_PROFILE, *spec.profiles})
    if profile not in known:
        raise SpecError(f"{path}: profile {profile!r} is not defined; known profiles: {', '.join(known)}")
    return spec.profiles.get(profile, Profile())


def _groups_with_profile_grid(spec: StudySpec, prof: Profile, where: str) -> List[Group]:
    """The groups, with the profile's replacement values for grid axes."""
    groups = [g.model_copy(deep=True) for g in spec.cells]
    for axis, values in prof.grid.items():
        hit = False
        for g in groups:
            if axis in g.grid:
                g.grid[axis] = list(values)
                hit = True
        if not hit:
            raise SpecError(f"{where}.grid.{axis}: no group has this grid axis "
                            f"(axes: {', '.join(sorted({a for g in spec.cells for a in g.grid})) or 'none'})")
    return groups


def _combos(group: Group) -> Iterator[List[Tuple[str, Any]]]:
    """Every point of a group's grid: [(axis, value)] in cell-id order."""
    names = sorted(group.grid, key=axes.id_rank)
    for combo in itertools.product(*(group.grid[a] for a in names)) if names else [()]:
        yield list(zip(names, combo))


def _group_cells(spec: StudySpec, group: Group, where: str, overlays, ctx: _Context, fail: Fail) -> Iterator[Cell]:
    from uwbench.registry import MODELS, TASKS

    for point in _combos(group):
        cfg, cell_axes, tokens = _point_config(spec, group, point)
        task_name, model_name = cfg["task"]["name"], group.model
        fields = {"task": _fields_of(TASKS, task_name), "model": _fields_of(MODELS, model_name),
                  "train": ctx.train_fields}
        for kind, name in (("task", task_name), ("model", model_name)):
            if fields[kind] is None and f"{kind} {name}" not in ctx.waits:
                ctx.waits.append(f"{kind} {name}")
        id_paths = {a for a, _ in point if "." in a}  # scalar axes: their values name the cell
        base = {s: dict(cfg[s]) for s in SECTIONS}
        own = _cell_overlay("-".join(tokens), fields, id_paths, ctx, fail)
        _apply_overlays(cfg, overlays[:-1] + own + overlays[-1:], fields, id_paths, ctx)  # --set is last
        inert = _split_inert(cfg, base, overlays, fields["model"] and _fields_of(MODELS, model_name, cfg["model"]))
        label = _label(group, cfg, fields, where, fail)
        yield Cell(id="-".join(tokens), label=label, group=group.name or group.model, model=model_name,
                   task=task_name, axes=cell_axes, config=cfg, inert=inert)


def _point_config(spec: StudySpec, group: Group, point: List[Tuple[str, Any]]):
    """A grid point's config (the study's task, the group's model and settings, the grid values), its axes
    and its cell-id tokens."""
    cfg: Dict[str, Dict[str, Any]] = {"task": dict(spec.task), "model": {"name": group.model}, "train": {}}
    cell_axes: Dict[str, Any] = {}
    tokens = [group.name or group.model]
    for section in SECTIONS:
        cfg[section].update(getattr(group.set, section))
    for axis, value in point:
        if isinstance(value, dict):  # a linked axis: an id and several settings
            cell_axes[axis] = value["id"]
            tokens.append(re.sub(r"[^A-Za-z0-9_.]+", "", str(value["id"])))
            for key, v in value.items():
                if key != "id":
                    _set_path(cfg, key, v)
        else:
            cell_axes[axis] = value
            tokens.append(axes.id_token(axis, value))
            _set_path(cfg, axis, value)
    return cfg, cell_axes, tokens


def _cell_overlay(cid: str, fields, id_paths, ctx: _Context, fail: Fail) -> list:
    """The overlay of the first ``cell_set`` pattern the cell ``cid`` matches (empty when none), its keys
    checked strictly: a key the cell's component lacks, or one the cell's id names, is an error."""
    for pattern, sections in ctx.cell_set.items():
        if not fnmatch.fnmatchcase(cid, pattern):
            continue
        where = f"profiles.{ctx.profile}.cell_set.{pattern}"
        for section in SECTIONS:
            for key in getattr(sections, section):
                known = fields[section]
                if known is not None and key not in known:
                    hint = suggest.hint(key, sorted(known))
                    raise fail(f"{where}.{section}.{key}: the cell {cid}'s {section} has no key {key!r}{hint}; "
                               f"allowed: {', '.join(sorted(known))}")
                if f"{section}.{key}" in id_paths:
                    raise fail(f"{where}.{section}.{key}: {section}.{key} is a grid axis (it names the cell "
                               f"{cid}); give the profile a `grid` with the values instead")
        return [(where, sections.task, sections.model, sections.train)]
    return []


def _apply_overlays(cfg, overlays, fields, id_paths, ctx: _Context) -> None:
    """``fixed`` and profile settings, where the component has the key (precedence: see the module)."""
    base = {s: dict(cfg[s]) for s in SECTIONS}
    for origin, t, m, tr in overlays:
        for section, values in (("task", t), ("model", m), ("train", tr)):
            for key, value in values.items():
                marker = (origin, section, key)
                ctx.lenient_hits.setdefault(marker, False)
                if fields[section] is not None and key not in fields[section]:
                    continue
                ctx.lenient_hits[marker] = True
                if f"{section}.{key}" in id_paths:
                    continue
                if origin == "fixed" and key in base[section]:
                    continue
                cfg[section][key] = value


def _label(group: Group, cfg, fields, where: str, fail: Fail) -> str:
    """The cell's display name: the group's ``label`` with ``{section.key}`` placeholders filled from the
    cell's config (defaults included where the components are registered)."""
    template = group.label or group.name or group.model
    values = _resolved_or_raw(cfg)
    ns = {s: _Section(s, values.get(s, {}), fields[s]) for s in SECTIONS}
    try:
        return template.format_map(ns)
    except _UnknownPlaceholder as exc:
        raise fail(f"{where}.label: {exc}; in {template!r}") from None
    except KeyError as exc:
        raise fail(f"{where}.label: placeholder {{{exc.args[0]}...}} in {template!r}: a placeholder is "
                   f"{{section.key}} with section one of {', '.join(SECTIONS)}") from None
    except (ValueError, IndexError, AttributeError) as exc:
        raise fail(f"{where}.label: cannot fill {template!r}: {exc}") from None


def _resolved_or_raw(cfg) -> Dict[str, Dict[str, Any]]:
    """The config with the components' defaults filled in; the config as written when a component is not
    registered or a value is rejected (reported with the cell by ``_check_cells``)."""
    from uwbench.registry import MODELS, TASKS
    from uwbench.training.config import resolve_run

    if cfg["task"].get("name") in TASKS and cfg["model"].get("name") in MODELS:
        try:
            return resolve_run(cfg).as_dict()
        except (ConfigError, TypeError, ValueError):
            pass
    return cfg


class _UnknownPlaceholder(Exception):
    pass


class _Section:
    """``{model.writer}`` in label templates: a component's settings; an unknown key is an error naming
    the valid ones (when the component is registered; otherwise it renders empty)."""

    def __init__(self, section: str, values: Mapping[str, Any], fields: Optional[set]):
        self.__dict__.update(values)
        self.__dict__["_uw_section"] = section
        self.__dict__["_uw_fields"] = fields

    def __getattr__(self, name):
        fields = self.__dict__["_uw_fields"]
        if fields is None:
            return ""  # a component not registered yet: its keys are not known
        section = self.__dict__["_uw_section"]
        if name in fields:  # a setting of the component with other parts (another writer's), not of this cell's
            have = sorted(k for k in self.__dict__ if not k.startswith("_uw_"))
            raise _UnknownPlaceholder(
                f"placeholder {{{section}.{name}}} names a setting this group's cells do not have ({section}.{name} "
                f"belongs to other choices of its parts, e.g. another writer); use it in the group whose cells set "
                f"it, or one of: " + ", ".join(f"{section}.{k}" for k in have))
        valid = sorted(fields | ({"name"} if section != "train" else set()))
        hint = suggest.hint(name, valid, f" (did you mean {{{{{section}.{{}}}}}}?)")
        raise _UnknownPlaceholder(f"placeholder {{{section}.{name}}} is not a {section} setting{hint}; valid: "
                                  + ", ".join(f"{section}.{k}" for k in valid))


def _set_path(config: Dict[str, Dict[str, Any]], path: str, value: Any) -> None:
    section, key = path.split(".", 1)
    config.setdefault(section, {})[key] = value


def _fields_of(registry, name: str, values: Optional[Mapping[str, Any]] = None) -> Optional[set]:
    """The config keys of a registered component (None if it is not registered yet): with ``values``,
    those of the parts they choose (a model's writer); without, those of any choice."""
    from uwbench.config import section_keys

    if name not in registry:
        return None
    cfg = registry.entry(name).config
    return section_keys(cfg, values) if cfg else set()


def _split_inert(cfg: Dict[str, Dict[str, Any]], base, overlays, model_keys) -> Dict[str, Dict[str, Any]]:
    """Move the shared (fixed, profile) model settings that the cell's model has for some writer but not
    for its own (``model_keys``) out of ``cfg``; the group's own settings (``base``) stay, so a wrong one
    is an error."""
    if not model_keys:
        return {}
    shared = {key for _, _, m, _ in overlays for key in m if key not in base["model"]}
    moved = {key: cfg["model"].pop(key) for key in sorted(shared) if key in cfg["model"] and key not in model_keys}
    return {"model": moved} if moved else {}


def _train_fields() -> set:
    import dataclasses

    from uwbench.training.config import TrainConfig

    return {f.name for f in dataclasses.fields(TrainConfig)}


def _check_cells(cells: Sequence[Cell], fail: Fail) -> None:
    """Strict keys and values: every cell whose components are registered must resolve."""
    from uwbench.registry import MODELS, TASKS
    from uwbench.training.config import resolve_run

    for cell in cells:
        _check_names(cell.config, f"cell {cell.id}", fail)
        if cell.task in TASKS and cell.model in MODELS:
            try:
                resolve_run(cell.config)
            except ConfigError as exc:
                raise fail(f"cell {cell.id}: {exc}") from None


def _check_lenient(ctx: _Context, cells: Sequence[Cell], fail: Fail) -> None:
    """A ``fixed`` or profile setting that no cell's component has is a typo."""
    from uwbench.registry import MODELS, TASKS

    for (origin, section, key), hit in ctx.lenient_hits.items():
        if hit:
            continue
        if section == "train":
            known = sorted(ctx.train_fields)
        else:
            registry = TASKS if section == "task" else MODELS
            known = sorted({f for c in cells for f in (_fields_of(registry, getattr(c, section)) or ())})
        hint = suggest.hint(key, known)
        where = f"--set {section}.{key}" if origin == "--set" else f"{origin}.{section}.{key}"
        raise fail(f"{where}: no cell's {section} has the key {key!r}{hint}; allowed: {', '.join(known)}")


def _profile_cells(prof: Profile, cells: List[Cell], where: str) -> List[Cell]:
    """The cells a profile keeps (``cells``: fnmatch patterns, each must match)."""
    if prof.cells is None:
        return cells
    for pattern in prof.cells:
        if not any(fnmatch.fnmatchcase(c.id, pattern) for c in cells):
            raise SpecError(f"{where}.cells: pattern {pattern!r} matches no cell; cells: "
                            f"{', '.join(c.id for c in cells)}")
    return [c for c in cells if any(fnmatch.fnmatchcase(c.id, p) for p in prof.cells)]


def _with_paper_values(spec: StudySpec, profile: str, cells: List[Cell], all_ids: set, fail: Fail) -> List[Cell]:
    paper_values = spec.paper.values if spec.paper else {}
    for cid in paper_values if profile == BASE_PROFILE else ():  # profiles may rename cells (smaller grids)
        if cid not in all_ids:
            hint = suggest.hint(cid, all_ids)
            raise fail(f"paper.values.{cid}: no such cell{hint}; cells: {', '.join(sorted(all_ids))}")
    stands_for = _paper_cells(spec, profile, cells, all_ids, fail)
    return [Cell(**{**c.__dict__, "paper": paper_values.get(stands_for.get(c.id, c.id)),
                    "paper_cell": stands_for.get(c.id)}) for c in cells]


def _paper_cells(spec: StudySpec, profile: str, cells: List[Cell], all_ids: set, fail: Fail) -> Dict[str, str]:
    """The profile's ``paper_cells``, checked: every key a cell id of the profile's grid (before its
    ``cells`` filter), every value a cell with a paper value."""
    mapping = spec.profiles[profile].paper_cells if profile in spec.profiles else {}
    paper_values = spec.paper.values if spec.paper else {}
    where = f"profiles.{profile}.paper_cells"
    for ours, theirs in mapping.items():
        if ours not in all_ids:
            raise fail(f"{where}.{ours}: no such cell in this profile; cells: {', '.join(sorted(all_ids))}")
        if theirs not in paper_values:
            known = ", ".join(sorted(paper_values)) or "none"
            raise fail(f"{where}.{ours}: {theirs!r} has no value in paper.values; known: {known}")
    return dict(mapping)


def _cell_seeds(prof: Profile, profile: str, cells: List[Cell], fail: Fail) -> Dict[str, List[int]]:
    """The profile's ``cell_seeds`` resolved to cell ids (a cell takes the first pattern it matches); a pattern
    that matches no cell is an error, as a misspelt one would silently run the study's seeds."""
    _check_patterns(f"profiles.{profile}.cell_seeds", prof.cell_seeds, cells, fail)
    out: Dict[str, List[int]] = {}
    for pattern, seeds in prof.cell_seeds.items():
        for cid in (c.id for c in cells if fnmatch.fnmatchcase(c.id, pattern)):
            out.setdefault(cid, list(seeds))
    return out


def _plan(spec: StudySpec, profile: str, prof: Profile, path: str, cells, search, waits, fail: Fail,
          overrides=None) -> Plan:
    seeds = list(prof.seeds if prof.seeds is not None else spec.seeds)
    final_seeds = list(prof.final_seeds if prof.final_seeds is not None else spec.final_seeds)
    if spec.mode == "tuned" and set(seeds) & set(final_seeds):
        raise fail(f"final_seeds {final_seeds} must be fresh: they overlap the search seeds {seeds}")
    plan = Plan(spec=spec, profile=profile, path=path, cells=cells, mode=spec.mode, seeds=seeds,
                final_seeds=final_seeds, search=search, objective=spec.objectives[0], budget=prof.budget or spec.budget,
                pruning=prof.pruning or spec.pruning, spec_hash="", waits_for=waits, objectives=spec.objectives,
                overrides=overrides or {}, cell_seeds=_cell_seeds(prof, profile, cells, fail),
                population=prof.population if prof.population is not None else spec.population)
    plan.spec_hash = plan_hash(plan)
    return plan


# --------------------------------------------------------------------------------------------------
# Component names and the search space
# --------------------------------------------------------------------------------------------------


def _named_registries():
    """Model settings whose values name registered components (checked with a did-you-mean)."""
    from uwbench.registry import CONTROLLERS, WRITERS

    return {"writer": WRITERS, "controller": CONTROLLERS}


def _check_names(config, where: str, fail: Fail) -> None:
    for key, registry in _named_registries().items():
        value = config.get("model", {}).get(key)
        if isinstance(value, str) and value not in registry:
            raise fail(f"{where}: model.{key}: {registry.unknown_message(value)}")


def _check_search(search, cells, train_fields, fail: Fail) -> None:
    """Each searched key must exist for every cell, and its bounds must be accepted by the config."""
    from uwbench.registry import MODELS, TASKS
    from uwbench.training.config import resolve_run

    for key, param in search.items():
        section, name = key.split(".", 1)
        for cell in cells:
            registry = {"task": TASKS, "model": MODELS}.get(section)
            comp = cell.task if section == "task" else cell.model
            fields = train_fields if section == "train" else _fields_of(registry, comp, cell.config[section])
            if fields is None:
                continue
            if name not in fields:
                hint = suggest.hint(name, fields, f" (did you mean {section}.{{}}?)")
                raise fail(f"search.{key}: {section} {comp!r} of cell {cell.id} has no key {name!r}{hint}; "
                           f"allowed: {', '.join(sorted(fields))}")
            if cell.task in TASKS and cell.model in MODELS:
                probes = param.values if isinstance(param, ChoiceParam) else [param.low, param.high]
                for value in probes:
                    cfg = copy.deepcopy(cell.config)
                    cfg[section][name] = value
                    _check_names(cfg, f"search.{key}: value {value!r} for cell {cell.id}", fail)
                    try:
                        resolve_run(cfg)
                    except ConfigError as exc:
                        raise fail(f"search.{key}: value {value!r} is not accepted for cell {cell.id}: {exc}") from None
