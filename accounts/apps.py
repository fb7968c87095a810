from django.apps import AppConfig, apps
from django.db.models.signals import post_migrate


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts"

    def ready(self) -> None:
        # Here, not at the top: this module is imported while the app registry is filled,
        # before any model may be imported (tests/test_structure.py allows exactly these).
        from accounts.people import role_groups_sync

        # post_migrate is sent once per app with models, each time after that app's
        # permissions are made (auth connected first): the groups, which take permissions
        # of every app, are synced once, at the last app (13 identical syncs took 0.7 s of
        # a `make run` with nothing to migrate).
        last = [config for config in apps.get_app_configs() if config.models_module][-1]
        post_migrate.connect(role_groups_sync, sender=last, dispatch_uid="bpm-role-groups")
