"""The configuration's generation: a number that moves whenever the configuration changes."""

from django.db import models


class ConfigurationGeneration(models.Model):
    """The one row of `bpm_configuration_generation`: `n` is a new value after every statement
    that changes a configuration table (routes, rules, always-break-on tags, webhooks).

    Triggers move it (policies.configuration), committed or rolled back with the change
    itself; the table is made by the migrations, not by Django (managed = False), so that a
    test database's flush leaves its row in place.
    """

    id = models.SmallIntegerField(primary_key=True)
    n = models.BigIntegerField()

    class Meta:
        managed = False
        db_table = "bpm_configuration_generation"

    def __str__(self) -> str:
        return f"generation {self.n}"
