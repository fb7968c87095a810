"""Expert routing: which seats a breakpoint has, who holds them, and who may answer.

Each name in `payload.expert` is one seat. A name resolves to the Django group of that
name when the group has active members (any member answers for it), else to the active
user with that username; `owner` resolves to the users named in BPM_PROJECT_OWNERS.
A name that resolves to nobody stays a seat: it is flagged, and admins answer for it,
so an agent is never stuck on a typo. Resolution happens when asked (not frozen at
creation), so fixing a group or the owners setting takes effect at once.
"""

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection
from django.db.models import Q

from accounts.people import person_usernames
from core.actors import group_names, is_admin
from core.exceptions import Forbidden, InvalidState

OWNER = "owner"


class SeatKind:
    GROUP = "group"
    USER = "user"
    OWNER = "owner"


@dataclass(frozen=True)
class Seat:
    """One named expert. `kind` is None when the name resolves to nobody."""

    name: str
    kind: str | None

    @property
    def resolved(self) -> bool:
        return self.kind is not None


def expert_names(expert: Any) -> list[str]:
    """payload.expert (a name or a list of names) as distinct, stripped names, in order."""
    raw = [expert] if isinstance(expert, str) else expert if isinstance(expert, list) else []
    # dict.fromkeys: an ordered set, so de-duplication is linear in the number of names.
    return list(
        dict.fromkeys(name.strip() for name in raw if isinstance(name, str) and name.strip())
    )


def project_owners() -> list[str]:
    return list(settings.BPM_PROJECT_OWNERS)


def resolve(names: Iterable[str]) -> dict[str, Seat]:
    """Resolve expert names to seats in one query (none for no names): the names that are
    groups with active members, and the active users among the names and the owners."""
    wanted = set(names)
    if not wanted:
        return {}
    owners = project_owners() if OWNER in wanted else []
    found = _seat_rows(wanted, (wanted - {OWNER}) | set(owners))
    grouped = {name for kind, name in found if kind == SeatKind.GROUP}
    usernames = {name for kind, name in found if kind == SeatKind.USER}
    seats: dict[str, Seat] = {}
    for name in wanted:
        if name == OWNER:
            kind = SeatKind.OWNER if usernames & set(owners) else None
        elif name in grouped:
            kind = SeatKind.GROUP
        elif name in usernames:
            kind = SeatKind.USER
        else:
            kind = None
        seats[name] = Seat(name=name, kind=kind)
    return seats


def _seat_rows(group_names: set[str], usernames: set[str]) -> set[tuple[str, str]]:
    """(kind, name) for each of `group_names` that has an active member and each of
    `usernames` that is an active user: one UNION, written out. Every list page and queue
    page asks this; the ORM took longer to build its UNION than the database to run it
    (a quarter of a list request's CPU)."""
    group_select, user_select = _seat_selects()

    def placeholders(values: set[str]) -> str:
        return ", ".join(["%s"] * len(values))

    parts: list[tuple[str, list[str]]] = []
    if group_names:
        parts.append((f"{group_select} ({placeholders(group_names)})", sorted(group_names)))
    if usernames:
        parts.append((f"{user_select} ({placeholders(usernames)})", sorted(usernames)))
    if not parts:
        return set()
    sql = " UNION ".join(part for part, _ in parts)
    params = [param for _, part_params in parts for param in part_params]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {(kind, name) for kind, name in cursor.fetchall()}


@functools.cache
def _seat_selects() -> tuple[str, str]:
    """_seat_rows' two SELECTs up to their IN lists, written once per process from the
    models' table and column names (writing them was most of its own time)."""
    user_model = get_user_model()
    membership = user_model.groups.through

    def column(model: Any, field: str) -> str:
        return connection.ops.quote_name(str(model._meta.get_field(field).column))

    def table(model: Any) -> str:
        return connection.ops.quote_name(str(model._meta.db_table))

    users, groups, members = table(user_model), table(Group), table(membership)
    active = column(user_model, "is_active")
    username = column(user_model, user_model.USERNAME_FIELD)
    user_pk = column(user_model, user_model._meta.pk.name)
    member_user, member_group = column(membership, "user"), column(membership, "group")
    group_name, group_pk = column(Group, "name"), column(Group, "id")
    # A group counts when one of its members is active; a user when active. Both as
    # (kind, name); UNION gives each pair once.
    group_select = (
        f"SELECT '{SeatKind.GROUP}', g.{group_name} FROM {groups} g "
        f"JOIN {members} m ON m.{member_group} = g.{group_pk} "
        f"JOIN {users} u ON u.{user_pk} = m.{member_user} "
        f"WHERE u.{active} AND g.{group_name} IN"
    )
    user_select = (
        f"SELECT '{SeatKind.USER}', u.{username} FROM {users} u "
        f"WHERE u.{active} AND u.{username} IN"
    )
    return group_select, user_select


