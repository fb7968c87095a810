"""Every write of single sign-on: a sign-in, a session's re-check, a sign-out, a password
refused. Each applies what the identity provider says (roles and mirrored expert groups,
added and removed; email and name kept current) and records it in the access trail
(audit.AccessEvent) in the same transaction."""

from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.people import (
    GroupChanges,
    Role,
    accounts_named,
    accounts_with_email,
    person_groups_follow,
    person_role,
)
from audit.models import AccessEventType
from audit.services import access_event_record
from core.exceptions import InvalidInput, NotFound, Unavailable
from sso.claims import IdpPerson, expert_groups_for, role_for_groups, username_base
from sso.config import OidcConfig, oidc_config
from sso.discovery import IdpUnavailable, provider_metadata
from sso.models import Identity

VIA = "oidc"
NO_ROLE = "no_role"
INACTIVE = "inactive"
UNLINKED = "unlinked"  # a first sign-in that may be an existing account's: an admin links them
LINK_HOW = (
    "An admin links your sign-in to your account with "
    "`manage.py sso_link <username> {subject}` (docs/sso.md); then sign in again."
)


@dataclass(frozen=True)
class Access:
    """The outcome of a sign-in or a re-check: `user` when they may come in (or stay),
    else None and `refusal` (NO_ROLE, INACTIVE, UNLINKED) says why; `message`: what to do
    (for UNLINKED: how an admin links them)."""

    user: Any
    person: IdpPerson
    role: Role
    refusal: str = ""
    message: str = ""


class NotLinked(Exception):
    """A first sign-in neither linked to an account nor given a new one: the message says
    why and how an admin links them; `details` go to the access trail (never to the page)."""

    def __init__(self, message: str, **details: Any):
        super().__init__(message)
        self.message = message
        self.details = details


def sso_sign_in(*, issuer: str, person: IdpPerson, address: str = "") -> Access:
    """Sign `person` in: their account (found by issuer and subject; at the first sign-in
    when their groups give a role, the one existing account of their verified email, linked,
    or else a new one) with the roles and expert groups their groups give now. Nobody in no
    mapped group is let in, and no account is created for them. A person is never given a
    second account: a first sign-in whose email or username an account here has already,
    and that cannot be linked to it (email not verified, several accounts, a deactivated
    or superuser account, one linked to another subject), is refused (UNLINKED) with how an
    admin links them (sso_link)."""
    try:
        with transaction.atomic():
            return _sign_in(issuer, person, address)
    except IntegrityError:
        # The same person's other sign-in created the account at the same moment: use it.
        with transaction.atomic():
            return _sign_in(issuer, person, address)


def _sign_in(issuer: str, person: IdpPerson, address: str) -> Access:
    config = oidc_config()
    role = role_for_groups(person.groups, config)
    identity = (
        Identity.objects.select_for_update()
        .select_related("user")
        .filter(issuer=issuer, subject=person.subject)
        .first()
    )
    if identity is None and role == Role.NONE:
        _record(AccessEventType.REFUSED, person.handle(), person, reason=NO_ROLE, address=address)
        return Access(user=None, person=person, role=role, refusal=NO_ROLE)
    if identity is None:
        try:
            identity = _identity_first(issuer, person, address)
        except NotLinked as refused:
            return _refused_unlinked(person, role, refused, address)
    user = identity.user
    _profile_update(user, person)
    _follow(identity, person, role, config, signed_in=True, address=address)
    refusal = NO_ROLE if role == Role.NONE else "" if user.is_active else INACTIVE
    if refusal:
        _record(AccessEventType.REFUSED, user.username, person, reason=refusal, address=address)
        return Access(user=None, person=person, role=role, refusal=refusal)
    _record(AccessEventType.SIGNED_IN, user.username, person, role=role.value, address=address)
    return Access(user=user, person=person, role=role)


def sso_recheck(*, user: Any, issuer: str, person: IdpPerson, address: str = "") -> Access:
    """A session's re-check: the roles and expert groups that `person`'s groups give now.
    The session may go on when `user` keeps a role; else it ends (recorded here)."""
    config = oidc_config()
    role = role_for_groups(person.groups, config)
    with transaction.atomic():
        identity = (
            Identity.objects.select_for_update()
            .filter(user=user, issuer=issuer, subject=person.subject)
            .first()
        )
        if identity is None:  # another issuer now, or the account was unlinked
            return sso_session_end(user=user, person=person, reason="identity_changed")
        _profile_update(user, person)
        _follow(identity, person, role, config, signed_in=False, address=address)
        if role == Role.NONE or not user.is_active:
            return sso_session_end(
                user=user, person=person, reason=NO_ROLE if role == Role.NONE else INACTIVE
            )
    return Access(user=user, person=person, role=role)


