"""The SSO tests' helpers: the Django account a browser is signed in as."""

from django.contrib.auth import get_user_model


def user_of(person):
    """The account the browser `person` (tests.live.sso.idp.Browser) is signed in as."""
    return get_user_model().objects.get(pk=person.signed_in_user_id())
