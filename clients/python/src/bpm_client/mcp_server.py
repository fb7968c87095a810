"""`bpm mcp`: an MCP server (stdio) whose tools let a model ask a human and wait for the answer.

One line configures an MCP client, e.g. Claude Code:

    claude mcp add bpm --env BPM_URL=https://bpm.example.com --env BPM_TOKEN=... -- bpm mcp

or any client's JSON config: `{"mcpServers": {"bpm": {"command": "bpm", "args": ["mcp"],
"env": {"BPM_URL": "...", "BPM_TOKEN": "..."}}}}`.

The tools speak the public API through one `AsyncClient` per process, made at the first call
(so a missing token is a tool error the model can read, not a server that fails to start).
Every failure becomes an MCP tool error (`isError`) carrying the one-line message.
"""

import inspect
import math
import time
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Annotated, Any, Literal, TypedDict, cast

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from . import __version__, models
from .aio import AsyncClient
from .bodies import ContextFileCut, context_file
from .errors import BpmError, WaitTimeout
from .operations import result_of

# While a tool waits it long-polls in slices this long and reports progress between them
# (a client that resets its timeout on progress keeps a long wait alive).
PROGRESS_SECONDS = 10.0

INSTRUCTIONS = (
    "Breakpoint Manager: ask a human reviewer before risky or irreversible actions and wait "
    "for the decision. Call request_human_approval before deploying, deleting, migrating, "
    "spending money or contacting people; act only when the result says approved: true, and "
    "follow its feedback."
)


class Decision(TypedDict):
    """A breakpoint's state: the human's decision once there is one."""

    breakpointId: str
    status: Literal["waiting", "released", "expired", "cancelled"]
    approved: Annotated[
        bool | None,
        Field(
            description="true: go ahead. false: rejected, expired or cancelled: do not act. "
            "null: nobody has answered yet (status waiting)."
        ),
    ]
    response: str | None
    feedback: Annotated[
        str | None,
        Field(description="The reviewer's comment: conditions, or what to change. Read it."),
    ]
    option: Annotated[str | None, Field(description="The option the reviewer chose, if any.")]
    respondedBy: str | list[str] | None
    approvers: Annotated[
        list[dict[str, Any]] | None,
        Field(
            description="A collect-all or quorum approval: each approving seat and who "
            "answered for it ({seat, respondedBy}); null otherwise."
        ),
    ]
    allResponses: list[dict[str, Any]]
    timeoutPolicy: dict[str, Any] | None
    values: Annotated[
        dict[str, Any] | None,
        Field(
            description="The approved answer to `form` / `proposal`: use these values, not "
            "the ones you proposed (the reviewer may have edited them). null without a form, "
            "or when not approved."
        ),
    ]
    edited: Annotated[
        bool | None, Field(description="true when the reviewer changed your proposal.")
    ]
    payloadDigest: Annotated[
        str | None,
        Field(description="What was decided on: sha256 of the question, title and payload."),
    ]
    valuesDigest: Annotated[
        str | None, Field(description="sha256 of the approved values, signed in the receipt.")
    ]
    receipt: Annotated[
        str | None,
        Field(description="The server's signed statement of the decision (a compact JWS)."),
    ]
    consoleUrl: Annotated[str, Field(description="Where a reviewer answers it.")]
    expectedDecision: Annotated[
        dict[str, Any] | None,
        Field(
            description="While waiting: how long people usually take to answer a question "
            "like this one ({p50Seconds, p90Seconds, samples, basis}), from past decisions; "
            "decide whether to do other work meanwhile. null once answered, or when the "
            "server has too little history."
        ),
    ]
    warnings: Annotated[
        list[str],
        Field(
            description="What was asked may not be what you meant: a file cut for length, a "
            "key that looks misspelt. Empty when nothing was noticed (and after a status call)."
        ),
    ]


class Cancelled(TypedDict):
    breakpointId: str
    status: str


