"""Who a breakpoint is requested by: bound to the agent token's owner, or a known person.

The requester is the person four eyes keeps from deciding a breakpoint, and the name its
receipt carries, so it is never taken as sent:
- a token with an owner binds it: omitted means the owner, naming the owner (by username
  or email, compared by core.actors.name_key) means the owner, naming anyone else is a 403;
- a token without one may name a known person (a username or email of a user here), who
  is stored by username, not as the string sent; a name nobody here has is a 400;
- invisible, control and separator characters are refused (400): "alice\\u200b" is not
  quietly "alice", nor another person.
"""

import unicodedata

from django.contrib.auth import get_user_model
from django.db.models import Q

from core.actors import name_key
from core.exceptions import Forbidden, InvalidInput

FIELD = "requestedBy"


def _character_problem(name: str) -> str | None:
    """Why `name` cannot name a person: an invisible, control or separator character."""
    for char in unicodedata.normalize("NFKC", name).strip():
        if unicodedata.category(char)[0] in "CZ":
            return (
                f"Must not contain invisible, control or space characters "
                f"(U+{ord(char):04X} found)."
            )
    return None


def person_named(name: str) -> str | None:
    """The username of the one person whose username or email is `name` (by name_key), or
    None. A username match wins over an email match, and among usernames differing only in
    case (made before they were refused) the exact one; two people sharing an email that
    nobody has as a username name nobody (InvalidInput: ambiguous)."""
    wanted = name_key(name)
    if not wanted:
        return None
    User = get_user_model()
    rows = User.objects.filter(Q(username__iexact=wanted) | Q(email__iexact=wanted)).values_list(
        "username", "email"
    )
    by_username = sorted({user for user, _ in rows if name_key(user) == wanted})
    by_email = sorted({user for user, email in rows if email and name_key(email) == wanted})
    found = by_username or by_email
    if len(by_username) > 1 and name.strip() in by_username:
        found = [name.strip()]  # legacy case twins (ALICE beside alice): the exact name wins
    if len(found) > 1:
        raise InvalidInput(
            f"{FIELD} {name!r} names more than one person: use a username.",
            {FIELD: ["Names more than one person: use a username."]},
        )
    return found[0] if found else None


def requester_bind(*, owner: str | None, requested: str | None) -> str | None:
    """The requester to store for a breakpoint created with a token whose owner is `owner`
    (None: the token has none) and a body whose requestedBy is `requested`."""
    if requested is not None:
        if problem := _character_problem(requested):
            raise InvalidInput(f"{FIELD}: {problem}", {FIELD: [problem]})
        requested = requested.strip() or None
    if owner:
        return _bound_to_owner(owner, requested)
    if requested is None:
        return None
    person = person_named(requested)
    if person is None:
        message = "Names nobody here: give the username or email of a person with an account."
        raise InvalidInput(f"{FIELD}: {message}", {FIELD: [message]})
    return person


def _bound_to_owner(owner: str, requested: str | None) -> str:
    """The owner (by username when a person here has that name); `requested` must name them."""
    person = person_named(owner)
    bound = person or owner
    if requested is None:
        return bound
    names = {name_key(owner), name_key(bound)}
    if person is not None:
        User = get_user_model()
        email = User.objects.filter(username=person).values_list("email", flat=True).first()
        names.add(name_key(email or ""))
    if name_key(requested) not in names - {""}:
        raise Forbidden(
            f"This agent token acts for {bound}: requestedBy may only name them (or be omitted).",
            {FIELD: bound},
        )
    return bound
