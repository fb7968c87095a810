"""GET /metrics: who may scrape, the domain gauges read from the database, request metrics."""

from datetime import timedelta

import httpx
import pytest
from django.utils import timezone
from prometheus_client import REGISTRY

from accounts.tokens import token_create_for_agent
from audit.models import Event, EventType
from breakpoints.waiting.hub import stop_hub
from notifications.models import Delivery, DeliveryStatus, Webhook
from tests.support.aio import run_async
from tests.support.metrics import scrape, value

OUTSIDER = "203.0.113.9"


@pytest.fixture
def metrics_token(settings) -> str:
    settings.BPM_METRICS_TOKEN = "scrape-secret-1234"
    return settings.BPM_METRICS_TOKEN


@pytest.mark.django_db
class TestAccess:
    def test_an_address_outside_the_allowlist_without_a_token_is_refused(
        self, client, metrics_token
    ):
        response = client.get("/metrics", REMOTE_ADDR=OUTSIDER)
        assert response.status_code == 403
        assert b"bpm_" not in response.content

    def test_a_wrong_token_is_refused(self, client, metrics_token):
        response = client.get(
            "/metrics", REMOTE_ADDR=OUTSIDER, HTTP_AUTHORIZATION="Bearer not-the-token"
        )
        assert response.status_code == 403

    def test_no_token_configured_means_no_token_is_accepted(self, client, settings):
        settings.BPM_METRICS_TOKEN = ""
        response = client.get("/metrics", REMOTE_ADDR=OUTSIDER, HTTP_AUTHORIZATION="Bearer ")
        assert response.status_code == 403

    def test_the_token_opens_it_from_any_address(self, client, metrics_token):
        samples = scrape(client, REMOTE_ADDR=OUTSIDER, HTTP_AUTHORIZATION=f"Bearer {metrics_token}")
        assert value(samples, "bpm_domain_scrape_ok") == 1

    def test_loopback_is_allowed_by_default(self, client):
        assert value(scrape(client, REMOTE_ADDR="127.0.0.1"), "bpm_domain_scrape_ok") == 1
        assert value(scrape(client, REMOTE_ADDR="::1"), "bpm_domain_scrape_ok") == 1

    def test_an_allowlisted_network_is_allowed(self, client, settings):
        settings.BPM_METRICS_ALLOW = ["10.0.0.0/8", "192.0.2.7"]
        assert client.get("/metrics", REMOTE_ADDR="10.20.30.40").status_code == 200
        assert client.get("/metrics", REMOTE_ADDR="192.0.2.7").status_code == 200
        assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 403

    def test_a_forged_forwarded_address_does_not_pass_without_trusted_proxies(
        self, client, settings
    ):
        settings.BPM_NUM_PROXIES = 0
        response = client.get("/metrics", REMOTE_ADDR=OUTSIDER, HTTP_X_FORWARDED_FOR="127.0.0.1")
        assert response.status_code == 403

    def test_it_answers_whatever_the_host_like_the_probes(self, client, settings):
        """Scrapers address pods by IP; /metrics must not fail on ALLOWED_HOSTS."""
        settings.ALLOWED_HOSTS = ["bpm.example.com"]
        assert client.get("/metrics", HTTP_HOST="10.1.2.3:8000").status_code == 200