Question = Annotated[
    str,
    Field(
        min_length=1,
        description="The question for the reviewer, self-contained: what you are about to do, "
        "why, and what could go wrong. E.g. 'Deploy release 2.4 to production? It runs "
        "migration 0042, which drops the column users.legacy_id.'",
    ),
]
Title = Annotated[
    str | None, Field(description="A short headline for the reviewer's queue (optional).")
]
Files = Annotated[
    list[str] | None,
    Field(
        description="Paths of local files the reviewer should read (a plan, a diff, a log), "
        "relative to this server's working directory or absolute; their text is attached."
    ),
]
Tags = Annotated[
    list[str] | None,
    Field(description="Labels for routing and filtering, e.g. ['deploy', 'production']."),
]
Expert = Annotated[
    list[str] | None,
    Field(description="Who should answer: reviewer groups or usernames (omit: any reviewer)."),
]
Options = Annotated[
    list[str] | None,
    Field(
        description="Choices the reviewer picks from, e.g. ['deploy now', 'deploy tonight', "
        "'do not deploy']; the choice comes back in `option`."
    ),
]
TtlSeconds = Annotated[
    int | None,
    Field(
        ge=1,
        description="Give up after this many seconds without an answer: status 'expired', "
        "approved false. Omit to wait until someone answers.",
    ),
]
Form = Annotated[
    dict[str, Any] | None,
    Field(
        description="A JSON Schema (draft 2020-12, 2019-09 or draft-07; type object) of the "
        "answer you need, e.g. "
        "{'type': 'object', 'properties': {'replicas': {'type': 'integer', 'minimum': 1}}, "
        "'required': ['replicas']}. The reviewer fills it in; the answer comes back in "
        "`values`, validated."
    ),
]
Proposal = Annotated[
    dict[str, Any] | None,
    Field(
        description="The values you propose (the arguments of the action, e.g. {'replicas': "
        "3}): the reviewer approves them as they are or edits them; `values` is what to run."
    ),
]
BreakpointId = Annotated[
    str, Field(min_length=1, description="The breakpointId that create_breakpoint returned.")
]


@contextmanager
def tool_errors(breakpoint_id: str | None = None) -> Iterator[None]:
    """Turn the client's errors into tool errors with their one-line message.

    With `breakpoint_id` (a wait was under way), the message says how to resume: the
    breakpoint itself is untouched and may still be answered.
    """
    try:
        yield
    except BpmError as error:
        message = str(error)
        if breakpoint_id is not None:
            message += (
                f" (breakpoint {breakpoint_id} may still be waiting for its answer: "
                "call wait_for_breakpoint with it to resume)"
            )
        raise ToolError(message) from error


def read_files(paths: list[str] | None) -> tuple[list[dict[str, Any]], list[str]]:
    """Context files read now, before anything is created, so a bad path creates nothing;
    and a warning for each file cut for length."""
    files = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ContextFileCut)
        for path in paths or []:
            try:
                files.append(context_file(path))
            except FileNotFoundError as error:
                raise ToolError(f"no such file: {path}") from error
            except OSError as error:
                raise ToolError(f"cannot read {path}: {error.strerror or error}") from error
    cut = [str(w.message) for w in caught if issubclass(w.category, ContextFileCut)]
    return files, cut


# How many created breakpoints' console URLs a server keeps (older ones are read again).
CONSOLE_URLS_KEPT = 256