def sso_session_end(
    *, user: Any, person: IdpPerson | None = None, reason: str, **details: Any
) -> Access:
    """Record that a signed-in session was ended by its re-check (the caller ends it)."""
    subject = person.subject if person is not None else _subject_of(user)
    access_event_record(
        type=AccessEventType.SESSION_ENDED,
        actor=user.get_username(),
        via=VIA,
        subject=subject,
        groups=person.group_list if person is not None else (),
        reason=reason,
        **details,
    )
    unknown = IdpPerson(subject, "", "", "", "", None)
    return Access(user=None, person=person or unknown, role=Role.NONE, refusal=reason)


def sso_sign_out(*, user: Any) -> None:
    """Record a sign-out of a person signed in through the identity provider."""
    access_event_record(
        type=AccessEventType.SIGNED_OUT,
        actor=user.get_username(),
        via=VIA,
        subject=_subject_of(user),
    )


def password_sign_in_refused(*, username: str, address: str = "") -> None:
    """Record a password sign-in refused because only the identity provider signs people in
    (BPM_OIDC_ONLY) and `username` is not a superuser."""
    access_event_record(
        type=AccessEventType.REFUSED,
        actor=username,
        via="password",
        reason="sso_only",
        message="Password sign-in is for superusers only (BPM_OIDC_ONLY).",
        address=address,
    )


def password_session_end(*, user: Any, address: str = "") -> None:
    """Record a password session ended because only the identity provider signs people in
    now (BPM_OIDC_ONLY) and `user` is not a superuser (the caller ends it)."""
    access_event_record(
        type=AccessEventType.SESSION_ENDED,
        actor=user.get_username(),
        via="password",
        reason="sso_only",
        address=address,
    )


def identity_link(*, username: str, subject: str) -> Identity:
    """Link the existing account `username` to `subject` at the configured provider: their
    sign-ins use it from now on (an account is never taken over by an email address; an
    admin says who is who). Refused when single sign-on is off, the account or the subject
    is linked already, or the account is a superuser (the break-glass account stays local)."""
    config = oidc_config()
    if not config.enabled:
        raise InvalidInput("Single sign-on is off: set BPM_OIDC_ISSUER first.")
    subject = subject.strip()
    if not subject or len(subject) > 255:
        raise InvalidInput("The subject must be 1 to 255 characters.")
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise NotFound(f"No user named {username!r}.")
    if user.is_superuser:
        raise InvalidInput(f"{username!r} is a superuser: the break-glass account stays local.")
    try:
        issuer = provider_metadata().issuer  # as ID tokens name it
    except IdpUnavailable as exc:
        raise Unavailable(f"The identity provider does not answer ({exc}); try again.") from exc
    with transaction.atomic():
        if Identity.objects.filter(user=user).exists():
            raise InvalidInput(f"{username!r} is linked to a subject already.")
        if Identity.objects.filter(issuer=issuer, subject=subject).exists():
            raise InvalidInput(f"The subject {subject!r} is linked to another account already.")
        identity = Identity.objects.create(user=user, issuer=issuer, subject=subject)
        access_event_record(
            type=AccessEventType.LINKED,
            actor=user.get_username(),
            via=VIA,
            subject=subject,
            linked_by="sso_link",
        )
        return identity


# --- the parts ------------------------------------------------------------------------------


def _record(kind: str, actor: str, person: IdpPerson, **metadata: Any) -> None:
    access_event_record(
        type=kind,
        actor=actor,
        via=VIA,
        subject=person.subject,
        groups=person.group_list,
        **{key: value for key, value in metadata.items() if value not in (None, "")},
    )


def _follow(
    identity: Identity,
    person: IdpPerson,
    role: Role,
    config: OidcConfig,
    *,
    signed_in: bool,
    address: str,
) -> GroupChanges:
    """Roles and mirrored expert groups as `person`'s groups say; a change is recorded."""
    user = identity.user
    before = person_role(user)
    changes = person_groups_follow(
        user=user,
        role=role,
        expert_groups=expert_groups_for(person.groups, config),
        mirrored=config.expert_groups,
    )
    now = timezone.now()
    identity.groups = person.group_list
    identity.checked_at = now
    fields = ["groups", "checked_at"]
    if signed_in:
        identity.signed_in_at = now
        fields.append("signed_in_at")
    identity.save(update_fields=fields)
    if changes:
        _record(
            AccessEventType.ROLE_CHANGED,
            user.username,
            person,
            role_before=before.value,
            role=role.value,
            added=list(changes.added),
            removed=list(changes.removed),
            address=address,
        )
    return changes