def seats_for(names: list[str], resolved: Mapping[str, Seat] | None = None) -> list[Seat]:
    """The seats of a breakpoint, in the order its expert names were given."""
    resolved = resolved if resolved is not None else resolve(names)
    return [resolved.get(name) or Seat(name=name, kind=None) for name in names]


def seat_holders(names: Iterable[str]) -> list[Any]:
    """The active users who answer for any of these expert names, in one query."""
    names = set(names)
    if not names:
        return []
    usernames = names - {OWNER} | (set(project_owners()) if OWNER in names else set())
    holders = get_user_model().objects.filter(
        Q(groups__name__in=names) | Q(username__in=usernames), is_active=True
    )
    return list(holders.distinct().order_by("pk"))


def holds(user: Any, seat: Seat) -> bool:
    """Whether `user` answers for `seat` (admins are not members by virtue of being admins)."""
    username = user.get_username()
    if seat.kind == SeatKind.OWNER:
        return username in project_owners()
    if seat.kind == SeatKind.GROUP:
        return seat.name in group_names(user)
    if seat.kind == SeatKind.USER:
        return username == seat.name
    return False


def seat_for_response(
    user: Any, seats: list[Seat], voted: Iterable[str], voters: Mapping[str, str] | None = None
) -> Seat:
    """The seat a reviewer's release (vote) fills, or why they may not give one.

    A person fills one seat per breakpoint: once any account of theirs voted (`voters`:
    the username behind each vote, to the seat it filled), another vote is 409, whichever
    seat it would fill (an admin's answer for a seat is that admin's one seat). Members
    fill the first of their seats that has not voted yet. Admins may answer for any seat:
    their own first, then one that resolves to nobody, then any open one. Everyone else
    may comment but not release (403); a member whose seats have all voted gets 409,
    because a seat votes once.
    """
    _require_no_vote_yet(user, voters or {})
    voted = set(voted)
    mine = [seat for seat in seats if holds(user, seat)]
    open_mine = [seat for seat in mine if seat.name not in voted]
    if open_mine:
        return open_mine[0]
    open_seats = [seat for seat in seats if seat.name not in voted]
    if is_admin(user) and open_seats:
        unresolved = [seat for seat in open_seats if not seat.resolved]
        return (unresolved or open_seats)[0]
    if mine:
        names = ", ".join(seat.name for seat in mine)
        raise InvalidState(
            f"Seat {names} has already voted; each seat votes once.",
            current_status="waiting",
            details={"seats": [seat.name for seat in mine]},
        )
    names = ", ".join(seat.name for seat in seats)
    raise Forbidden(
        f"Only members of {names} (or admins) may release this breakpoint; you may comment.",
        {"experts": [seat.name for seat in seats]},
    )


def same_person_usernames(user: Any) -> set[str]:
    """The usernames of every account that is the same person as `user` (accounts.people):
    the one place a seat asks who a person is."""
    return person_usernames(user) | {user.get_username()}


def _require_no_vote_yet(user: Any, voters: Mapping[str, str]) -> None:
    """Refuse (409) a vote by a person who voted on this breakpoint already."""
    if not voters:
        return
    person = same_person_usernames(user)
    seats = [seat for name, seat in voters.items() if name in person]
    if seats:
        username = user.get_username()
        raise InvalidState(
            f"{username} has already voted on this breakpoint (seat {', '.join(seats)}); "
            "a person fills one seat, whatever seats they hold.",
            current_status="waiting",
            details={"votedFor": seats},
        )


def assigned_names(user: Any) -> list[str]:
    """The expert names that route a breakpoint to `user`: their groups, username, owner."""
    username = user.get_username()
    names = {username, *group_names(user)}
    if username in project_owners():
        names.add(OWNER)
    return sorted(names)


def seat_summary(
    experts: list[str], votes: list[dict[str, Any]], resolved: Mapping[str, Seat] | None = None
) -> list[dict[str, Any]]:
    """Each seat with what it resolved to and its vote (None while missing): for the console."""
    by_seat = {vote.get("seat"): vote for vote in votes if vote.get("seat")}
    return [
        {
            "name": seat.name,
            "resolved": seat.resolved,
            "kind": seat.kind,
            "vote": by_seat.get(seat.name),
        }
        for seat in seats_for(experts, resolved)
    ]
