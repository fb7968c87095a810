"""Admin management commands: tokens and reviewer accounts (the TTL sweep's is in
tests/breakpoints/test_ttl_and_retention.py)."""

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError

from accounts.models import ApiToken
from accounts.tokens import hash_token
from tests.conftest import bearer_client
from tests.support.commands import last_line, run
from tests.support.factories import ReviewerFactory, UserFactory

STRONG_PASSWORD = "violet-Harbor-47-quietly"


# --- create_agent_token ------------------------------------------------------------------------


def test_create_agent_token_prints_the_token_alone_on_the_last_line(db):
    out, err = run("create_agent_token", "agent-7", "--name", "ci runner")

    token = last_line(out)
    assert token.startswith("bpma_")
    assert token == token.strip() and " " not in token
    stored = ApiToken.objects.get()
    assert stored.agent_id == "agent-7"
    assert stored.name == "ci runner"
    assert stored.token_hash == hash_token(token)
    assert token not in err


def test_created_agent_token_authenticates_as_that_agent(db):
    token = last_line(run("create_agent_token", "agent-7")[0])

    response = bearer_client(token).post("/api/breakpoints", {"payload": {}}, format="json")

    assert response.status_code == 201
    assert response.json()["agentId"] == "agent-7"


def test_create_agent_token_with_a_blank_agent_id_fails_clearly(db):
    with pytest.raises(CommandError, match="agentId"):
        run("create_agent_token", "   ")
    assert ApiToken.objects.count() == 0


# --- revoke_agent_token ----------------------------------------------------------------------------


def test_revoke_agent_token_by_prefix_makes_it_401(db):
    token = last_line(run("create_agent_token", "agent-7")[0])
    client = bearer_client(token)
    assert client.get("/api/breakpoints").status_code == 200

    out, _ = run("revoke_agent_token", token[:12])

    assert "Revoked" in out
    response = client.get("/api/breakpoints")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"
    assert ApiToken.objects.get().revoked_at is not None


def test_revoke_agent_token_by_id_makes_it_401(db):
    token = last_line(run("create_agent_token", "agent-7")[0])
    token_id = ApiToken.objects.get().pk

    run("revoke_agent_token", str(token_id))

    assert bearer_client(token).get("/api/breakpoints").status_code == 401


def test_revoking_one_token_leaves_the_others_working(db):
    revoked = last_line(run("create_agent_token", "agent-7")[0])
    kept = last_line(run("create_agent_token", "agent-7")[0])

    run("revoke_agent_token", revoked[:12])

    assert bearer_client(revoked).get("/api/breakpoints").status_code == 401
    assert bearer_client(kept).get("/api/breakpoints").status_code == 200


def test_revoke_unknown_token_fails_clearly(db):
    with pytest.raises(CommandError, match="No token matches"):
        run("revoke_agent_token", "bpm_unknown0")


# --- create_reviewer -------------------------------------------------------------------------------


def test_create_reviewer_reads_the_password_from_stdin(db, monkeypatch):
    out, _ = run(
        "create_reviewer",
        "carol",
        "--email",
        "carol@example.com",
        stdin=STRONG_PASSWORD + "\n",
        monkeypatch=monkeypatch,
    )

    user = get_user_model().objects.get(username="carol")
    assert "carol" in out
    assert user.check_password(STRONG_PASSWORD)
    assert user.email == "carol@example.com"
    assert user.is_staff
    assert set(user.groups.values_list("name", flat=True)) == {"reviewers"}


def test_create_reviewer_admin_puts_the_user_in_admins(db, monkeypatch):
    run("create_reviewer", "dave", "--admin", stdin=STRONG_PASSWORD, monkeypatch=monkeypatch)

    user = get_user_model().objects.get(username="dave")
    assert set(user.groups.values_list("name", flat=True)) == {"reviewers", "admins"}


def test_created_reviewer_can_log_in_with_that_password(client, db, monkeypatch):
    run("create_reviewer", "erin", stdin=STRONG_PASSWORD, monkeypatch=monkeypatch)

    # Through the console's login form, as a person would (django-axes needs the request).
    client.post("/admin/login/", {"username": "erin", "password": STRONG_PASSWORD})
    assert client.get("/api/breakpoints").status_code == 200


@pytest.mark.parametrize("password", ["123", "password", "short"])
def test_create_reviewer_refuses_a_weak_password(db, monkeypatch, password):
    with pytest.raises(CommandError, match="Password refused"):
        run("create_reviewer", "frank", stdin=password, monkeypatch=monkeypatch)
    assert not get_user_model().objects.filter(username="frank").exists()


def test_create_reviewer_refuses_an_empty_stdin(db, monkeypatch):
    with pytest.raises(CommandError, match="No password"):
        run("create_reviewer", "gina", stdin="", monkeypatch=monkeypatch)
    assert not get_user_model().objects.filter(username="gina").exists()