def _refused_unlinked(person: IdpPerson, role: Role, refused: NotLinked, address: str) -> Access:
    """A first sign-in refused, recorded with the accounts it may be (for the admin)."""
    _record(
        AccessEventType.REFUSED,
        person.handle(),
        person,
        reason=UNLINKED,
        message=refused.message,
        address=address,
        **refused.details,
    )
    return Access(user=None, person=person, role=role, refusal=UNLINKED, message=refused.message)


def _identity_first(issuer: str, person: IdpPerson, address: str) -> Identity:
    """The identity of `person`'s first sign-in: linked to the existing account of their
    verified email, or a new account when no account has their email (verified or not) nor
    their username (without case). Else NotLinked: never a second account for a person."""
    subject = person.subject
    by_email = list(accounts_with_email(person.email_claimed).select_for_update()[:10])
    if by_email:
        user = _account_to_link(person, by_email)
        identity = Identity.objects.create(user=user, issuer=issuer, subject=subject)
        _record(
            AccessEventType.LINKED,
            user.username,
            person,
            linked_by="verified_email",
            email=person.email_claimed,
            address=address,
        )
        return identity
    username = username_base(person)
    taken = list(accounts_named(username).values_list("username", flat=True)[:5])
    if taken:
        raise NotLinked(
            f"An account named {username!r} exists here already and does not have your "
            f"verified email address. If it is yours: "
            + LINK_HOW.format(subject=subject)
            + " If it is not, an admin makes you an account of another name "
            "(manage.py create_reviewer) and links it the same way.",
            accounts=taken,
        )
    return _identity_create(issuer, person)


def _account_to_link(person: IdpPerson, accounts: list[Any]) -> Any:
    """The one active account of `accounts` (those with `person`'s claimed email) a first
    sign-in links to, or NotLinked saying why not (the email unverified, several active
    accounts or none, a superuser, an account linked to another subject)."""
    how = LINK_HOW.format(subject=person.subject)
    names = sorted(user.username for user in accounts)
    active = [user for user in accounts if user.is_active]
    if not person.email_verified:
        why = "your identity provider does not say that this address is verified"
        raise NotLinked(f"An account here has your email address, but {why}. {how}", accounts=names)
    if len(active) > 1:
        raise NotLinked(
            "More than one account here has your email address, so it is not clear which "
            f"is yours. {how}",
            accounts=names,
        )
    if not active:
        raise NotLinked(
            "The account here with your email address is deactivated: an admin reactivates "
            f"it if you may come in. {how}",
            accounts=names,
        )
    (user,) = active
    if user.is_superuser:
        raise NotLinked(
            "Your email address is a superuser's here: the break-glass account stays local "
            "and signs in with its password.",
            accounts=names,
        )
    if Identity.objects.filter(user=user).exists():
        raise NotLinked(
            "The account here with your email address signs in as another person of your "
            f"identity provider. {how}",
            accounts=names,
        )
    return user


def _identity_create(issuer: str, person: IdpPerson) -> Identity:
    """A new account (no password: it signs in through the identity provider alone)."""
    user = get_user_model().objects.create_user(
        username=username_base(person),
        email=person.email,
        first_name=person.first_name,
        last_name=person.last_name,
    )
    return Identity.objects.create(user=user, issuer=issuer, subject=person.subject)


def _profile_update(user: Any, person: IdpPerson) -> None:
    """Email and name as the identity provider has them now (kept when it sends none, and
    the email kept when another account has the new one: one address, one person)."""
    fields = []
    email = person.email
    if email and accounts_with_email(email).exclude(pk=user.pk).exists():
        email = ""
    for field, value in (
        ("email", email),
        ("first_name", person.first_name),
        ("last_name", person.last_name),
    ):
        if value and getattr(user, field) != value:
            setattr(user, field, value)
            fields.append(field)
    if fields:
        user.save(update_fields=fields)


def _subject_of(user: Any) -> str:
    identity = Identity.objects.filter(user=user).only("subject").first()
    return identity.subject if identity is not None else ""
