"""Helpers the tests share, imported by their package path from any test module or conftest
(``from tests.helpers import ROOT``; ``from tests.helpers.processes import free_port``): tests/ is a package,
and pytest puts the repository root on ``sys.path``. Fixtures stay in the conftest.py files."""
from __future__ import annotations

import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository
FIXTURES = os.path.join(ROOT, "tests", "fixtures")  # committed fixture files (a report snapshot, golden tables)
