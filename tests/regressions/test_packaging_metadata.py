"""The README's Install section matches the package metadata."""

from __future__ import annotations

import re
import tomllib

from .cli_helpers import ROOT


def test_readme_install_lists_every_core_dependency() -> None:
    """README "Install" names every core dependency of pyproject.toml (docstring_parser included)."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = [re.split(r"[<>=\[ ;]", d, maxsplit=1)[0] for d in deps]
    install = (ROOT / "README.md").read_text().split("## Install", 1)[1].split("\n## ", 1)[0]
    norm = install.lower().replace("_", "-")
    missing = [n for n in names if n.lower().replace("_", "-") not in norm]
    assert not missing, missing
