from django.apps import AppConfig


class BreakpointsConfig(AppConfig):
    name = "breakpoints"
    verbose_name = "Breakpoints"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from breakpoints.accounts import role_groups_sync
        from breakpoints.api import schema  # noqa: F401 - registers the OpenAPI auth scheme

        post_migrate.connect(role_groups_sync, dispatch_uid="bpm-role-groups")
