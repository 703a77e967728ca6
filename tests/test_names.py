"""Names in one place: every attribute, event and metric name the package writes is declared in
:mod:`copilot_otel.projections` (from the semconv package where it has them), and nowhere else.

Like the camelCase guard of tests/test_events.py: every string literal of every other module (docstrings aside)
is checked against the shapes our names have; a module that needs a name imports it from the projections.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import copilot_otel
from copilot_otel.projections import catalog

PACKAGE = Path(copilot_otel.__file__).parent

# The vocabularies we write: GenAI, the Copilot CLI's, Claude Code's and Codex CLI's (their event names; their
# unprefixed keys have no shape of their own), OpenInference (Phoenix), Langfuse, the few general OTel keys our
# records and our resource carry, and our own ``copilot_otel.*`` (told apart from a module's dotted name below).
NAME = re.compile(
    r"^(?:gen_ai\.|github\.copilot\.|claude_code\.|openinference\.|langfuse\.|llm\.|tool_call\."
    r"|tool\.(?:name|parameters)$"
    # Codex's event names (its framer's event labels are "codex.<record>" too: only the exporter's are names)
    r"|codex\.(?:conversation_starts|api_request|sse_event|user_prompt|tool_decision|tool_result)$"
    r"|agent\.name$|(?:input|output)\.(?:value|mime_type)$|session\.id$|error\.type$|exception\.(?:type|message)$"
    r"|event\.name$|process\.(?:pid|exit\.code)$|service\.(?:name|version|instance\.id)$|host\.name$|user\.name$"
    r"|copilot_otel\.[a-z_]+(?:\.[a-z_]+)*\.?$)"
)


def _docstrings(tree: ast.AST) -> set[int]:
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, kinds)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def names_in(path: Path, modules: set[str]) -> list[tuple[int, str]]:
    """The string literals of ``path`` (f-string parts included, docstrings not) shaped like a name we write."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = _docstrings(tree)
    return sorted(
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docs
        and NAME.match(node.value)
        and node.value not in modules
    )


def names_outside_projections(package: Path) -> list[str]:
    """``file:line: 'name'`` for every name literal of ``package`` outside its ``projections/``."""
    modules = {
        ".".join(("copilot_otel", *p.relative_to(package).with_suffix("").parts)).removesuffix(".__init__")
        for p in package.rglob("*.py")
    }
    return [
        f"{path.relative_to(package)}:{line}: {value!r}"
        for path in sorted(package.rglob("*.py"))
        if path.relative_to(package).parts[0] != "projections"
        for line, value in names_in(path, modules)
    ]


def test_no_attribute_or_metric_name_outside_the_projections() -> None:
    leaked = names_outside_projections(PACKAGE)
    assert not leaked, (
        "names written outside copilot_otel/projections/ (import them from there):\n" + "\n".join(leaked)
    )


def test_the_guard_sees_the_names_where_they_are_declared() -> None:
    """Not vacuous: the same check finds the names in the projections, of every vocabulary, and spares module
    paths and the CLI's own event types."""
    found = {
        value
        for path in (PACKAGE / "projections").glob("*.py")
        for _, value in names_in(path, {"copilot_otel.projections.catalog"})
    }
    for name in (
        "gen_ai.invoke_agent.duration",
        "github.copilot.turn_id",
        "openinference.span.kind",
        "input.value",
        "langfuse.observation.level",
        "copilot_otel.runaway.interrupt",
        "copilot_otel.errors",
        "copilot_otel.agent",
        "claude_code.user_prompt",
        "codex.user_prompt",
    ):
        assert name in found, name
    assert not NAME.match("tool.execution_start")  # a CLI event type (events.py), not one of our names
    assert not NAME.match("session.start")
    assert names_in(Path(catalog.__file__), {"copilot_otel.projections.catalog"})  # literals there, by design


def test_metric_names_come_from_the_semconv_package_where_it_has_them() -> None:
    from opentelemetry.semconv._incubating.metrics import gen_ai_metrics

    package_names = {
        value for key, value in vars(gen_ai_metrics).items() if key.isupper() and isinstance(value, str)
    }
    ours = {spec.name for spec in catalog.METRICS}
    assert {"gen_ai.client.operation.duration", "gen_ai.client.token.usage"} <= ours & package_names
    source = Path(catalog.__file__).read_text(encoding="utf-8")
    for name in ours & package_names:
        assert f'"{name}"' not in source, f"{name} is the package's: import it"