class Tools:
    """The tools, sharing one lazily made client."""

    def __init__(self, url: str | None, token: str | None):
        self._url = url
        self._token = token
        self._client: AsyncClient | None = None
        # The consoleUrl of the breakpoints this server created (at most CONSOLE_URLS_KEPT).
        self._console_urls: dict[str, str] = {}

    def client(self) -> AsyncClient:
        if self._client is None:
            with tool_errors():
                self._client = AsyncClient(self._url, self._token)
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    # --- the tools -------------------------------------------------------------------------

    async def request_human_approval(
        self,
        question: Question,
        ctx: Context,
        title: Title = None,
        files: Files = None,
        tags: Tags = None,
        expert: Expert = None,
        options: Options = None,
        ttl_seconds: TtlSeconds = None,
        form: Form = None,
        proposal: Proposal = None,
    ) -> Decision:
        created, noticed = await self._create(
            question, title, files, tags, expert, options, ttl_seconds, form, proposal
        )
        if created.done:  # an auto-approval rule answered at once
            return await self._decision(created.breakpoint_id, created, noticed)
        expected = created.expected_decision
        status = await self._wait(ctx, created.breakpoint_id, timeout=None, expected=expected)
        assert status is not None  # no timeout: only a decision ends the wait
        return await self._decision(created.breakpoint_id, status, noticed)

    async def create_breakpoint(
        self,
        question: Question,
        title: Title = None,
        files: Files = None,
        tags: Tags = None,
        expert: Expert = None,
        options: Options = None,
        ttl_seconds: TtlSeconds = None,
        form: Form = None,
        proposal: Proposal = None,
    ) -> Decision:
        created, noticed = await self._create(
            question, title, files, tags, expert, options, ttl_seconds, form, proposal
        )
        return await self._decision(created.breakpoint_id, created, noticed)

    async def get_breakpoint_status(self, breakpoint_id: BreakpointId) -> Decision:
        with tool_errors():
            status = await self.client().status(breakpoint_id)
        return await self._decision(breakpoint_id, status)

    async def wait_for_breakpoint(
        self,
        breakpoint_id: BreakpointId,
        ctx: Context,
        timeout_seconds: Annotated[
            float,
            Field(
                gt=0,
                description="How long to wait for the answer before returning status "
                "'waiting' (not an error).",
            ),
        ] = 300,
    ) -> Decision:
        status = await self._wait(ctx, breakpoint_id, timeout=timeout_seconds)
        if status is None:
            with tool_errors():
                status = await self.client().status(breakpoint_id)
        return await self._decision(breakpoint_id, status)

    async def cancel_breakpoint(
        self,
        breakpoint_id: BreakpointId,
        reason: Annotated[
            str | None, Field(description="Why it is withdrawn (shown to reviewers).")
        ] = None,
    ) -> Cancelled:
        with tool_errors():
            status = await self.client().cancel(breakpoint_id, reason)
        return {"breakpointId": breakpoint_id, "status": status}

    # --- shared steps ----------------------------------------------------------------------

    async def _create(
        self,
        question: str,
        title: str | None,
        files: list[str] | None,
        tags: list[str] | None,
        expert: list[str] | None,
        options: list[str] | None,
        ttl_seconds: int | None,
        form: dict[str, Any] | None = None,
        proposal: dict[str, Any] | None = None,
    ) -> tuple[models.Breakpoint, list[str]]:
        """The breakpoint created, and the warnings for the model: files cut, keys the
        server thinks misspelt."""
        context, cut = read_files(files)
        with tool_errors():
            created = await self.client().create(
                question,
                title=title,
                files=context,
                tags=tags or (),
                expert=expert or None,
                options=options or None,
                ttl=ttl_seconds,
                form=form,
                proposal=proposal,
            )
        if len(self._console_urls) >= CONSOLE_URLS_KEPT:
            self._console_urls.pop(next(iter(self._console_urls)))  # the oldest
        self._console_urls[created.breakpoint_id] = created.console_url
        return created, [*cut, *created.warnings]

    async def _console_url(self, breakpoint_id: str) -> str:
        """The breakpoint's consoleUrl as the server wrote it: kept from its creation here,
        else read once (a breakpoint another process created)."""
        url = self._console_urls.get(breakpoint_id)
        if url is None:
            with tool_errors():
                url = (await self.client().get(breakpoint_id)).console_url
        return url

    async def _wait(
        self,
        ctx: Context,
        breakpoint_id: str,
        *,
        timeout: float | None,
        expected: models.ExpectedDecision | None = None,
    ) -> models.Status | None:
        """Long-poll until decided, reporting progress every PROGRESS_SECONDS (with how long
        people usually take, when `expected` says).

        Each slice is a `wait` that returns the moment the breakpoint is decided, and the
        status lives on the server, so slicing never loses an answer. None: `timeout` passed.
        """
        client = self.client()
        where = await self._console_url(breakpoint_id)
        usually = f"; {expected.describe()}" if expected is not None else ""
        started = time.monotonic()
        while True:
            elapsed = min(time.monotonic() - started, timeout or math.inf)  # progress <= total
            message = f"waiting for a human: {where} ({elapsed:.0f} s so far{usually})"
            await ctx.report_progress(elapsed, timeout, message)
            remaining = math.inf if timeout is None else timeout - elapsed
            if remaining <= 0:
                return None
            slice_seconds = min(PROGRESS_SECONDS, remaining)
            with tool_errors(breakpoint_id):
                try:
                    return await client.wait(breakpoint_id, slice_seconds)
                except WaitTimeout:
                    continue

    async def _decision(
        self,
        breakpoint_id: str,
        status: models.Status | models.Breakpoint,
        noticed: list[str] | None = None,
    ) -> Decision:
        url = await self._console_url(breakpoint_id)
        if status.done:
            body = result_of(breakpoint_id, status).to_json()
        else:  # the result's keys, all empty: nobody has answered yet
            body = {**models.BreakpointResult(approved=False).to_json(), "approved": None}
            body.update(breakpointId=breakpoint_id, status=status.status)
        expected = models.to_wire(status.expected_decision) if not status.done else None
        return cast(
            Decision,
            {**body, "consoleUrl": url, "expectedDecision": expected, "warnings": noticed or []},
        )


