"""The README and the guides in docs/, checked as code: what they tell a reader to run
must at least parse, name things that exist, and hold together page by page.

- every ```python block compiles and passes ruff (the project's configuration);
- every ```bash / ```sh block passes `bash -n`;
- links between pages, and to headings, resolve (as MkDocs builds the anchors);
- a shell variable a page uses ($X) is defined earlier on the same page;
- manage.py and `python -m` run from the project's virtualenv (`.venv/bin/python`);
- the management commands, make targets and settings the pages name exist;
- a person (`create_reviewer NAME`) has the same attributes wherever the docs create them;
- the Layout (docs/development.md) has every package, and names each module of the shared ones.

(`make lint` also builds the docs with `mkdocs build --strict`.) No database, no server:
the pages are parsed, the sources read.
"""

import re
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from tests.support.project import APP_PACKAGES

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# The agent package's own README: its code blocks are checked too.
CODE_PAGES = [*PAGES, ROOT / "clients" / "python" / "README.md"]
SHELLS = {"bash", "sh", "shell", "console"}
# Variables a reader's shell has without any page defining them.
SHELL_VARIABLES_GIVEN = {"HOME", "PATH", "PWD", "USER"}
COMMAND_SOURCES = APP_PACKAGES
# Where the names of environment variables the docs mention must appear.
ENV_SOURCES = (*APP_PACKAGES, "clients/python/src")

FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```\s*$", re.M | re.S)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6}) (.+?)\s*$", re.M)
VARIABLE_USE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")
VARIABLE_DEFINITION = re.compile(
    r"(?:^|[\s;(&|])(?:export\s+|local\s+)?([A-Za-z_][A-Za-z0-9_]*)=|"
    r"\b(?:for|read(?:\s+-\w+(?:\s+'')?)*)\s+([A-Za-z_][A-Za-z0-9_]*)"
)
BARE_PYTHON = re.compile(r"(?<![\w/.-])python3?\s+(manage\.py|-m\s)")
MANAGE_COMMAND = re.compile(r"manage\.py\s+([a-z_]+)")
MAKE_TARGET = re.compile(r"(?:^|[\s`(;&|])make[ \t]+([a-z][\w-]*)(?![\w-]*=)", re.M)
ENV_NAME = re.compile(r"\b((?:BPM|SLACK|JIRA|TEAMS|EMAIL|DATABASE)_[A-Z][A-Z0-9_]*)\b")
CREATE_REVIEWER = re.compile(r"create_reviewer\s+((?:[^\n\\]|\\\n)*)")


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def blocks(path: Path, languages: set[str]) -> list[str]:
    text = path.read_text()
    return [body for lang, body in FENCE.findall(text) if lang in languages]


def prose(path: Path) -> str:
    """The page without its fenced blocks and inline code: where links live."""
    text = FENCE.sub("", path.read_text())
    return re.sub(r"`[^`\n]*`", "", text)


def code(path: Path) -> str:
    """Everything a reader might type: fenced blocks and inline code."""
    text = path.read_text()
    spans = [re.sub(r"(^|\s)#.*", "", body) for _, body in FENCE.findall(text)]
    spans += re.findall(r"`([^`\n]+)`", FENCE.sub("", text))
    return "\n".join(spans)


def slug(heading: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc) gives a heading."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(path: Path) -> set[str]:
    return {slug(title) for _, title in HEADING.findall(FENCE.sub("", path.read_text()))}


# --- code blocks ---------------------------------------------------------------------------


@pytest.mark.parametrize("page", CODE_PAGES, ids=rel)
def test_python_blocks_compile(page):
    for number, body in enumerate(blocks(page, {"python", "py"}), 1):
        compile(body, f"{rel(page)} python block {number}", "exec")


