"""The architecture's rules, checked: small functions, imports at the top, the import layers
(the import-linter contracts in pyproject.toml), a warning that names a module past ~500
lines (cohesion decides a module's size, not a number), and tests that share helpers
through tests/support only.

No database and no imports of the project: the sources are parsed, not run.
"""

import ast
import os
import shutil
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

from tests.support.project import APP_PACKAGES, ROOT

# Cohesion decides a module's size: past this the suite names it in a warning, to weigh a
# split by subject, and does not fail.
MODULE_WARNING_LINES = 500
MAX_FUNCTION_LINES = 60

# The only imports allowed inside a function: (path, function, import) -> why it must be
# there. Everything else is imported at the top of its module, where a reader (and an
# import cycle) sees it at once.
READY = "Django's idiom: apps.py is imported while the app registry is being populated, before models may be imported; ready() runs once they are."
LOCAL_IMPORTS_ALLOWED = {
    (
        "accounts/apps.py",
        "AccountsConfig.ready",
        "from accounts.people import role_groups_sync",
    ): "signal registration (accounts.people imports auth's models); " + READY,
    (
        "breakpoints/apps.py",
        "BreakpointsConfig.ready",
        "from breakpoints.selectors import consecutive_approvals",
    ): "registers the decision history policies.autoapproval reads (policies may not import breakpoints); "
    + READY,
    (
        "breakpoints/apps.py",
        "BreakpointsConfig.ready",
        "from audit.services import rule_event_record",
    ): "registers the audit of rule promotions policies.shadow writes (policies may not import its sibling audit); "
    + READY,
    (
        "breakpoints/apps.py",
        "BreakpointsConfig.ready",
        "from breakpoints.rule_replay import rule_replay",
    ): "registers the replay of a rule over the history that policies.replay asks for (policies may not import breakpoints); "
    + READY,
    (
        "breakpoints/apps.py",
        "BreakpointsConfig.ready",
        "from policies.ruleaudit import rule_audit_register",
    ): "registers the audit of rule promotions (see above); " + READY,
    (
        "breakpoints/apps.py",
        "BreakpointsConfig.ready",
        "from policies.replay import replay_register",
    ): "registers the replay (see above); " + READY,
    (
        "breakpoints/apps.py",
        "BreakpointsConfig.ready",
        "from web.api import schema",
    ): "registers the OpenAPI auth extension once the models are loaded; " + READY,
    (
        "breakpoints/apps.py",
        "BreakpointsConfig.ready",
        "from policies.autoapproval import decision_history_register",
    ): "registers the decision history (see above); " + READY,
}


def app_modules() -> list[Path]:
    return sorted(
        path
        for package in APP_PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.relative_to(ROOT).parts
    )


def name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


class _Functions(ast.NodeVisitor):
    """Every function of a module with its qualified name, and the imports each holds."""

    def __init__(self) -> None:
        self.scope: list[str] = []
        self.functions: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
        self.local_imports: list[tuple[str, ast.Import | ast.ImportFrom]] = []
        self.in_function = 0

    def _nest(self, node: ast.AST, qualname: str, is_function: bool) -> None:
        self.scope.append(qualname)
        self.in_function += is_function
        self.generic_visit(node)
        self.in_function -= is_function
        self.scope.pop()

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._nest(node, node.name, is_function=False)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.functions.append((".".join([*self.scope, node.name]), node))
        self._nest(node, node.name, is_function=True)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        if self.in_function:
            self.local_imports.append((".".join(self.scope), node))

    visit_ImportFrom = visit_Import


def parsed(path: Path) -> _Functions:
    visitor = _Functions()
    visitor.visit(ast.parse(path.read_text(), filename=str(path)))
    return visitor


def test_modules_past_the_size_warning_are_named_in_a_warning():
    too_long = [
        f"{name(path)}:1: {lines} lines"
        for path in app_modules()
        if (lines := len(path.read_text().splitlines())) > MODULE_WARNING_LINES
    ]
    if too_long:
        warnings.warn(
            f"{len(too_long)} module(s) over {MODULE_WARNING_LINES} lines; does each hold one "
            "subject? (a warning, not a failure):\n" + "\n".join(too_long),
            stacklevel=1,
        )


