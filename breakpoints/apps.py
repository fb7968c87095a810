from django.apps import AppConfig
from django.db.models.signals import post_migrate


class BreakpointsConfig(AppConfig):
    name = "breakpoints"
    verbose_name = "Breakpoints"

    def ready(self) -> None:
        # Here, not at the top: this module is imported while the app registry is filled,
        # before any model may be imported (tests/test_structure.py allows exactly these).
        from breakpoints.accounts import role_groups_sync
        from breakpoints.api import schema  # noqa: F401 - registers the OpenAPI auth scheme

        post_migrate.connect(role_groups_sync, dispatch_uid="bpm-role-groups")
