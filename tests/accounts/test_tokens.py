"""Bearer tokens: minted once, stored as a hash, revocable; sessions for reviewers with CSRF."""

import hashlib
import zlib
from datetime import timedelta

import pytest
from django.utils import timezone
from django.utils.crypto import get_random_string
from rest_framework.test import APIClient

from accounts.models import ApiToken
from accounts.tokens import (
    token_authenticate,
    token_create_for_agent,
    token_create_for_user,
    token_revoke,
    token_well_formed,
)
from core.choices import TokenKind
from core.exceptions import InvalidInput, NotFound
from tests.conftest import bearer_client
from tests.support.factories import ReviewerFactory
from tests.support.token_forms import BASE62, legacy_token, well_formed_token, with_bad_checksum

LIST = "/api/breakpoints"


def assert_401(response):
    assert response.status_code == 401, response.content
    assert response.json()["error"]["code"] == "not_authenticated"


# --- storage ----------------------------------------------------------------------------------


def test_only_a_hash_of_the_token_is_stored(db):
    token, raw = token_create_for_agent(agent_id="agent-a", name="ci")

    stored = ApiToken.objects.get(pk=token.pk)
    assert raw.startswith("bpma_")
    assert len(raw) > 40
    assert stored.token_hash == hashlib.sha256(raw.encode()).hexdigest()
    assert stored.prefix == raw[:12]
    stored_text = " ".join(
        str(value) for value in ApiToken.objects.values().get(pk=token.pk).values()
    )
    assert raw not in stored_text


def test_each_minted_token_is_different(db):
    first = token_create_for_agent(agent_id="agent-a")[1]
    second = token_create_for_agent(agent_id="agent-a")[1]

    assert first != second


@pytest.mark.parametrize("agent_id", ["", "   ", "x" * 129])
def test_agent_token_needs_a_sensible_agent_id(db, agent_id):
    with pytest.raises(InvalidInput):
        token_create_for_agent(agent_id=agent_id)
    assert ApiToken.objects.count() == 0


# --- format -----------------------------------------------------------------------------------


def test_tokens_say_their_kind_and_end_in_a_crc32_checksum(db):
    agent_raw = token_create_for_agent(agent_id="agent-a")[1]
    user_raw = token_create_for_user(user=ReviewerFactory())[1]

    assert agent_raw.startswith("bpma_") and user_raw.startswith("bpmu_")
    for raw in (agent_raw, user_raw):
        assert len(raw) == 5 + 43 + 6
        assert set(raw[5:]) <= set(BASE62)
        tail = 0
        for character in raw[-6:]:
            tail = tail * 62 + BASE62.index(character)
        assert tail == zlib.crc32(raw[:-6].encode())


def test_well_formed_is_decided_by_shape_and_checksum_alone():
    assert token_well_formed(well_formed_token("bpma_"))
    assert token_well_formed(well_formed_token("bpmu_"))
    assert token_well_formed("bpm_" + "x" * 43)  # the legacy form: only a lookup can tell
    assert not token_well_formed(with_bad_checksum(well_formed_token()))
    assert not token_well_formed(well_formed_token("bpmx_"))


# --- authentication ----------------------------------------------------------------------------


def test_agent_token_authenticates_as_its_agent(agent_client, make_breakpoint):
    mine = make_breakpoint(agent_id="agent-a")

    response = agent_client.get(LIST)

    assert response.status_code == 200
    assert [r["breakpointId"] for r in response.json()["results"]] == [mine.pk]


def test_user_token_authenticates_as_the_user(reviewer_client, make_breakpoint):
    make_breakpoint(agent_id="agent-x")

    assert len(reviewer_client.get(LIST).json()["results"]) == 1


def test_revoked_token_is_401(db):
    token, raw = token_create_for_agent(agent_id="agent-a")
    client = bearer_client(raw)
    assert client.get(LIST).status_code == 200

    token_revoke(prefix_or_id=str(token.pk))

    assert_401(client.get(LIST))


@pytest.mark.parametrize("raw", [well_formed_token(), "bpm_" + "x" * 43], ids=["current", "legacy"])
def test_unknown_token_is_401(db, raw):
    assert_401(bearer_client(raw).get(LIST))


TAMPERED = {
    "bad checksum": with_bad_checksum,
    "random part changed": lambda raw: raw[:9] + ("0" if raw[9] != "0" else "1") + raw[10:],
    "other kind's prefix": lambda raw: "bpmu_" + raw[5:],
    "truncated": lambda raw: raw[:-1],
    "one character more": lambda raw: raw + "0",
    "not base62": lambda raw: raw[:20] + "-" + raw[21:],
    "legacy prefix, wrong length": lambda raw: "bpm_" + raw[5:],
    "no known prefix": lambda raw: "ghp_" + raw[5:],
}


@pytest.mark.parametrize("tamper", TAMPERED.values(), ids=TAMPERED.keys())
def test_a_malformed_token_is_401_without_a_query(agent_token, tamper, django_assert_num_queries):
    client = bearer_client(tamper(agent_token))

    with django_assert_num_queries(0):
        response = client.get(LIST)

    assert_401(response)


def test_a_legacy_agent_token_still_authenticates_and_revokes_by_its_prefix(make_breakpoint):
    mine = make_breakpoint(agent_id="agent-a")
    make_breakpoint(agent_id="agent-b")
    raw = legacy_token(kind=TokenKind.AGENT, agent_id="agent-a")
    client = bearer_client(raw)

    assert [r["breakpointId"] for r in client.get(LIST).json()["results"]] == [mine.pk]
    token_revoke(prefix_or_id=raw[:12])
    assert_401(client.get(LIST))


