"""Prometheus metrics at /metrics: requests by route, this process's waits, and the domain.

Three kinds of series:

- Request metrics, recorded by RequestMetricsMiddleware (a histogram by resolved route,
  method and status class) and by the status path's ASGI handler (a counter).
- This process's long-poll state (open waits, wake-up listener), from hub_state().
- Domain gauges, read from the database by DomainCollector when /metrics is scraped,
  with bounded, indexed queries only (capped counts, first row of an index): they are the
  same whichever process answers the scrape. Among them, the expected decision time over
  all human decisions (the aggregate behind expectedDecision).
- Expected vs actual decision time, recorded by the decision service on each human
  release (breakpoints.representation.expected_decision): a histogram of the time it took, and one of that
  time over the p50 it was expected to take, by basis (key, experts, all, none).

Under gunicorn, set PROMETHEUS_MULTIPROC_DIR to an empty directory writable by the web
processes: each process then writes its series to files there and any of them answers a
scrape with the sum (gunicorn.conf.py empties it at start and drops dead workers' gauges).
Without it (`make run`) the series are this process's own.
"""

import hmac
import ipaddress
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta
from functools import lru_cache

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from psycopg_pool import PoolTimeout

from accounts.authentication import bearer_credentials
from audit.models import Event, EventType
from breakpoints.models import Breakpoint, DecisionBasis, DecisionTimeStat
from breakpoints.waiting.metrics import (
    ensure_process_gauges_refresher,
    multiprocess_enabled,
    refresh_process_gauges,
)
from core.choices import Status
from infra.ratelimits import client_address
from notifications.models import Delivery, DeliveryStatus
from policies.shadow import shadow_counts_of_shadow_rules

logger = logging.getLogger(__name__)

# Counts stop at this many (the gauge then reads CAP): an alert fires long before, and a
# scrape must never count a fleet's whole table.
COUNT_CAP = 10_000
# Events by type are counted among at most this many newest events (by primary key).
EVENT_WINDOW = 10_000
EVENT_WINDOW_SECONDS = 3600
# A waiting breakpoint this long past its expiresAt counts as overdue: several sweeps
# (BPM_TTL_SWEEP_SECONDS, 10 s by default) should have ended it.
OVERDUE_GRACE_SECONDS = 120


# --- process metrics -----------------------------------------------------------------

REQUEST_DURATION = Histogram(
    "bpm_http_request_duration_seconds",
    "Django requests by resolved route name, method and status class (2xx, 4xx, 5xx).",
    ["route", "method", "status"],
)


# --- domain metrics, read at scrape time -------------------------------------------


def _capped_count(queryset, column: str) -> int:
    # Selecting only the indexed column lets PostgreSQL count from the partial index.
    return queryset.order_by().values(column)[: COUNT_CAP + 1].count()


class DomainCollector(Collector):
    """Gauges of the database's state, computed on each scrape."""

    def describe(self) -> Iterable:
        return []  # no query when registered

    def collect(self) -> Iterator[GaugeMetricFamily]:
        ok = GaugeMetricFamily(
            "bpm_domain_scrape_ok",
            "1 when the domain gauges could be read from the database on this scrape.",
        )
        try:
            families = list(self._read())
        except (DatabaseError, PoolTimeout):
            logger.warning("Metrics: could not read the domain gauges", exc_info=True)
            ok.add_metric([], 0)
            yield ok
            return
        ok.add_metric([], 1)
        yield ok
        yield from families

    def _read(self) -> Iterator[GaugeMetricFamily]:
        now = timezone.now()
        yield from _waiting_gauges(now)
        yield from _outbox_gauges(now)
        yield from _event_gauges(now)
        yield from _shadow_gauges()
        yield from _decision_time_gauges()


