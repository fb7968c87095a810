"""Receiving an event: verify the sender, parse, store it once, hand it to the worker.

The signature is checked on the raw body before anything is parsed. A delivery id seen
before from the same source is a redelivery: the stored event is returned and nothing
else happens (so 100 concurrent copies are one event, evaluated once).

A source's backlog is bounded: past BPM_TRIGGER_MAX_PENDING_EVENTS of its events waiting
for evaluation (`pending` rows, counted on the database through a partial index, so the
bound holds whatever the number of web processes), a new delivery is answered 429 with
Retry-After and nothing is stored; the sender delivers it again later.
"""

import json
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from core import tasknames
from core.exceptions import InvalidInput, NotAuthenticated, NotFound, RateLimited
from core.jsonkeys import duplicate_key, may_hold_duplicates
from core.storable import storable_problem
from infra.publishing import publish, publish_soon
from infra.ratelimits import rate_limit
from triggers.models import EventSource, EventStatus, ExternalEvent
from triggers.verification import verify

# What a source past its backlog is told to wait: about one sweep of the events' outbox.
BACKLOG_RETRY_SECONDS = 30


def event_receive(
    *, source_name: str, body: bytes, headers: Mapping[str, str], address: str = ""
) -> tuple[ExternalEvent, bool]:
    """Store a verified delivery; returns (event, created). Raises NotFound (no such
    enabled source), NotAuthenticated (signature refused), InvalidInput (bad body) or
    RateLimited.

    Two limits, so that one sender's junk never costs another's genuine deliveries: a
    verified delivery counts only against its source (BPM_THROTTLE_EVENT_SOURCE_RATE);
    a refused one (unknown source, bad signature) against `address`, the sender's
    (BPM_THROTTLE_ANON_RATE), which past its limit is answered 429 instead. And the
    source's backlog: past BPM_TRIGGER_MAX_PENDING_EVENTS events waiting for evaluation,
    a new delivery is RateLimited too (a redelivery is answered as always).
    """
    try:
        source = EventSource.objects.filter(name=source_name, enabled=True).first()
        if source is None:
            raise NotFound(f"No event source named {source_name!r}.")
        verified = verify(source, body, headers)
    except (NotFound, NotAuthenticated, InvalidInput):
        rate_limit(
            f"bpm:events:refused:{address}",
            settings.BPM_THROTTLE_ANON_RATE,
            "refused deliveries from this address",
        )
        raise
    rate_limit(
        f"bpm:events:source:{source.pk}",
        settings.BPM_THROTTLE_EVENT_SOURCE_RATE,
        f"deliveries for source {source.name!r}",
    )
    redelivered = _backlog_full(source, verified.delivery_id)
    if redelivered is not None:
        return redelivered, False
    payload = parse_event_body(body)
    event_type = verified.event_type or _type_in(payload)
    try:
        with transaction.atomic():
            event = ExternalEvent.objects.create(
                source=source,
                type=event_type,
                delivery_id=verified.delivery_id,
                payload=payload,
                headers=verified.headers,
                next_attempt_at=timezone.now(),
            )
            transaction.on_commit(lambda: publish_soon(publish_evaluation, [event.pk]))
    except IntegrityError:
        existing = ExternalEvent.objects.filter(
            source=source, delivery_id=verified.delivery_id
        ).first()
        if existing is None:
            raise
        return existing, False
    return event, True


def pending_count(source: EventSource, *, up_to: int) -> int:
    """How many of the source's events wait for evaluation, counted up to `up_to` (an
    index-only count of at most that many rows: event_pending_source)."""
    pending = ExternalEvent.objects.filter(source=source, status=EventStatus.PENDING)
    return pending.values("pk")[:up_to].count()


def _backlog_full(source: EventSource, delivery_id: str) -> ExternalEvent | None:
    """Under the source's backlog bound: None. Past it: the stored event when this is a
    redelivery (answered as always), else RateLimited (429, Retry-After)."""
    bound = settings.BPM_TRIGGER_MAX_PENDING_EVENTS
    if bound <= 0 or pending_count(source, up_to=bound) < bound:
        return None
    stored = ExternalEvent.objects.filter(source=source, delivery_id=delivery_id).first()
    if stored is not None:
        return stored
    raise RateLimited(
        f"Source {source.name!r} has {bound} events waiting for evaluation; "
        f"retry in {BACKLOG_RETRY_SECONDS} s.",
        retry_after=BACKLOG_RETRY_SECONDS,
    )


def parse_event_body(body: bytes) -> dict[str, Any]:
    """The JSON object of an event, or InvalidInput: what JSON allows but the database
    cannot hold (NaN, NUL, lone surrogates, absurd nesting) is refused here too, and so is
    a key sent twice in one object."""
    try:
        text = body.decode("utf-8")
        payload = json.loads(text, parse_constant=_no_constants, parse_float=_finite)
        compact = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
        compact.encode("utf-8")  # lone surrogates
        duplicate = duplicate_key(text) if may_hold_duplicates(text, compact) else None
    except (ValueError, UnicodeError, RecursionError) as exc:
        raise InvalidInput(
            f"The body is not valid JSON: {_short(exc)}", {"body": ["Invalid."]}
        ) from None
    if not isinstance(payload, dict):
        raise InvalidInput("The event must be a JSON object.", {"body": ["Must be an object."]})
    if duplicate is not None:  # which one would a rule read? Parsers disagree (core.jsonkeys)
        sent_twice = f"it sends key {duplicate[1]!r} twice in one object ({duplicate[0]})."
        raise InvalidInput(f"The event cannot be read: {sent_twice}", {"body": [sent_twice]})
    problem = storable_problem(payload)
    if problem:
        raise InvalidInput(f"The event cannot be stored: {problem}", {"body": [problem]})
    return payload


def _no_constants(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    """A JSON number as a float; 1e400 (infinite here) is refused, no database holds it."""
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text[:20]} is out of range")
    return value


def _short(exc: Exception) -> str:
    return str(exc)[:200] if not isinstance(exc, RecursionError) else "nested too deeply"


def _type_in(payload: dict[str, Any]) -> str:
    """The type a payload names (Standard Webhooks' `type`), else "event"."""
    value = payload.get("type")
    if isinstance(value, str) and value.strip() and len(value) <= 100:
        return value.strip()
    return "event"


def publish_evaluation(event_ids: list[str]) -> int:
    """Hand events to the workers (never raises; the events sweep re-publishes)."""
    return publish(tasknames.EVALUATE_EVENT, event_ids)  # by name: triggers.tasks runs it
