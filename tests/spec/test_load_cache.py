"""``spec.load.read_yaml`` parses a text once per process: a file read again gives its own copy of the same
data, and a file rewritten (same size, same second) gives the new text's data."""
from __future__ import annotations


def test_a_study_file_is_parsed_once_and_each_reader_gets_its_own_copy(tmp_path, monkeypatch):
    import importlib

    load_mod = importlib.import_module("uwbench.spec.load")  # the module (the package exports a function of that name)

    path = tmp_path / "s.yaml"
    path.write_text("id: s\nseeds: [0, 1]\n")
    first = load_mod.read_yaml(str(path))
    first["seeds"].append(99)  # a caller changing what it got changes nothing for the next one
    parsed = []
    real = load_mod._parse_yaml
    monkeypatch.setattr(load_mod, "_parse_yaml", lambda raw, p: parsed.append(p) or real(raw, p))
    assert load_mod.read_yaml(str(path)) == {"id": "s", "seeds": [0, 1]}
    assert parsed == []  # not parsed again
    path.write_text("id: s\nseeds: [0, 2]\n")  # the same size, at once: the content decides
    assert load_mod.read_yaml(str(path)) == {"id": "s", "seeds": [0, 2]}
    assert parsed == [str(path)]