def _waiting_gauges(now: datetime) -> Iterator[GaugeMetricFamily]:
    waiting = Breakpoint.objects.filter(status=Status.WAITING)
    yield _gauge(
        "bpm_breakpoints_waiting",
        f"Breakpoints waiting for a decision (counted up to {COUNT_CAP}).",
        _capped_count(waiting, "created_at"),
    )
    oldest = waiting.order_by("created_at").values_list("created_at", flat=True).first()
    yield _gauge(
        "bpm_breakpoints_oldest_waiting_age_seconds",
        "Age of the oldest waiting breakpoint (0 when none waits).",
        (now - oldest).total_seconds() if oldest else 0.0,
    )
    # Past expiresAt by more than a few sweeps: the sweep is not running, or skips the row
    # (one whose timeout policy cannot end it: the worker logs a warning naming it).
    stuck = waiting.filter(expires_at__lt=now - timedelta(seconds=OVERDUE_GRACE_SECONDS))
    yield _gauge(
        "bpm_breakpoints_overdue",
        f"Waiting breakpoints past their expiresAt by more than {OVERDUE_GRACE_SECONDS} s: "
        f"ones the TTL sweep skipped, or no sweep runs (counted up to {COUNT_CAP}).",
        _capped_count(stuck, "expires_at"),
    )


def _outbox_gauges(now: datetime) -> Iterator[GaugeMetricFamily]:
    pending = Delivery.objects.filter(status=DeliveryStatus.PENDING)
    yield _gauge(
        "bpm_webhook_outbox_pending",
        f"Webhook deliveries not yet delivered nor given up (counted up to {COUNT_CAP}).",
        _capped_count(pending, "next_attempt_at"),
    )
    due = pending.order_by("next_attempt_at").values_list("next_attempt_at", flat=True).first()
    yield _gauge(
        "bpm_webhook_outbox_lag_seconds",
        "How long the most overdue pending delivery has been due (queue lag; 0 when "
        "nothing is due). For a first attempt this is its age.",
        max(0.0, (now - due).total_seconds()) if due else 0.0,
    )
    yield _gauge(
        "bpm_webhook_deliveries_retrying",
        f"Pending deliveries that failed at least once (counted up to {COUNT_CAP}).",
        _capped_count(pending.filter(attempts__gt=0), "next_attempt_at"),
    )
    failed = Delivery.objects.filter(status=DeliveryStatus.FAILED)
    yield _gauge(
        "bpm_webhook_dead_letters",
        f"Deliveries given up after every attempt (counted up to {COUNT_CAP}).",
        _capped_count(failed, "pk"),
    )


def _event_gauges(now: datetime) -> Iterator[GaugeMetricFamily]:
    # The newest EVENT_WINDOW events by primary key (an index range), those of the last
    # hour counted by type: exact unless more than EVENT_WINDOW events came in an hour.
    floor = Event.objects.order_by("-pk").values_list("pk", flat=True)[EVENT_WINDOW - 1 :]
    floor_pk = floor.first()
    recent = Event.objects.filter(timestamp__gte=now - timedelta(seconds=EVENT_WINDOW_SECONDS))
    if floor_pk is not None:
        recent = recent.filter(pk__gte=floor_pk)
    counts = recent.order_by().values("type").annotate(n=Count("pk")).values_list("type", "n")
    by_type: dict[str, int] = dict(counts)
    events = GaugeMetricFamily(
        "bpm_events_last_hour",
        "Audit events (transitions, comments, notifications) of the last hour, by type.",
        labels=["type"],
    )
    for event_type in EventType.values:
        events.add_metric([event_type], by_type.get(event_type, 0))
    yield events
    capped = floor_pk is not None and by_type and sum(by_type.values()) >= EVENT_WINDOW
    yield _gauge(
        "bpm_events_last_hour_capped",
        f"1 when more than {EVENT_WINDOW} events came in the last hour (the counts by "
        "type are then a lower bound).",
        1 if capped else 0,
    )


def _shadow_gauges() -> Iterator[GaugeMetricFamily]:
    # Labelled by the rules in shadow mode now (a promoted or removed rule leaves the
    # series): as many series as shadow rules, counted in one grouped query through the
    # (rule, outcome) index.
    counts = shadow_counts_of_shadow_rules()
    families = {
        "fires": GaugeMetricFamily(
            "bpm_shadow_rule_fires",
            "Breakpoints each shadow rule would have auto-approved (they waited for a person).",
            labels=["rule"],
        ),
        "agreed": GaugeMetricFamily(
            "bpm_shadow_rule_agreed",
            "Of those, the ones a person then approved (agreed with the shadow rule).",
            labels=["rule"],
        ),
        "disagreed": GaugeMetricFamily(
            "bpm_shadow_rule_disagreed",
            "Of those, the ones a person then rejected (disagreed with the shadow rule).",
            labels=["rule"],
        ),
    }
    for rule_id, counted in counts.items():
        for name, family in families.items():
            family.add_metric([rule_id], getattr(counted, name))
    yield from families.values()


