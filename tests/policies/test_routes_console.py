"""Notification routes in the console (admins only): add, change and remove through the
route services; JSON typed in textareas; the services' refusals come back as form errors
on the field they concern; nothing is written by a refused form."""

import json

import pytest

from core.actors import Actor
from policies.models import NotificationRoute
from policies.routes import route_add
from tests.support.console import SECTIONS_URL, XSS, messages
from tests.support.factories import AdminFactory

ROUTES_URL = "/admin/policies/notificationroute/"
SLACK = {"kind": "slack", "channel": "C0123"}
OPS_MAIL = {"kind": "email", "to": ["ops@example.com"]}


def form(**fields) -> dict:
    data = {
        "name": "deploys",
        "pattern": "deploy.*",
        "channels": json.dumps([SLACK]),
        "defaults": "",
        "enabled": "on",
    }
    data.update(fields)
    return {key: value for key, value in data.items() if value is not None}


def stored(name: str = "deploys", **fields) -> NotificationRoute:
    return route_add(
        actor=Actor.for_user(AdminFactory(username="route-admin")),
        name=name,
        pattern=fields.pop("pattern", "deploy.*"),
        channels=fields.pop("channels", [SLACK]),
        **fields,
    )


# --- add, list, change, remove ------------------------------------------------------------


def test_admin_adds_a_route_through_the_form(admin_browser):
    page = admin_browser.get(ROUTES_URL + "add/")
    assert page.status_code == 200
    assert "C0123" in page.content.decode()  # the example in the help text

    response = admin_browser.post(
        ROUTES_URL + "add/",
        form(
            pattern="deploy.*(TAGS contains 'prod')",
            channels=json.dumps([SLACK, OPS_MAIL, {"kind": "email", "to": "experts"}]),
            defaults='{"onTimeout": "escalate", "escalateTo": "ops-lead"}',
        ),
    )

    assert response.status_code == 302, response.context and response.context["form"].errors
    assert response["Location"] == ROUTES_URL
    route = NotificationRoute.objects.get()
    assert route.pattern == "deploy.*(tags contains 'prod')"
    assert route.channels == [SLACK, OPS_MAIL, {"kind": "email", "to": "experts"}]
    assert route.defaults == {"onTimeout": "escalate", "escalateTo": "ops-lead"}
    assert (route.enabled, route.created_by) == (True, "adam")
    assert any("deploys" in message for message in messages(response))


def test_the_list_shows_name_pattern_channels_and_enabled(admin_browser):
    stored(channels=[SLACK, {"kind": "email", "to": "experts"}, {"kind": "jira", "project": "OPS"}])
    stored("quiet", pattern="*(expert = 'owner')", channels=[OPS_MAIL], enabled=False)
    many = [f"u{n}@example.com" for n in range(5)]
    stored("many", pattern="many.*", channels=[{"kind": "email", "to": many}])

    html = admin_browser.get(ROUTES_URL).content.decode()

    assert "<code>deploy.*</code>" in html
    assert "slack C0123; email experts; jira OPS" in html
    assert "email ops@example.com" in html
    assert "email u0@example.com, u1@example.com, u2@example.com (+2)" in html
    assert "<code>*(expert = &#x27;owner&#x27;)</code>" in html
    assert 'alt="False"' in html and 'alt="True"' in html  # the enabled column


def test_an_unchecked_enabled_and_no_defaults_add_a_disabled_route(admin_browser):
    admin_browser.post(ROUTES_URL + "add/", form(enabled=None))

    route = NotificationRoute.objects.get()
    assert (route.enabled, route.defaults) == (False, {})


def test_admin_changes_a_route(admin_browser):
    route = stored(defaults={"remindEverySeconds": 600})
    page = admin_browser.get(f"{ROUTES_URL}{route.pk}/change/")
    assert page.status_code == 200
    initial = page.context["form"]
    assert json.loads(initial["channels"].value()) == [SLACK]
    assert json.loads(initial["defaults"].value()) == {"remindEverySeconds": 600}

    response = admin_browser.post(
        f"{ROUTES_URL}{route.pk}/change/",
        form(name="deploys-prod", channels=json.dumps([OPS_MAIL]), enabled=None),
    )

    assert response.status_code == 302
    route.refresh_from_db()
    assert (route.name, route.channels, route.defaults, route.enabled) == (
        "deploys-prod",
        [OPS_MAIL],
        {},
        False,
    )


def test_admin_removes_a_route(admin_browser):
    keep, gone = stored("keep"), stored("gone")
    assert admin_browser.get(f"{ROUTES_URL}{gone.pk}/delete/").status_code == 200

    response = admin_browser.post(f"{ROUTES_URL}{gone.pk}/delete/", {"post": "yes"})

    assert response.status_code == 302
    assert list(NotificationRoute.objects.values_list("pk", flat=True)) == [keep.pk]


# --- refusals ------------------------------------------------------------------------------


