"""One token's long-polls cannot run a web process out of open files (issue 32, defect 4).

The web process runs under an open-file limit of 400 (soft and hard, as `ulimit -n 400`
would set): room for 144 waiters (web.openfiles keeps 256 for everything else), 72 per
token. One agent opens 300 long-polls at once: the first 72 wait, the others are answered
429 at once with their connections closed, and a plain request from someone else is
still served. Before, the caps (20,000 waiters, 1,000 per token) never applied: the
process held every socket until accept() failed with EMFILE and nobody got in.
"""

import asyncio
from collections import Counter

import httpx
import pytest

from accounts.tokens import token_create_for_agent
from breakpoints.services import breakpoint_create
from core.actors import Actor

pytestmark = pytest.mark.django_db(transaction=True)

OPEN_FILES = 400
LONG_POLLS = 300
WAIT_SECONDS = 10


def test_one_tokens_long_polls_leave_room_for_everyone_else(make_system):
    system = make_system(beat=False, web_open_files=OPEN_FILES)
    agent = token_create_for_agent(agent_id="agent-greedy")[1]
    other = token_create_for_agent(agent_id="agent-other")[1]
    bp, _ = breakpoint_create(actor=Actor.for_agent("agent-greedy"), payload={"question": "?"})
    mine, _ = breakpoint_create(actor=Actor.for_agent("agent-other"), payload={"question": "?"})

    async def flood() -> tuple[Counter, set[str], int]:
        limits = httpx.Limits(max_connections=LONG_POLLS, max_keepalive_connections=0)
        async with httpx.AsyncClient(
            base_url=system.base_url,
            headers={"Authorization": f"Bearer {agent}"},
            limits=limits,
            timeout=WAIT_SECONDS + 20,
        ) as greedy:
            polls = [
                asyncio.create_task(
                    greedy.get(f"/api/breakpoints/{bp.pk}/status?wait={WAIT_SECONDS}")
                )
                for _ in range(LONG_POLLS)
            ]
            refused = [r for r in await _first_answers(polls) if r.status_code == 429]
            plain = await asyncio.to_thread(
                httpx.get,
                f"{system.base_url}/api/breakpoints/{mine.pk}",
                headers={"Authorization": f"Bearer {other}"},
                timeout=20,
            )
            answers = await asyncio.gather(*polls)
        return (
            Counter(answer.status_code for answer in answers),
            {answer.headers.get("connection", "") for answer in refused},
            plain.status_code,
        )

    statuses, refused_connection, plain = asyncio.run(flood())

    assert plain == 200  # someone else is served while the token holds its share
    assert statuses[200] <= 72 and statuses[429] >= LONG_POLLS - 72, statuses
    assert set(statuses) <= {200, 429}, statuses
    assert refused_connection == {"close"}
    assert "Too many open files" not in system.web.output()


async def _first_answers(polls: list) -> list[httpx.Response]:
    """The answers that came back before the waits end: the refused ones (429 at once)."""
    done, _ = await asyncio.wait(polls, timeout=WAIT_SECONDS / 2)
    return [task.result() for task in done if task.exception() is None]