def test_no_function_is_over_the_line_limit():
    too_long = [
        f"{name(path)}:{node.lineno}: {qualname} is {size} lines"
        for path in app_modules()
        for qualname, node in parsed(path).functions
        if (size := (node.end_lineno or node.lineno) - node.lineno + 1) > MAX_FUNCTION_LINES
    ]
    assert not too_long, (
        f"{len(too_long)} function(s) over {MAX_FUNCTION_LINES} lines (def to last line); "
        "extract steps with names:\n" + "\n".join(too_long)
    )


def test_imports_are_at_module_level():
    found = {
        (name(path), function, ast.unparse(node)): node.lineno
        for path in app_modules()
        for function, node in parsed(path).local_imports
    }
    offenders = [
        f"{path}:{line}: {function}: {statement}"
        for (path, function, statement), line in sorted(found.items())
        if (path, function, statement) not in LOCAL_IMPORTS_ALLOWED
    ]
    stale = "\n".join(" / ".join(key) for key in LOCAL_IMPORTS_ALLOWED if key not in found)
    assert not offenders, (
        f"{len(offenders)} import(s) inside a function; move them to the top of the module "
        "(or, when they truly must wait, add them to LOCAL_IMPORTS_ALLOWED with the reason):\n"
        + "\n".join(offenders)
    )
    assert not stale, f"LOCAL_IMPORTS_ALLOWED entries that match nothing now:\n{stale}"


def _contracts() -> list[dict]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return config["tool"]["importlinter"]["contracts"]