def _decision_time_gauges() -> Iterator[GaugeMetricFamily]:
    """The p50 and p90 a breakpoint with no figures of its own is expected to take (over
    all human decisions of the last 90 days); no sample while fewer than 20 back them."""
    overall = (
        DecisionTimeStat.objects.filter(basis=DecisionBasis.ALL)
        .values_list("p50_seconds", "p90_seconds", "samples")
        .first()
    )
    expected = GaugeMetricFamily(
        "bpm_decision_time_expected_seconds",
        "Expected decision time over all human decisions of the last 90 days, by quantile "
        "(compare bpm_decision_seconds, the actual times).",
        labels=["quantile"],
    )
    samples = GaugeMetricFamily(
        "bpm_decision_time_expected_samples",
        "How many human decisions bpm_decision_time_expected_seconds comes from (0: too few).",
    )
    if overall is not None:
        expected.add_metric(["0.5"], overall[0])
        expected.add_metric(["0.9"], overall[1])
    samples.add_metric([], overall[2] if overall is not None else 0)
    yield expected
    yield samples


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


_domain_collector = DomainCollector()


class _DefaultRegistry(Collector):
    """This process's registry (requests, waits, Python runtime) when not multiprocess."""

    def collect(self) -> Iterable:
        return REGISTRY.collect()


def scrape() -> bytes:
    """The exposition text of a scrape."""
    refresh_process_gauges()
    registry = CollectorRegistry(auto_describe=False)
    if multiprocess_enabled():
        MultiProcessCollector(registry)
    else:
        registry.register(_DefaultRegistry())
    registry.register(_domain_collector)
    return generate_latest(registry)


# --- the endpoint --------------------------------------------------------------------

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=8)
def _networks(entries: tuple[str, ...]) -> tuple[IPNetwork, ...]:
    networks = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError as exc:
            raise ImproperlyConfigured(
                f"BPM_METRICS_ALLOW: {entry!r} is not an IP or CIDR"
            ) from exc
    return tuple(networks)


def address_allowed(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in network for network in _networks(tuple(settings.BPM_METRICS_ALLOW)))


def token_matches(request: HttpRequest) -> bool:
    expected = settings.BPM_METRICS_TOKEN
    given = bearer_credentials(request.META.get("HTTP_AUTHORIZATION", ""))
    if not expected or not given:
        return False
    return hmac.compare_digest(given.encode(), expected.encode())


def metrics_view(request: HttpRequest) -> HttpResponse:
    """GET /metrics: with BPM_METRICS_TOKEN as a Bearer token, or from BPM_METRICS_ALLOW."""
    if request.method not in ("GET", "HEAD"):
        return HttpResponse("Method not allowed.\n", status=405, content_type="text/plain")
    if not (token_matches(request) or address_allowed(client_address(request))):
        return HttpResponse("Forbidden.\n", status=403, content_type="text/plain")
    return HttpResponse(scrape(), content_type=CONTENT_TYPE_LATEST)


# --- request metrics -----------------------------------------------------------------

# Answered before URL resolution, by HealthProbeMiddleware.
_UNRESOLVED_ROUTES = {"/healthz": "healthz", "/readyz": "readyz", "/metrics": "metrics"}


class RequestMetricsMiddleware:
    """Time every Django request into bpm_http_request_duration_seconds by route name.

    Placed right after RequestIDMiddleware, so refused bodies (413) and probes (answered
    by HealthProbeMiddleware, after it) count too.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        ensure_process_gauges_refresher()
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        if match is not None:
            route = match.view_name or match.route
        else:
            route = _UNRESOLVED_ROUTES.get(request.path_info, "unmatched")
        method = request.method if request.method in _METHODS else "other"
        REQUEST_DURATION.labels(route, method, f"{response.status_code // 100}xx").observe(
            time.perf_counter() - started
        )
        return response


_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