def test_a_legacy_personal_token_still_authenticates(reviewer, make_breakpoint):
    make_breakpoint(agent_id="agent-b")
    client = bearer_client(legacy_token(kind=TokenKind.USER, user=reviewer))

    assert len(client.get(LIST).json()["results"]) == 1


def test_token_without_the_bpm_prefix_is_401(db):
    assert_401(bearer_client("not-a-bpm-token").get(LIST))


def test_token_of_a_deactivated_user_is_401(reviewer, reviewer_client):
    reviewer.is_active = False
    reviewer.save(update_fields=["is_active"])

    assert_401(reviewer_client.get(LIST))


def test_token_with_one_character_changed_is_401(agent_token):
    tampered = agent_token[:-1] + ("A" if agent_token[-1] != "A" else "B")

    assert_401(bearer_client(tampered).get(LIST))


@pytest.mark.parametrize(
    "header",
    ["Basic YWxpY2U6cGFzc3dvcmQ=", "Token {raw}", "{raw}", "Bearer", "Bearer   "],
    ids=["basic", "token scheme", "no scheme", "bearer without token", "bearer blank"],
)
def test_non_bearer_or_empty_authorization_is_401(agent_token, header):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header.format(raw=agent_token))

    assert_401(client.get(LIST))


def test_bearer_scheme_is_case_insensitive(agent_token):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"bearer {agent_token}")

    assert client.get(LIST).status_code == 200


def test_token_use_records_last_used_at(agent_token):
    token = ApiToken.objects.get(prefix=agent_token[:12])
    assert token.last_used_at is None

    bearer_client(agent_token).get(LIST)

    token.refresh_from_db()
    assert token.last_used_at is not None
    assert timezone.now() - token.last_used_at < timedelta(minutes=1)


def test_token_authenticate_returns_none_for_revoked(db):
    token, raw = token_create_for_agent(agent_id="agent-a")
    assert token_authenticate(raw).pk == token.pk

    token_revoke(prefix_or_id=token.prefix)

    assert token_authenticate(raw) is None


# --- revocation -------------------------------------------------------------------------------


def test_revoke_by_prefix_by_id_and_by_whole_token(db):
    by_prefix, raw1 = token_create_for_agent(agent_id="a")
    by_id, raw2 = token_create_for_agent(agent_id="b")
    by_token, raw3 = token_create_for_agent(agent_id="c")

    token_revoke(prefix_or_id=by_prefix.prefix)
    token_revoke(prefix_or_id=str(by_id.pk))
    token_revoke(prefix_or_id=raw3)

    assert all(token_authenticate(raw) is None for raw in (raw1, raw2, raw3))
    assert ApiToken.objects.filter(revoked_at__isnull=True).count() == 0


def test_revoking_twice_keeps_the_first_revocation_time(db):
    token, _ = token_create_for_agent(agent_id="a")
    first = token_revoke(prefix_or_id=str(token.pk)).revoked_at

    second = token_revoke(prefix_or_id=str(token.pk)).revoked_at

    assert second == first


@pytest.mark.parametrize("value", ["bpm_nothing", "bpma_nothing", "999999", "garbage"])
def test_revoking_an_unknown_token_is_not_found(db, value):
    token_create_for_agent(agent_id="a")

    with pytest.raises(NotFound):
        token_revoke(prefix_or_id=value)
    assert ApiToken.objects.filter(revoked_at__isnull=False).count() == 0


def test_revoking_with_a_wrong_full_token_of_a_known_prefix_is_not_found(db):
    token, raw = token_create_for_agent(agent_id="a")

    with pytest.raises(NotFound):
        token_revoke(prefix_or_id=raw + "x")
    assert token_authenticate(raw) is not None


def test_user_tokens_are_bound_to_the_user(db):
    user = ReviewerFactory(username="bob")

    token, raw = token_create_for_user(user=user)

    assert token.kind == TokenKind.USER
    assert token.user == user
    assert token.agent_id is None
    assert token_authenticate(raw).user == user


# --- browser sessions -----------------------------------------------------------------------------


def session_client(user) -> APIClient:
    """A browser-like client logged in as `user`, with CSRF enforced as in a real browser."""
    # ReviewerFactory does not save the password it sets; log in with what the database holds.
    user.refresh_from_db()
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def test_logged_in_reviewer_session_can_list(reviewer, make_breakpoint):
    make_breakpoint()
    client = session_client(reviewer)

    assert client.get(LIST).status_code == 200


def test_session_write_without_csrf_token_is_403(reviewer, make_breakpoint):
    bp = make_breakpoint()
    client = session_client(reviewer)

    response = client.post(f"{LIST}/{bp.pk}/feedback", {"comment": "hi"}, format="json")

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
    assert bp.feedback.count() == 0


def test_session_write_with_csrf_token_is_accepted(reviewer, make_breakpoint):
    bp = make_breakpoint()
    client = session_client(reviewer)
    csrf = get_random_string(32)  # what a page load puts in the csrftoken cookie
    client.cookies["csrftoken"] = csrf

    response = client.post(
        f"{LIST}/{bp.pk}/feedback", {"comment": "hi"}, format="json", HTTP_X_CSRFTOKEN=csrf
    )

    assert response.status_code == 201
    assert bp.feedback.get().author == "alice"


def test_session_of_a_user_without_role_is_403(db):
    from tests.support.factories import UserFactory

    client = session_client(UserFactory(username="plain"))

    assert client.get(LIST).status_code == 403
