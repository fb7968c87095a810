"""The access trail (audit.AccessEvent) in the console: admins read it, reviewers do not
see it, nobody changes it."""

from django.test import Client

from audit.models import AccessEventType
from audit.services import access_event_record
from tests.support.factories import AdminFactory, ReviewerFactory

LIST = "/admin/audit/accessevent/"


def test_admins_read_sign_ins_with_their_groups_and_reviewers_do_not_see_them(db):
    event = access_event_record(
        type=AccessEventType.ROLE_CHANGED,
        actor="rita",
        via="oidc",
        subject="00u1",
        groups=["bpm-reviewers", "dba"],
        role="reviewer",
        added=["dba"],
    )
    admin, reviewer = Client(), Client()
    admin.force_login(AdminFactory())
    reviewer.force_login(ReviewerFactory())

    listing = admin.get(LIST)
    assert listing.status_code == 200
    assert b"rita" in listing.content and b"bpm-reviewers, dba" in listing.content
    assert admin.get(f"{LIST}{event.pk}/change/").status_code == 200
    assert admin.get(f"{LIST}add/").status_code == 403
    assert admin.post(f"{LIST}{event.pk}/delete/", {"post": "yes"}).status_code == 403
    assert reviewer.get(LIST).status_code == 403
    assert b"accessevent" not in reviewer.get("/admin/sections/").content


def test_admins_read_who_signs_in_through_the_provider(db):
    from sso.models import Identity

    user = ReviewerFactory(username="rita")
    Identity.objects.create(user=user, issuer="https://idp.example", subject="00u1", groups=["g"])
    admin, reviewer = Client(), Client()
    admin.force_login(AdminFactory())
    reviewer.force_login(user)

    listing = admin.get("/admin/sso/identity/")
    assert listing.status_code == 200 and b"00u1" in listing.content
    assert admin.get("/admin/sso/identity/add/").status_code == 403
    assert reviewer.get("/admin/sso/identity/").status_code == 403
