"""factory-boy factories for the project's models."""

import factory
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from breakpoints.models import Breakpoint
from core.actors import ADMINS_GROUP, REVIEWERS_GROUP

PASSWORD = "correct-horse-battery-staple"


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    is_staff = True
    password = factory.PostGenerationMethodCall("set_password", PASSWORD)

    @factory.post_generation
    def groups(self, create, extracted, **kwargs):
        _join_and_save(self, create, extracted or [])


class ReviewerFactory(UserFactory):
    """A staff user in group `reviewers` (plus any groups=[...] given)."""

    username = factory.Sequence(lambda n: f"reviewer{n}")

    @factory.post_generation
    def groups(self, create, extracted, **kwargs):
        _join_and_save(self, create, [REVIEWERS_GROUP, *(extracted or [])])


class AdminFactory(UserFactory):
    """A staff user in groups `reviewers` and `admins`."""

    username = factory.Sequence(lambda n: f"admin{n}")

    @factory.post_generation
    def groups(self, create, extracted, **kwargs):
        _join_and_save(self, create, [REVIEWERS_GROUP, ADMINS_GROUP, *(extracted or [])])


def _join_and_save(user, create: bool, group_names: list[str]) -> None:
    """Add the groups, then save once (this also stores the password set just before)."""
    if not create:
        return
    for name in group_names:
        user.groups.add(Group.objects.get_or_create(name=name)[0])
    user.save()


class BreakpointFactory(factory.django.DjangoModelFactory):
    """A waiting breakpoint row (no audit event): for reads, lists and query counts."""

    class Meta:
        model = Breakpoint

    agent_id = "agent-a"
    run_id = factory.Sequence(lambda n: f"run-{n}")
    title = factory.Sequence(lambda n: f"Plan Review {n}")
    key = factory.Sequence(lambda n: f"plan-review-{n}")
    question = "Approve the plan?"
    payload = factory.LazyAttribute(lambda bp: {"question": bp.question, "title": bp.title})
    tags = factory.LazyFunction(list)
