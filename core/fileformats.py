"""The effective format (and language) of a context file: the agent's, else its path's.

`payload` stays exactly as the agent sent it (babysitter's CLI sends files without a
format), so everything that shows a context file asks here instead of reading `format`.
"""

import re
from collections.abc import Mapping
from typing import Any

from core.choices import FileFormat

# Extensions (lower case, with the dot) of formats that are not code.
DOCUMENT_EXTENSIONS: dict[str, str] = {
    ".md": FileFormat.MARKDOWN,
    ".markdown": FileFormat.MARKDOWN,
    ".html": FileFormat.HTML,
    ".htm": FileFormat.HTML,
}

# Source extensions -> the Pygments lexer name the console highlights them with.
CODE_EXTENSIONS: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".ts": "typescript",
    ".tsx": "tsx",
    ".jsx": "jsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".rb": "ruby",
    ".sh": "bash",
    ".bash": "bash",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".json": "json",
    ".toml": "toml",
    ".sql": "sql",
    ".c": "c",
    ".h": "c",
    ".cpp": "cpp",
    ".cc": "cpp",
    ".hpp": "cpp",
    ".cs": "csharp",
    ".kt": "kotlin",
    ".kts": "kotlin",
    ".swift": "swift",
    ".php": "php",
    ".tf": "hcl",
    ".css": "css",
    ".diff": "diff",
    ".patch": "diff",
}

# Whole file names (lower case) that are code without an extension.
CODE_FILE_NAMES: dict[str, str] = {
    "dockerfile": "dockerfile",
    "makefile": "make",
    "gnumakefile": "make",
}

_SEPARATORS = re.compile(r"[\\/]")


def infer_format(path: Any) -> tuple[str, str | None]:
    """(format, language) from a path's file name: markdown, html, code with its language,
    else text. Case does not matter (`README.MD`, `Dockerfile`)."""
    if not isinstance(path, str):
        return FileFormat.TEXT, None
    name = _SEPARATORS.split(path)[-1].lower()
    if name in CODE_FILE_NAMES:
        return FileFormat.CODE, CODE_FILE_NAMES[name]
    stem, dot, extension = name.rpartition(".")
    if not dot or not stem:  # no extension, or a dotfile such as ".env"
        return FileFormat.TEXT, None
    suffix = f".{extension}"
    if suffix in DOCUMENT_EXTENSIONS:
        return DOCUMENT_EXTENSIONS[suffix], None
    if suffix in CODE_EXTENSIONS:
        return FileFormat.CODE, CODE_EXTENSIONS[suffix]
    if stem in CODE_FILE_NAMES or extension == "dockerfile":  # Dockerfile.prod, app.dockerfile
        return FileFormat.CODE, CODE_FILE_NAMES.get(stem, "dockerfile")
    return FileFormat.TEXT, None


def file_format(item: Mapping[str, Any]) -> tuple[str, str | None]:
    """(format, language) of one payload.context.files entry.

    The agent's `format` when it is a valid one, else the one inferred from `path`. The
    agent's `language` wins; without one a code file gets the language of its extension.
    """
    explicit = item.get("format")
    language = item.get("language")
    given = language.strip() if isinstance(language, str) and language.strip() else None
    inferred_format, inferred_language = infer_format(item.get("path"))
    effective = str(explicit) if explicit in FileFormat.values else inferred_format
    if given is not None:
        return effective, given
    # An inferred language only ever comes with an inferred code format.
    return effective, inferred_language if effective == FileFormat.CODE else None
