"""The import contracts of ``pyproject.toml`` cover the whole package, and none of them ignores an import.

``lint-imports`` checks that every contract is kept, but a module named in no contract is checked by none (only
by the acyclic one, which says nothing of direction): a new module or package outside the layers would go
unseen. So every module of ``copilot_otel`` must be named in a contract of layers (its container's layer, a
``layers`` entry) or of modules (``modules``, ``source_modules``, ``forbidden_modules``), itself or a package
above it; a container counts for its own module only (naming ``copilot_otel`` as a container says nothing of
where its packages sit). And an ``ignore_imports`` would be a hole in a kept contract: there are none. No class
is over 400 lines either: past that a class holds more than one concern.
"""

from __future__ import annotations

import ast
import pkgutil
import re
from pathlib import Path
from typing import Any

import tomllib

import copilot_otel

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = Path(copilot_otel.__file__).resolve().parent
_MODULE_KEYS = ("modules", "source_modules", "forbidden_modules")


def _contracts() -> list[dict[str, Any]]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        config = tomllib.load(file)
    contracts: list[dict[str, Any]] = config["tool"]["importlinter"]["contracts"]
    return contracts


def _named(contracts: list[dict[str, Any]]) -> tuple[set[str], set[str]]:
    """The modules a contract names with what is below them, and the containers (their own module only)."""
    below: set[str] = set()
    containers: set[str] = set()
    for contract in contracts:
        for container in contract.get("containers", ()):
            containers.add(container)
            for layer in contract.get("layers", ()):
                # A layer is one module, or several, independent ("a | b") or not ("a : b").
                for name in re.split(r"[|:]", layer):
                    below.add(f"{container}.{name.strip()}")
        for key in _MODULE_KEYS:
            below.update(contract.get(key, ()))
    return below, containers


def _every_module() -> list[str]:
    package = copilot_otel.__name__
    found = [package]
    for info in pkgutil.walk_packages(copilot_otel.__path__, prefix=f"{package}."):
        found.append(info.name)
    return sorted(found)


def uncovered(contracts: list[dict[str, Any]], modules: list[str]) -> list[str]:
    """The modules no contract names, neither themselves nor a package above them."""
    below, containers = _named(contracts)

    def covered(module: str) -> bool:
        if module in containers:
            return True
        parts = module.split(".")
        return any(".".join(parts[:n]) in below for n in range(1, len(parts) + 1))

    return [module for module in modules if not covered(module)]


def test_every_module_of_the_package_is_in_a_contract() -> None:
    modules = _every_module()
    assert "copilot_otel.sources.copilot.events" in modules  # the walk reaches the packages' modules
    assert uncovered(_contracts(), modules) == []


def test_a_module_outside_the_layers_is_found() -> None:
    """The check itself: a package the layers do not name, and one whose parent only is a container, are found."""
    contracts = [{"type": "layers", "containers": ["pkg"], "layers": ["a | b", "c : d"]}]
    modules = ["pkg", "pkg.a", "pkg.b.x", "pkg.d", "pkg.e", "pkg.e.y"]
    assert uncovered(contracts, modules) == ["pkg.e", "pkg.e.y"]
    forbidden = [{"type": "forbidden", "source_modules": ["pkg.e"], "forbidden_modules": ["pkg.a"]}]
    assert uncovered(contracts + forbidden, modules) == []


def test_no_contract_ignores_an_import() -> None:
    ignoring = [contract["name"] for contract in _contracts() if contract.get("ignore_imports")]
    assert ignoring == []


# A class longer than this is more than one idea: split it by concern (issue 33).
MAX_CLASS_LINES = 400


def _long_classes(package: Path) -> list[str]:
    """Every class of the package longer than :data:`MAX_CLASS_LINES`, from ``class`` to its last line."""
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_CLASS_LINES:
                    found.append(f"{path.relative_to(package.parent)}: {node.name} ({lines} lines)")
    return found


def test_no_class_is_over_400_lines() -> None:
    assert _long_classes(PACKAGE) == []


def test_a_long_class_is_found(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_CLASS_LINES))
    (package / "long.py").write_text(f"class Long:\n{body}\n\n\nclass Short:\n    y = 1\n")
    assert _long_classes(package) == [f"pkg/long.py: Long ({MAX_CLASS_LINES + 1} lines)"]