@pytest.mark.django_db
class TestDomainGauges:
    def test_waiting_breakpoints_and_the_oldest_waiting_age(self, client, make_breakpoint):
        first = make_breakpoint()
        make_breakpoint()
        type(first).objects.filter(pk=first.pk).update(
            created_at=timezone.now() - timedelta(minutes=10)
        )

        samples = scrape(client)

        assert value(samples, "bpm_breakpoints_waiting") == 2
        assert value(samples, "bpm_breakpoints_oldest_waiting_age_seconds") >= 600

    def test_nothing_waiting_reads_zero(self, client, make_breakpoint):
        samples = scrape(client)
        assert value(samples, "bpm_breakpoints_waiting") == 0
        assert value(samples, "bpm_breakpoints_oldest_waiting_age_seconds") == 0

    def test_a_decided_breakpoint_no_longer_counts_as_waiting(self, client, make_breakpoint):
        bp = make_breakpoint()
        make_breakpoint()
        type(bp).objects.filter(pk=bp.pk).update(status="released")
        assert value(scrape(client), "bpm_breakpoints_waiting") == 1

    def test_the_outbox_backlog_lag_retries_and_dead_letters(self, client, make_breakpoint):
        bp = make_breakpoint()
        webhook = Webhook.objects.create(url="https://hooks.example.com/x")
        now = timezone.now()

        def delivery(**fields):
            fields.setdefault("next_attempt_at", now)
            return Delivery.objects.create(
                webhook=webhook, breakpoint=bp, event_type="created", body={}, **fields
            )

        delivery(next_attempt_at=now - timedelta(seconds=90))  # due, never tried
        delivery(attempts=2, next_attempt_at=now + timedelta(minutes=5))  # backing off
        delivery(status=DeliveryStatus.DELIVERED, attempts=1, delivered_at=now)
        delivery(status=DeliveryStatus.FAILED, attempts=8)

        samples = scrape(client)

        assert value(samples, "bpm_webhook_outbox_pending") == 2
        assert value(samples, "bpm_webhook_outbox_lag_seconds") >= 90
        assert value(samples, "bpm_webhook_deliveries_retrying") == 1
        assert value(samples, "bpm_webhook_dead_letters") == 1

    def test_an_empty_outbox_has_no_lag(self, client):
        samples = scrape(client)
        assert value(samples, "bpm_webhook_outbox_pending") == 0
        assert value(samples, "bpm_webhook_outbox_lag_seconds") == 0

    def test_a_pending_delivery_is_backlog_with_a_lag(self, client, make_breakpoint):
        bp = make_breakpoint()
        webhook = Webhook.objects.create(url="https://hooks.example.com/x")
        Delivery.objects.create(
            webhook=webhook,
            breakpoint=bp,
            event_type="created",
            body={},
            next_attempt_at=timezone.now() - timedelta(seconds=1),
        )
        samples = scrape(client)
        assert value(samples, "bpm_webhook_outbox_pending") == 1
        assert value(samples, "bpm_webhook_outbox_lag_seconds") > 0

    def test_events_of_the_last_hour_by_type(self, client, make_breakpoint, reviewer_client):
        released = make_breakpoint()
        make_breakpoint()
        response = reviewer_client.post(
            f"/api/breakpoints/{released.pk}/feedback",
            {"comment": "Go", "release": True, "approved": True},
            format="json",
        )
        assert response.status_code in (200, 201), response.content
        old = make_breakpoint()
        Event.objects.filter(breakpoint=old).update(timestamp=timezone.now() - timedelta(hours=2))

        samples = scrape(client)

        assert value(samples, "bpm_events_last_hour", type=EventType.CREATED) == 2
        assert value(samples, "bpm_events_last_hour", type=EventType.RELEASED) == 1
        assert value(samples, "bpm_events_last_hour", type=EventType.EXPIRED) == 0
        assert value(samples, "bpm_events_last_hour_capped") == 0

    def test_this_process_long_polls_and_listener_are_reported(self, client):
        samples = scrape(client)
        # No ASGI lifespan in this test: no hub, hence no waits and no listener.
        assert value(samples, "bpm_longpolls_open") == 0
        assert value(samples, "bpm_waiting_listener_up") == 0


@pytest.mark.django_db
class TestRequestMetrics:
    def test_a_request_is_counted_by_route_method_and_status_class(self, agent_client, client):
        labels = {"route": "breakpoint-list", "method": "GET", "status": "2xx"}
        before = REGISTRY.get_sample_value("bpm_http_request_duration_seconds_count", labels) or 0

        assert agent_client.get("/api/breakpoints").status_code == 200

        after = REGISTRY.get_sample_value("bpm_http_request_duration_seconds_count", labels)
        assert after == before + 1
        samples = scrape(client)
        assert value(samples, "bpm_http_request_duration_seconds_count", **labels) == after

    def test_errors_are_counted_by_status_class(self, agent_client):
        labels = {"route": "breakpoint-detail", "method": "GET", "status": "4xx"}
        before = REGISTRY.get_sample_value("bpm_http_request_duration_seconds_count", labels) or 0
        assert agent_client.get("/api/breakpoints/bp-missing").status_code == 404
        after = REGISTRY.get_sample_value("bpm_http_request_duration_seconds_count", labels)
        assert after == before + 1

    def test_unknown_paths_share_one_label(self, client):
        labels = {"route": "unmatched", "method": "GET", "status": "4xx"}
        before = REGISTRY.get_sample_value("bpm_http_request_duration_seconds_count", labels) or 0
        client.get("/no/such/page/12345")
        client.get("/no/such/page/67890")
        after = REGISTRY.get_sample_value("bpm_http_request_duration_seconds_count", labels)
        assert after == before + 2


@pytest.mark.django_db(transaction=True)
def test_status_requests_served_by_the_waiting_handler_are_counted(settings):
    from config.asgi import application

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    token = token_create_for_agent(agent_id="agent-a")[1]
    before = REGISTRY.get_sample_value("bpm_status_requests_total", {"kind": "one"}) or 0

    async def main() -> httpx.Response:
        transport = httpx.ASGITransport(app=application)
        try:
            async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
                return await c.get(
                    "/api/breakpoints/bp-missing/status",
                    headers={"Authorization": f"Bearer {token}"},
                )
        finally:
            await stop_hub()

    assert run_async(main()).status_code == 404
    assert REGISTRY.get_sample_value("bpm_status_requests_total", {"kind": "one"}) == before + 1