REFUSED = {
    "not JSON": (form(channels="[{kind: slack}]"), "channels", "Not valid JSON"),
    "no channels": (form(channels=""), "channels", "required"),
    "an empty list": (form(channels="[]"), "channels", "1 to 20 channels"),
    "an unknown kind": (
        form(channels=json.dumps([SLACK, {"kind": "fax"}])),
        "channels",
        "channels[1]: Each channel is an object",
    ),
    "a header in an address": (
        form(channels=json.dumps([{"kind": "email", "to": ["a@x.io\r\nBcc: e@evil.test"]}])),
        "channels",
        "channels[0]: An email channel needs",
    ),
    "NUL in a channel": (
        form(channels=json.dumps([{"kind": "slack", "channel": "C\x00"}])),
        "channels",
        "NUL",
    ),
    "a lone surrogate in a channel": (
        form(channels='[{"kind": "slack", "channel": "C\\ud800"}]'),
        "channels",
        "lone surrogate",
    ),
    "a lone surrogate in a default": (
        form(defaults='{"escalateTo": "x\\udfff"}'),
        "defaults",
        "lone surrogate",
    ),
    "too long": (form(channels="[" * 200_000 + "]" * 200_000), "channels", "At most"),
    "too deep for the parser": (form(channels="[" * 20_000 + "]" * 20_000), "channels", "JSON"),
    "a bad default": (
        form(defaults='{"onTimeout": "explode"}'),
        "defaults",
        "defaults.onTimeout: Must be one of",
    ),
    "an unknown default": (form(defaults='{"ttl": 5}'), "defaults", "Must be an object"),
    "defaults a list": (form(defaults="[]"), "defaults", "Must be an object"),
    "a null default": (form(defaults='{"onTimeout": null}'), "defaults", "leave the key out"),
    "a malformed pattern": (form(pattern="deploy.*(tags"), "pattern", "position"),
    "a blank name": (form(name="  "), "name", "required"),
}


@pytest.mark.parametrize(("data", "field", "text"), REFUSED.values(), ids=REFUSED.keys())
def test_refusals_are_form_errors_on_their_field(admin_browser, data, field, text):
    response = admin_browser.post(ROUTES_URL + "add/", data)

    assert response.status_code == 200
    errors = response.context["form"].errors
    assert any(text in error for error in errors.get(field, [])), errors
    assert not NotificationRoute.objects.exists()


def test_every_channel_problem_is_shown_at_once(admin_browser):
    bad = [{"kind": "fax"}, SLACK, {"kind": "jira"}]

    response = admin_browser.post(ROUTES_URL + "add/", form(channels=json.dumps(bad)))

    errors = response.context["form"].errors["channels"]
    assert [error.split(":")[0] for error in errors] == ["channels[0]", "channels[2]"]
    assert "channels[2]" in response.content.decode()


def test_a_taken_name_is_a_form_error_and_the_typed_json_stays(admin_browser):
    stored()
    typed = json.dumps([OPS_MAIL])

    response = admin_browser.post(ROUTES_URL + "add/", form(channels=typed))

    assert response.context["form"].errors["name"] == ["Already taken."]
    assert response.context["form"]["channels"].value() == typed
    assert NotificationRoute.objects.count() == 1


def test_a_taken_name_is_shown_with_every_other_problem(admin_browser):
    stored()
    data = form(
        pattern="deploy.*(tags",
        channels=json.dumps([SLACK, {"kind": "fax"}]),
        defaults='{"onTimeout": "explode"}',
    )

    response = admin_browser.post(ROUTES_URL + "add/", data)

    errors = response.context["form"].errors
    assert errors["name"] == ["Already taken."]
    assert "position" in errors["pattern"][0]
    assert errors["channels"][0].startswith("channels[1]: ")
    assert errors["defaults"][0].startswith("defaults.onTimeout: ")
    assert NotificationRoute.objects.count() == 1


def test_a_refused_change_changes_nothing(admin_browser):
    route = stored()
    stored("other")

    response = admin_browser.post(f"{ROUTES_URL}{route.pk}/change/", form(name="other"))

    assert response.context["form"].errors["name"] == ["Already taken."]
    route.refresh_from_db()
    assert route.name == "deploys"


def test_hostile_text_is_shown_inert(admin_browser):
    stored(name=XSS, channels=[{"kind": "slack", "channel": XSS}])

    html = admin_browser.get(ROUTES_URL).content.decode()

    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


# --- admins only ---------------------------------------------------------------------------


def test_reviewers_cannot_see_or_write_routes(reviewer_browser):
    route = stored()

    for url in (ROUTES_URL, ROUTES_URL + "add/", f"{ROUTES_URL}{route.pk}/change/"):
        assert reviewer_browser.get(url).status_code == 403, url
    assert reviewer_browser.post(ROUTES_URL + "add/", form(name="x")).status_code == 403
    assert reviewer_browser.post(f"{ROUTES_URL}{route.pk}/change/", form(name="x")).status_code == 403  # fmt: skip
    assert reviewer_browser.post(f"{ROUTES_URL}{route.pk}/delete/", {"post": "yes"}).status_code == 403  # fmt: skip
    assert list(NotificationRoute.objects.values_list("name", flat=True)) == ["deploys"]
    assert ROUTES_URL.encode() not in reviewer_browser.get(SECTIONS_URL).content


def test_admins_find_routes_in_the_sections(admin_browser):
    assert ROUTES_URL.encode() in admin_browser.get(SECTIONS_URL).content
