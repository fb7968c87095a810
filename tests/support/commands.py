"""Management commands run in-process: their output, and the line that sums it up."""

import io

from django.core.management import call_command


def run(*args, stdin: str | None = None, monkeypatch=None) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def last_line(text: str) -> str:
    lines = text.rstrip("\n").split("\n")
    return lines[-1]
