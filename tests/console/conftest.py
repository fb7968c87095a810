"""Console fixtures: a rich breakpoint payload. The people (reviewer_browser, admin_browser)
are in tests/support/people.py, the console's URLs in tests/support/console.py."""

import pytest


@pytest.fixture
def rich_payload():
    """A babysitter payload with one context file of each format, plus one without content."""
    return {
        "question": "Ship the new billing plan?",
        "title": "Billing plan review",
        "tags": ["billing", "design"],
        "attempt": 2,
        "previousFeedback": "Split the migration in two.",
        "options": ["Ship now", "Ship Monday"],
        "context": {
            "runId": "run-42",
            "files": [
                {
                    "path": "artifacts/plan.md",
                    "format": "markdown",
                    "content": "# The plan\n\n- one\n- two",
                },
                {
                    "path": "code/main.py",
                    "format": "code",
                    "language": "python",
                    "content": "def main():\n    return 42\n",
                },
                {"path": "notes.txt", "format": "text", "content": "plain <b>notes</b>"},
                {"path": "report.html", "format": "html", "content": "<h1>Report</h1>"},
                {"path": "artifacts/missing.md", "format": "markdown"},
            ],
        },
    }
