"""Time hostile request bodies of up to 5 MiB against POST /api/breakpoints, in-process.

    python benchmarks/hostile_bodies.py                  # a temporary SQLite database of its own
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bpm_bench \\
        python benchmarks/hostile_bodies.py --use-database-url

The shapes an outside probe used: 100,000 expert names (de-duplicated in O(n^2)
before the caps: 40 s of CPU), 200,000 options (a 54.5 MB review page), huge tag lists,
deeply nested lists and objects, a body just over the limit, and a legitimate 5 MiB body
(the largest context file accepted). Each goes through the whole Django stack with the test Client
(no network); the script prints the status, the wall and CPU time of the request (median
and worst of --repeat) beside the target of < 1 s, with PASS or FAIL. It prints
figures and exits 1 on a FAIL; the test suite asserts the answers, never the times.

By default it migrates a temporary SQLite database and deletes it at the end. With
--use-database-url it uses DATABASE_URL, which must name a database containing "bench"
(it migrates it, mints a temporary agent token there, and deletes the token and the
breakpoints the accepted bodies created).
"""

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable

from _common import (
    AGENT_PREFIX,
    TOKEN_NAME,
    add_database_arguments,
    database_label,
    print_table,
    standalone_database,
)

URL = "/api/breakpoints"
TARGET_SECONDS = 1.0
AGENT_ID = f"{AGENT_PREFIX}hostile"


def _json(body: dict) -> bytes:
    return json.dumps(body).encode()


def bodies(limit: int, content_cap: int) -> dict[str, Callable[[], bytes]]:
    """Each case builds its body lazily (only one large body is in memory at a time)."""
    return {
        "100,000 distinct experts": lambda: _json(
            {"payload": {"expert": [f"expert-{i:06d}-{'x' * 30}" for i in range(100_000)]}}
        ),
        "200,000 options": lambda: _json(
            {"payload": {"options": [f"option {i:06d} {'y' * 8}" for i in range(200_000)]}}
        ),
        "400,000 payload tags": lambda: _json(
            {"payload": {"tags": [f"t{i:06d}" for i in range(400_000)]}}
        ),
        "400,000 top-level tags": lambda: _json(
            {"payload": {}, "tags": [f"t{i:06d}" for i in range(400_000)]}
        ),
        "2,000,000 nested lists": lambda: (
            '{"payload": {"x": ' + "[" * 2_000_000 + "]" * 2_000_000 + "}}"
        ).encode(),
        "500,000 nested objects": lambda: (
            '{"payload": ' + '{"a":' * 500_000 + "1" + "}" * 500_001
        ).encode(),
        "1,700,000 free-form numbers": lambda: _json({"payload": {"x": [0] * 1_700_000}}),
        "free-form object, 270,000 keys": lambda: _json(
            {"payload": {"x": {f"k{i:06d}": i for i in range(270_000)}}}
        ),
        "5 MiB + 1 byte (over the limit)": lambda: _pad_to(limit + 1),
        # payload.context.files[].content holds at most content_cap characters.
        "legit: largest context file": lambda: _pad_to(
            min(limit, content_cap + len(_json(_skeleton())))
        ),
    }


def _skeleton() -> dict:
    return {
        "payload": {
            "title": "Hostile bodies benchmark",
            "question": "Approve?",
            "context": {"files": [{"path": "big.md", "format": "markdown", "content": ""}]},
        }
    }


def _pad_to(size: int) -> bytes:
    """A create body of exactly `size` bytes: one markdown file of filler text."""
    skeleton = _skeleton()
    filler = size - len(_json(skeleton))
    skeleton["payload"]["context"]["files"][0]["content"] = "z" * filler
    raw = _json(skeleton)
    assert len(raw) == size, (len(raw), size)
    return raw


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="requests per body")
    add_database_arguments(parser)
    args = parser.parse_args()
    with standalone_database(args, "hostile"):
        failed = run(args.repeat)
    sys.exit(1 if failed else 0)


def run(repeat: int) -> bool:
    """Post every hostile body `repeat` times; True when one missed its target."""
    from django.conf import settings
    from django.test import Client

    from accounts.models import ApiToken
    from accounts.tokens import token_create_for_agent
    from breakpoints.models import Breakpoint
    from core.limits import MAX_CONTENT_LENGTH

    limit = settings.BPM_MAX_BODY_BYTES
    token, raw_token = token_create_for_agent(agent_id=AGENT_ID, name=TOKEN_NAME)
    client = Client(headers={"authorization": f"Bearer {raw_token}"})
    print(f"database {database_label()}; body limit {limit:,} bytes; {repeat} requests each")
    print()
    failed = False
    try:
        header = ("body", "bytes", "status", "wall p50 s", "wall max s", "cpu max s", "target")
        rows = []
        for name, build in bodies(limit, MAX_CONTENT_LENGTH).items():
            raw = build()
            walls, cpus, statuses = [], [], set()
            for _ in range(repeat):
                wall, cpu = time.perf_counter(), time.process_time()
                response = client.generic("POST", URL, raw, content_type="application/json")
                walls.append(time.perf_counter() - wall)
                cpus.append(time.process_time() - cpu)
                statuses.add(response.status_code)
            worst = max(walls)
            verdict = "PASS" if worst < TARGET_SECONDS else "FAIL"
            failed = failed or verdict == "FAIL"
            rows.append(
                (
                    name,
                    f"{len(raw):,}",
                    "/".join(str(s) for s in sorted(statuses)),
                    f"{statistics.median(walls):.3f}",
                    f"{worst:.3f}",
                    f"{max(cpus):.3f}",
                    f"< {TARGET_SECONDS:.0f} s {verdict}",
                )
            )
            del raw
        print_table(header, rows)
    finally:
        Breakpoint.objects.filter(agent_id=AGENT_ID).delete()
        ApiToken.objects.filter(pk=token.pk).delete()
    return failed


if __name__ == "__main__":
    main()