def test_create_reviewer_refuses_a_duplicate_username(db, monkeypatch):
    ReviewerFactory(username="alice")

    with pytest.raises(CommandError, match="already exists"):
        run("create_reviewer", "alice", stdin=STRONG_PASSWORD, monkeypatch=monkeypatch)
    assert get_user_model().objects.filter(username="alice").count() == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ALICE"], "An account named 'alice' exists already"),
        (["ａｌｉｃｅ"], "An account named 'alice' exists already"),  # full-width: alice
        (["alice2", "--email", "Alice@Example.COM"], "'alice' has this email address already"),
    ],
)
def test_create_reviewer_refuses_another_accounts_name_or_email_without_case(
    db, monkeypatch, args, message
):
    """One person, one account (issue 47): ALICE beside alice would make alice's
    owner-bound token's every create a 400 ("names more than one person")."""
    ReviewerFactory(username="alice", email="alice@example.com")

    with pytest.raises(CommandError, match=message):
        run("create_reviewer", *args, stdin=STRONG_PASSWORD, monkeypatch=monkeypatch)
    assert list(get_user_model().objects.values_list("username", flat=True)) == ["alice"]


def test_create_reviewer_update_refuses_another_accounts_email(db, monkeypatch):
    ReviewerFactory(username="alice", email="alice@example.com")
    ReviewerFactory(username="bob", email="bob@example.com")

    with pytest.raises(CommandError, match="'alice' has this email address already"):
        run(
            "create_reviewer",
            "bob",
            "--update",
            "--email",
            "ALICE@example.com",
            stdin=STRONG_PASSWORD,
            monkeypatch=monkeypatch,
        )
    assert get_user_model().objects.get(username="bob").email == "bob@example.com"
    run(  # her own address, in another case, is hers to keep
        "create_reviewer",
        "alice",
        "--update",
        "--email",
        "Alice@example.com",
        stdin=STRONG_PASSWORD,
        monkeypatch=monkeypatch,
    )


# --- create_user_token -----------------------------------------------------------------------------


def test_create_user_token_prints_a_working_personal_token_last(reviewer, make_breakpoint):
    make_breakpoint(agent_id="agent-x")

    out, _ = run("create_user_token", "alice")

    token = last_line(out)
    assert token.startswith("bpmu_")
    stored = ApiToken.objects.get(token_hash=hash_token(token))
    assert stored.user == reviewer
    response = bearer_client(token).get("/api/breakpoints")
    assert response.status_code == 200
    assert len(response.json()["results"]) == 1


def test_create_user_token_for_an_unknown_user_fails_clearly(db):
    with pytest.raises(CommandError, match="No user named 'ghost'"):
        run("create_user_token", "ghost")
    assert ApiToken.objects.count() == 0


def test_create_user_token_for_a_user_without_role_fails(db):
    UserFactory(username="plain")

    with pytest.raises(CommandError, match="neither a reviewer nor an admin"):
        run("create_user_token", "plain")
    assert ApiToken.objects.count() == 0


def test_create_user_token_for_an_inactive_user_fails(reviewer):
    reviewer.is_active = False
    reviewer.save(update_fields=["is_active"])

    with pytest.raises(CommandError, match="inactive"):
        run("create_user_token", "alice")


def test_create_reviewer_update_sets_the_email_of_an_existing_reviewer(db, monkeypatch):
    # The docs' flows (a Slack click, an expert's mail) need the email; before --update an
    # existing reviewer could not be given one from the command line.
    ReviewerFactory(username="alice", email="")

    out, _ = run(
        "create_reviewer",
        "alice",
        "--update",
        "--email",
        "alice@example.com",
        "--group",
        "tech-lead",
        stdin=STRONG_PASSWORD,
        monkeypatch=monkeypatch,
    )

    user = get_user_model().objects.get(username="alice")
    assert "Updated reviewer 'alice'" in out
    assert user.email == "alice@example.com"
    assert user.check_password(STRONG_PASSWORD)
    assert {"reviewers", "tech-lead"} <= set(user.groups.values_list("name", flat=True))
    assert get_user_model().objects.filter(username="alice").count() == 1


def test_create_reviewer_update_keeps_the_email_and_the_admin_role_when_not_given(db, monkeypatch):
    run(
        "create_reviewer",
        "root",
        "--admin",
        "--email",
        "root@example.com",
        stdin=STRONG_PASSWORD,
        monkeypatch=monkeypatch,
    )

    out, _ = run(
        "create_reviewer", "root", "--update", stdin=STRONG_PASSWORD, monkeypatch=monkeypatch
    )

    user = get_user_model().objects.get(username="root")
    assert "Updated admin 'root'" in out
    assert user.email == "root@example.com"
    assert set(user.groups.values_list("name", flat=True)) == {"reviewers", "admins"}


def test_create_reviewer_update_creates_a_missing_user(db, monkeypatch):
    out, _ = run(
        "create_reviewer",
        "tina",
        "--update",
        "--email",
        "tina@example.com",
        stdin=STRONG_PASSWORD,
        monkeypatch=monkeypatch,
    )

    assert "Created reviewer 'tina'" in out
    assert get_user_model().objects.get(username="tina").email == "tina@example.com"


def test_create_reviewer_update_leaves_a_superuser_alone(db, monkeypatch):
    get_user_model().objects.create_superuser("boss", "boss@example.com", STRONG_PASSWORD)

    with pytest.raises(CommandError, match="superuser"):
        run(
            "create_reviewer",
            "boss",
            "--update",
            "--email",
            "x@example.com",
            stdin="another-Harbor-48-loudly",
            monkeypatch=monkeypatch,
        )
    boss = get_user_model().objects.get(username="boss")
    assert boss.email == "boss@example.com" and boss.check_password(STRONG_PASSWORD)
