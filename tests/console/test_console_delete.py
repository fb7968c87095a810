"""Deleting a breakpoint by hand: admins only, through services.breakpoint_delete.

Its audit events cascade away with it, so the deletion is recorded where it survives: a
WARNING line on the `breakpoints.audit` logger once it commits (and, from the console,
Django admin's own LogEntry, which names the object by id and keeps no foreign key to it).
"""

import json
import logging
from unittest import mock

import pytest
from django.contrib.admin.models import DELETION, LogEntry
from django.contrib.admin.utils import quote
from django.db import transaction

from audit.models import Event
from breakpoints import services
from breakpoints.models import Breakpoint, Feedback
from core.actors import Actor
from core.exceptions import Forbidden, NotFound
from tests.support.console import QUEUE_URL, review_url

AUDIT_LOGGER = "breakpoints.audit"


def _delete_url(bp: Breakpoint) -> str:
    return f"{QUEUE_URL}{quote(bp.pk)}/delete/"


def _deletion_records(caplog) -> list[dict]:
    prefix = "Breakpoint deleted: "
    return [
        json.loads(record.getMessage().removeprefix(prefix))
        for record in caplog.records
        if record.name == AUDIT_LOGGER and record.getMessage().startswith(prefix)
    ]


@pytest.fixture
def commented(make_breakpoint, console_reviewer):
    """A waiting breakpoint with a comment: events and feedback to cascade."""
    bp = make_breakpoint(run_id="run-7")
    services.feedback_add(
        breakpoint_id=bp.pk, actor=Actor.for_user(console_reviewer), comment="Looks odd"
    )
    return bp


def test_the_review_page_offers_admins_the_delete_confirmation(admin_browser, commented):
    page = admin_browser.get(review_url(commented.pk)).content.decode()
    assert f'href="{_delete_url(commented)}"' in page
    confirm = admin_browser.get(_delete_url(commented))
    assert confirm.status_code == 200
    assert confirm.context["perms_lacking"] == set()  # events go without per-model rights


def test_admin_deletes_through_the_service_and_the_deletion_is_logged(
    admin_browser, console_admin, commented, caplog, django_capture_on_commit_callbacks
):
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    with (
        mock.patch.object(
            services, "breakpoint_delete", wraps=services.breakpoint_delete
        ) as delete,
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = admin_browser.post(_delete_url(commented), {"post": "yes"})

    assert response.status_code == 302
    delete.assert_called_once()
    assert delete.call_args.kwargs["breakpoint_id"] == commented.pk
    assert delete.call_args.kwargs["actor"].user == console_admin
    assert not Breakpoint.objects.filter(pk=commented.pk).exists()
    assert not Event.objects.filter(breakpoint_id=commented.pk).exists()
    assert not Feedback.objects.filter(breakpoint_id=commented.pk).exists()

    [record] = _deletion_records(caplog)
    assert record["id"] == commented.pk
    assert (record["key"], record["agentId"], record["runId"]) == (
        commented.key,
        "agent-a",
        "run-7",
    )
    assert (record["status"], record["deletedBy"]) == ("waiting", "adam")
    assert record["deleted"]["breakpoints.Breakpoint"] == 1
    assert record["deleted"]["audit.Event"] == 2  # created, feedback
    assert record["deleted"]["breakpoints.Feedback"] == 1
    [line] = [r for r in caplog.records if r.name == AUDIT_LOGGER]
    assert line.levelno == logging.WARNING  # kept even at LOG_LEVEL=WARNING
    assert line.breakpoint_id == commented.pk

    # The console's own trace outlives the row too.
    entry = LogEntry.objects.get(object_id=commented.pk)
    assert (entry.action_flag, entry.user) == (DELETION, console_admin)


def test_bulk_delete_goes_through_the_service_for_each(
    admin_browser, make_breakpoint, caplog, django_capture_on_commit_callbacks
):
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    keep, first, second = make_breakpoint(), make_breakpoint(), make_breakpoint()
    with (
        mock.patch.object(
            services, "breakpoint_delete", wraps=services.breakpoint_delete
        ) as delete,
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = admin_browser.post(
            QUEUE_URL,
            {"action": "delete_selected", "_selected_action": [first.pk, second.pk], "post": "yes"},
        )

    assert response.status_code == 302
    assert delete.call_count == 2
    assert list(Breakpoint.objects.values_list("pk", flat=True)) == [keep.pk]
    assert {record["id"] for record in _deletion_records(caplog)} == {first.pk, second.pk}


def test_reviewers_cannot_delete_and_do_not_see_the_link(reviewer_browser, commented):
    assert b"Delete" not in reviewer_browser.get(review_url(commented.pk)).content
    assert reviewer_browser.post(_delete_url(commented), {"post": "yes"}).status_code == 403
    assert Breakpoint.objects.filter(pk=commented.pk).exists()


@pytest.mark.parametrize(
    "actor",
    [
        pytest.param(lambda users: Actor.for_user(users["reviewer"]), id="reviewer"),
        pytest.param(lambda users: Actor.for_agent("agent-a"), id="its-own-agent"),
        pytest.param(lambda users: Actor.system("ttl"), id="system"),
    ],
)
def test_only_admins_may_delete(console_reviewer, commented, caplog, actor):
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    with pytest.raises(Forbidden):
        services.breakpoint_delete(
            breakpoint_id=commented.pk, actor=actor({"reviewer": console_reviewer})
        )
    assert Breakpoint.objects.filter(pk=commented.pk).exists()
    assert Event.objects.filter(breakpoint_id=commented.pk).count() == 2
    assert not _deletion_records(caplog)


def test_a_missing_breakpoint_is_not_found(console_admin):
    with pytest.raises(NotFound):
        services.breakpoint_delete(breakpoint_id="bp-missing", actor=Actor.for_user(console_admin))


def test_the_service_returns_what_went_and_logs_the_reason(
    console_admin, commented, caplog, django_capture_on_commit_callbacks
):
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    with django_capture_on_commit_callbacks(execute=True):
        deleted = services.breakpoint_delete(
            breakpoint_id=commented.pk, actor=Actor.for_user(console_admin), reason="test data"
        )
    assert deleted["breakpoints.Breakpoint"] == 1 and deleted["audit.Event"] == 2
    [record] = _deletion_records(caplog)
    assert (record["reason"], record["deleted"]) == ("test data", deleted)


def test_nothing_is_logged_when_the_deletion_rolls_back(
    console_admin, commented, caplog, django_capture_on_commit_callbacks
):
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        with pytest.raises(RuntimeError), transaction.atomic():
            services.breakpoint_delete(
                breakpoint_id=commented.pk, actor=Actor.for_user(console_admin)
            )
            raise RuntimeError("the caller's transaction fails")
    assert callbacks == []
    assert not _deletion_records(caplog)
    assert Breakpoint.objects.filter(pk=commented.pk).exists()
