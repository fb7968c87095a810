from django.apps import AppConfig


class BreakpointsConfig(AppConfig):
    name = "breakpoints"
    verbose_name = "Breakpoints"

    def ready(self) -> None:
        from breakpoints.api import schema  # noqa: F401 - registers the OpenAPI auth scheme