def test_python_blocks_pass_ruff(tmp_path):
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is a dev dependency"
    written = []
    for page in CODE_PAGES:
        for number, body in enumerate(blocks(page, {"python", "py"}), 1):
            name = f"{rel(page).replace('/', '_').replace('.', '_')}_{number}.py"
            (tmp_path / name).write_text(body)
            written.append(name)
    assert written
    result = subprocess.run(
        [ruff, "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"), "."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("page", CODE_PAGES, ids=rel)
def test_shell_blocks_parse(page):
    for number, body in enumerate(blocks(page, SHELLS), 1):
        result = subprocess.run(["bash", "-n"], input=body, capture_output=True, text=True)
        assert result.returncode == 0, f"{rel(page)} shell block {number}: {result.stderr}"


# --- links --------------------------------------------------------------------------------


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_links_and_anchors_resolve(page):
    broken = []
    for target in LINK.findall(prose(page)):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        linked = (page.parent / file_part).resolve() if file_part else page
        if file_part.endswith("/"):
            linked = linked / "index.md"
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and (linked.suffix != ".md" or anchor not in anchors(linked)):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, f"{rel(page)}: {broken}"


def test_every_guide_is_in_the_mkdocs_nav():
    nav = (ROOT / "mkdocs.yml").read_text()
    missing = [p.name for p in (ROOT / "docs").glob("*.md") if p.name not in nav]
    assert not missing


# --- shell variables and the virtualenv ---------------------------------------------------


def unquoted(line: str) -> str:
    """A shell line without its comment and single-quoted text (never expanded)."""
    line = re.sub(r"'[^']*'", "''", line)
    return re.sub(r"(^|\s)#.*", "", line)


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_shell_variables_are_defined_before_use(page):
    defined = set(SHELL_VARIABLES_GIVEN)
    undefined = []
    for body in blocks(page, SHELLS):
        for line in body.splitlines():
            line = unquoted(line)
            for match in VARIABLE_DEFINITION.finditer(line):
                defined.add(match.group(1) or match.group(2))
            undefined += [n for n in VARIABLE_USE.findall(line) if n not in defined]
    assert not undefined, f"{rel(page)} uses before defining: {sorted(set(undefined))}"


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_manage_py_and_modules_run_from_the_virtualenv(page):
    bare = [m.group(0) for m in BARE_PYTHON.finditer(page.read_text())]
    assert not bare, f"{rel(page)}: use .venv/bin/python, not {bare}"


# --- names that must exist ----------------------------------------------------------------


def management_commands() -> set[str]:
    found = {
        path.stem
        for package in COMMAND_SOURCES
        for path in (ROOT / package).glob("management/commands/*.py")
        if not path.stem.startswith("_")
    }
    # Django's and its apps' commands the docs use.
    return found | {"migrate", "createsuperuser", "shell", "axes_reset", "collectstatic", "check"}


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_management_commands_named_exist(page):
    unknown = set(MANAGE_COMMAND.findall(page.read_text())) - management_commands()
    assert not unknown, f"{rel(page)} names unknown commands: {sorted(unknown)}"


def test_every_project_command_is_in_the_commands_page():
    page = (ROOT / "docs" / "commands.md").read_text()
    project = management_commands() - {"migrate", "createsuperuser", "shell", "axes_reset"}
    project -= {"collectstatic", "check"}
    missing = sorted(name for name in project if f"`{name}" not in page)
    assert not missing


def make_targets() -> set[str]:
    makefile = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([a-z][\w-]*):", makefile, re.M))


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_make_targets_named_exist(page):
    unknown = set(MAKE_TARGET.findall(code(page))) - make_targets()
    assert not unknown, f"{rel(page)} names unknown make targets: {sorted(unknown)}"


def source_text(roots: tuple[str, ...]) -> str:
    files = [p for root in roots for p in (ROOT / root).rglob("*.py")]
    files += [ROOT / name for name in ("Makefile", "Procfile", "Procfile.dev", "gunicorn.conf.py")]
    # compose.yaml reads the deployment's own (BPM_IMAGE, BPM_HTTP_BIND); the suite's
    # switches are read by tests/conftest.py (BPM_TEST_IMAGE).
    files += [ROOT / "compose.yaml", ROOT / "tests" / "conftest.py"]
    return "\n".join(path.read_text() for path in files)


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_environment_variables_named_exist(page):
    sources = source_text(ENV_SOURCES)
    unknown = {name for name in ENV_NAME.findall(page.read_text()) if name not in sources}
    assert not unknown, f"{rel(page)} names variables no code reads: {sorted(unknown)}"


def test_the_configuration_table_lists_settings_that_exist():
    settings = source_text(("config",))
    table = (ROOT / "docs" / "configuration.md").read_text()
    names = {
        name
        for row in re.findall(r"^\| (.+?) \|", table, re.M)
        for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", row)
    }
    assert len(names) > 30
    assert not sorted(name for name in names if name not in settings)


# --- people -------------------------------------------------------------------------------


def reviewer_attributes(arguments: str) -> tuple[str, frozenset[str]]:
    words = arguments.replace("\\\n", " ").split()
    name = words[0]
    flags = frozenset(
        word for word in words[1:] if word != "--update" and not re.match(r"[|#>]", word)
    )
    return name, flags


def test_each_person_has_one_set_of_attributes_and_is_created_once_per_page():
    seen: dict[str, dict[frozenset[str], str]] = {}
    twice = []
    for page in PAGES:
        created: set[str] = set()
        for body in blocks(page, SHELLS):
            for arguments in CREATE_REVIEWER.findall(body):
                name, flags = reviewer_attributes(arguments)
                seen.setdefault(name, {}).setdefault(flags, rel(page))
                if "--update" not in arguments:
                    twice += [f"{rel(page)}: {name}"] if name in created else []
                    created.add(name)
    differing = {name: where for name, where in seen.items() if len(where) > 1}
    assert not differing, f"one person, different attributes: {differing}"
    assert not twice, f"created twice on one page (use --update): {twice}"


# --- the layout ---------------------------------------------------------------------------

# Packages whose Layout entry names every module in them (the shared plumbing, where a reader
# looks a module up by name); the apps' entries say what they hold in words.
LAYOUT_NAMES_EVERY_MODULE = ("core", "infra", "web", "config", "devtools")
LAYOUT_ENTRY = re.compile(r"^([\w/.-]+/)\s+(.*(?:\n {6,}.*)*)", re.M)


def layout_entries() -> dict[str, str]:
    """docs/development.md's Layout block: {"core": its text, ...}."""
    text = (ROOT / "docs" / "development.md").read_text()
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    return {name.rstrip("/"): entry for name, entry in LAYOUT_ENTRY.findall(block)}


def test_the_layout_has_every_package_and_only_folders_that_exist():
    entries = layout_entries()
    assert not [package for package in APP_PACKAGES if package not in entries]
    assert not [name for name in entries if not (ROOT / name).is_dir()]


@pytest.mark.parametrize("package", LAYOUT_NAMES_EVERY_MODULE)
def test_the_layout_names_each_module_of_the_shared_packages(package):
    entry = layout_entries()[package].lower()
    modules = sorted(
        path.stem if path.suffix else path.name
        for path in (ROOT / package).iterdir()
        if (path.suffix == ".py" and path.stem != "__init__")
        or (path.is_dir() and (path / "__init__.py").exists())
    )
    assert not [name for name in modules if not re.search(rf"\b{name}\b", entry)]


def test_the_layout_names_each_package_of_every_app():
    """A package inside an app (breakpoints/payload/, accounts/admin/...) is named in its
    app's Layout entry: a reader finds it there before opening the folder."""
    entries = layout_entries()
    unnamed = [
        f"{package}/{path.name}"
        for package in APP_PACKAGES
        for path in sorted((ROOT / package).iterdir())
        if path.is_dir() and (path / "__init__.py").exists() and path.name != "migrations"
        if not re.search(rf"\b{path.name}\b", entries[package].lower())
    ]
    assert not unnamed, f"docs/development.md's Layout does not name: {unnamed}"


def test_the_layout_names_each_folder_of_the_tests():
    """tests/ mirrors the code: each of its folders is named in the Layout's tests/ entry."""
    entry = layout_entries()["tests"]
    folders = [
        path.name for path in sorted((ROOT / "tests").iterdir()) if (path / "__init__.py").exists()
    ]
    assert not [name for name in folders if not re.search(rf"\b{name}/", entry)]
