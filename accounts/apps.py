from django.apps import AppConfig
from django.db.models.signals import post_migrate


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts"

    def ready(self) -> None:
        # Here, not at the top: this module is imported while the app registry is filled,
        # before any model may be imported (tests/test_structure.py allows exactly these).
        from accounts.people import role_groups_sync

        post_migrate.connect(role_groups_sync, dispatch_uid="bpm-role-groups")
