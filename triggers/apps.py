from django.apps import AppConfig


class TriggersConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "triggers"
    verbose_name = "External events"
