"""factory-boy factories for the project's models."""

import factory
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from breakpoints.actors import ADMINS_GROUP, REVIEWERS_GROUP
from breakpoints.models import Breakpoint

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
        if create and extracted:
            for name in extracted:
                self.groups.add(Group.objects.get_or_create(name=name)[0])
        if create:
            self.save()


class ReviewerFactory(UserFactory):
    username = factory.Sequence(lambda n: f"reviewer{n}")
    groups = factory.PostGeneration(
        lambda user, create, extracted, **kw: (
            user.groups.add(Group.objects.get_or_create(name=REVIEWERS_GROUP)[0])
            if create
            else None
        )
    )


class AdminFactory(UserFactory):
    username = factory.Sequence(lambda n: f"admin{n}")
    groups = factory.PostGeneration(
        lambda user, create, extracted, **kw: (
            [
                user.groups.add(Group.objects.get_or_create(name=name)[0])
                for name in (REVIEWERS_GROUP, ADMINS_GROUP)
            ]
            if create
            else None
        )
    )


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
