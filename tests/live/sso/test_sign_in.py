"""Signing in with OpenID Connect against a real provider: roles and expert groups from the
provider's groups, recomputed at every sign-in; a person in no mapped group refused with a
page that says whom to ask; accounts matched on the provider's subject."""

from django.contrib.auth import get_user_model

from audit.models import AccessEvent
from sso.models import Identity

QUEUE = "/admin/breakpoints/breakpoint/?status__exact=waiting"


def test_a_reviewer_signs_in_and_sees_the_queue(sso_on, browser):
    sso_on.person("rita", groups=["bpm-reviewers"], email="rita@example.com", name="Rita Hayworth")
    person = browser()

    answer = person.sign_in("rita")

    assert answer.status_code == 302, answer.content[:300]
    queue = person.client.get(answer["Location"], follow=True)
    assert queue.status_code == 200
    assert queue.redirect_chain[-1][0] == QUEUE
    user = get_user_model().objects.get(pk=person.signed_in_user_id())
    assert (user.username, user.email, user.first_name, user.last_name) == (
        "rita",
        "rita@example.com",
        "Rita",
        "Hayworth",
    )
    assert Identity.objects.get(user=user).subject == "rita"
    assert AccessEvent.objects.filter(type="signed_in", actor="rita").exists()