DESCRIPTIONS = {
    "request_human_approval": """
Ask a human reviewer to approve or decide something, and wait for the answer.

Use it BEFORE any risky, irreversible or costly action: deploying, deleting data or files,
migrating a database, force-pushing, sending messages or emails to people, spending money,
changing permissions or production settings; and whenever the user asked you to check with a
human first. Attach what the reviewer needs (files: the plan, the diff) and, for a choice,
`options`. To have the reviewer check or correct the arguments of the action, pass them as
`proposal` (with a `form`, a JSON Schema of them); to ask for a typed answer, pass a `form`.
Then run what comes back in `values` (it may differ from your proposal: `edited`).

The call blocks until a reviewer answers (that can take minutes or hours; progress
notifications are sent while it waits, saying how long people usually take when the server
knows) or until ttl_seconds pass. Then check `approved`:
act only when it is true. Always read `feedback`: on approval it may add conditions, on
rejection it says what to change before asking again. `option` is the reviewer's choice.
Status 'expired' or 'cancelled' means nobody approved: do not act. `warnings` says what the
reviewer saw may differ from what you meant (a file cut for length).

To keep working while a human decides, use create_breakpoint and wait_for_breakpoint instead.
""",
    "create_breakpoint": """
Post a question for a human reviewer WITHOUT waiting for the answer; returns its breakpointId
at once (status 'waiting', approved null).

Use it instead of request_human_approval when you have other work to do meanwhile, or several
questions to ask in parallel. `expectedDecision` (when not null) says how long people usually
take to answer such a question: p50Seconds, p90Seconds. Later call wait_for_breakpoint (or get_breakpoint_status) with
the breakpointId, and do the guarded action only once status is 'released' and approved is
true. Same inputs as request_human_approval.
""",
    "get_breakpoint_status": """
Check once, without waiting, whether a human has answered a breakpoint. Status 'waiting': no
answer yet (approved null). 'released': a human answered (read approved, feedback, option).
'expired': its ttl passed unanswered. 'cancelled': withdrawn. Only approved true means go.
""",
    "wait_for_breakpoint": """
Wait up to timeout_seconds for a human to answer a breakpoint created earlier (by
create_breakpoint, or by a request_human_approval call that was interrupted). Returns as soon
as there is a decision. If the time passes first it returns status 'waiting' (not an error):
keep working and call it again later. Act only when approved is true; read feedback.
""",
    "cancel_breakpoint": """
Withdraw a question you no longer need answered (the plan changed, the action is no longer
wanted, you found the answer yourself). The breakpoint becomes 'cancelled' and reviewers can
no longer answer it. One already answered or expired cannot be cancelled (invalid_state).
""",
}

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=True)
ANNOTATIONS = {
    "request_human_approval": ToolAnnotations(title="Ask a human and wait", open_world_hint=True),
    "create_breakpoint": ToolAnnotations(title="Ask a human (do not wait)", open_world_hint=True),
    "get_breakpoint_status": READ_ONLY,
    "wait_for_breakpoint": READ_ONLY,
    "cancel_breakpoint": ToolAnnotations(
        destructive_hint=True, idempotent_hint=True, open_world_hint=True
    ),
}


def build_server(url: str | None = None, token: str | None = None) -> MCPServer[None]:
    """The MCP server with the five tools; `url`/`token` default to BPM_URL/BPM_TOKEN."""
    tools = Tools(url, token)

    @asynccontextmanager
    async def lifespan(_server: MCPServer[None]) -> AsyncIterator[None]:
        try:
            yield None
        finally:
            await tools.aclose()

    server: MCPServer[None] = MCPServer(
        "bpm",
        title="Breakpoint Manager",
        instructions=INSTRUCTIONS,
        version=__version__,
        lifespan=lifespan,
        log_level="WARNING",
    )
    for name, description in DESCRIPTIONS.items():
        server.add_tool(
            getattr(tools, name),
            name=name,
            description=inspect.cleandoc(description),
            annotations=ANNOTATIONS[name],
            structured_output=True,
        )
    return server


def main(url: str | None = None, token: str | None = None) -> None:
    """Serve over stdio until the client closes stdin (`bpm mcp`)."""
    build_server(url, token).run("stdio")


if __name__ == "__main__":
    main()