def lint_imports(cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`lint-imports` (the contracts in cwd's pyproject.toml), with this interpreter."""
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from importlinter.cli import lint_imports_command; "
            "sys.exit(lint_imports_command())",
            "--no-cache",
            "--no-logo",
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_import_layers_hold():
    """The import-linter contracts (`lint-imports` in `make lint`), in `make test` too."""
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def lint_imports_with_planted(
    tmp_path: Path, planted: dict[str, str]
) -> subprocess.CompletedProcess:
    """`lint-imports` on a copy of the packages with `planted` ({path: source}) added."""
    for package in APP_PACKAGES:
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copytree(
        ROOT / "clients",
        tmp_path / "clients",
        ignore=shutil.ignore_patterns("node_modules", "__pycache__", ".venv"),
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for path, source in planted.items():
        (tmp_path / path).write_text(source)
    return lint_imports(
        tmp_path,
        env={
            **os.environ,
            "PYTHONPATH": f"{tmp_path}{os.pathsep}{tmp_path / 'clients/python/src'}",
        },
    )


def test_a_planted_cycle_between_apps_breaks_the_layers(tmp_path):
    """The layers contract sees app boundaries: a copy of the apps with one import from the
    ground (core) up to breakpoints fails `lint-imports`, naming that import."""
    result = lint_imports_with_planted(
        tmp_path, {"core/planted.py": "from breakpoints import selectors  # noqa\n"}
    )
    assert result.returncode != 0
    assert "core is not allowed to import breakpoints" in result.stdout
    assert "core.planted -> breakpoints.selectors" in result.stdout


def test_a_new_domain_module_may_not_import_presentation(tmp_path):
    """The domain-not-presentation contract names the presentation, not the domain: a module
    no contract names (new, in an app) is domain at once, and importing DRF, the web plumbing
    or an api/ fails `lint-imports`."""
    result = lint_imports_with_planted(
        tmp_path,
        {
            "accounts/planted.py": "from rest_framework import serializers  # noqa\n",
            "triggers/planted.py": "from web.rendering import markup  # noqa\n",
            "breakpoints/planted.py": "from breakpoints.api import views  # noqa\n",
        },
    )
    assert result.returncode != 0
    for line in (
        "accounts.planted -> rest_framework",
        "triggers.planted -> web.rendering.markup",
        "breakpoints.planted -> breakpoints.api.views",
    ):
        assert line in result.stdout


def test_what_may_import_presentation_is_presentation():
    """Each module allowed to import presentation is protected itself (config excepted:
    nothing imports the wiring), so the domain cannot reach DRF or the web plumbing through
    one of them: the protected contract checks direct imports, this makes that enough."""
    contract = next(c for c in _contracts() if c["id"] == "domain-not-presentation")
    unprotected = set(contract["allowed_importers"]) - set(contract["protected_modules"])
    assert unprotected == {"config"}


def test_a_database_driver_in_the_kernel_breaks_its_contract(tmp_path):
    """The core-no-database-driver contract: a copy of the packages with core importing
    psycopg fails `lint-imports`, naming that import."""
    result = lint_imports_with_planted(tmp_path, {"core/planted.py": "import psycopg  # noqa\n"})
    assert result.returncode != 0
    assert "core is not allowed to import psycopg" in result.stdout
    assert "core.planted -> psycopg" in result.stdout


# What the kernel may take from django.db: the ORM's choices (core.choices' TextChoices).
KERNEL_DJANGO_DB_NAMES = {"models"}


def test_the_kernel_reaches_no_database():
    """core imports neither sqlite3 nor django.db's connections, transactions or backends
    (import-linter's graph holds neither the standard library nor Django's submodules, so
    these are read from the sources): SQL machinery lives in infra.db."""
    offenders = []
    for path in sorted((ROOT / "core").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Import):
                offenders += [
                    f"{where} import {alias.name}"
                    for alias in node.names
                    if alias.name.split(".")[0] == "sqlite3" or alias.name.startswith("django.db")
                ]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = {alias.name for alias in node.names}
                if node.module == "sqlite3" or (
                    node.module.startswith("django.db")
                    and (node.module != "django.db" or names - KERNEL_DJANGO_DB_NAMES)
                ):
                    offenders.append(
                        f"{where} from {node.module} import {', '.join(sorted(names))}"
                    )
    assert not offenders, "core reaches the database (move it to infra.db):\n" + "\n".join(
        offenders
    )


def test_an_app_imported_by_the_wiring_breaks_its_contracts(tmp_path):
    """config is wiring: the Celery app importing an app module, or the URLs importing a
    model, fails `lint-imports`, naming the import."""
    result = lint_imports_with_planted(
        tmp_path,
        {
            "config/celery.py": "from breakpoints import selectors  # noqa\n",
            "config/urls.py": "from breakpoints.models import Breakpoint  # noqa\nurlpatterns = []\n",
        },
    )
    assert result.returncode != 0
    assert "config.celery -> breakpoints.selectors" in result.stdout
    assert "config.urls is not allowed to import breakpoints.models" in result.stdout


def named_test_modules(module: str) -> list[str]:
    """The test modules (test_*.py) an import of `module` reaches: the module itself, or
    those a `from module import ...` names."""
    return [part for part in module.split(".") if part.startswith("test_")]


def imported_test_modules(path: Path) -> list[str]:
    """Each import in a file that reaches a test module, as written."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if named_test_modules(alias.name)]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tests"):
            modules = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            if any(named_test_modules(module) for module in modules):
                found.append(f"from {node.module} import {', '.join(a.name for a in node.names)}")
    return found


def test_no_test_module_imports_another():
    """A helper two test files share lives in tests/support (or, a fixture of one folder, in
    its conftest.py): importing a test module would collect nothing new but tie the two
    files together, and leave the helper where no one looks for it."""
    offenders = [
        f"{name(path)}: {statement}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if "node_modules" not in path.parts
        for statement in imported_test_modules(path)
    ]
    assert not offenders, "move the shared helper to tests/support:\n" + "\n".join(offenders)


def test_an_import_of_a_test_module_is_found_in_each_form(tmp_path):
    planted = tmp_path / "test_planted.py"
    planted.write_text(
        "from tests.channels.test_jira import created_issue\n"
        "from tests.triggers import test_ci_gate\n"
        "import tests.ops.test_metrics\n"
        "from tests.support.jira import created_issue as issue\n"
    )
    assert imported_test_modules(planted) == [
        "from tests.channels.test_jira import created_issue",
        "from tests.triggers import test_ci_gate",
        "tests.ops.test_metrics",
    ]
