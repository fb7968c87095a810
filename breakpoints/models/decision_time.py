"""DecisionTimeStat: how long people took to decide, per key, per expert seats and overall.

A small aggregate of the last 90 days' human decisions, replaced whole by a beat task
(services.decision_times_refresh) and read whole, into each process's memory, by
breakpoints.representation.expected_decision: an agent's status poll never queries it.
"""

from django.db import models


class DecisionBasis(models.TextChoices):
    """What a group of past decisions has in common with the breakpoint it is shown for."""

    KEY = "key", "same key"
    EXPERTS = "experts", "same expert seats"
    ALL = "all", "all decisions"


class DecisionTimeStat(models.Model):
    """One group's p50 and p90 decision time (decidedAt - createdAt), in seconds.

    Only groups with at least MIN_SAMPLES decisions are kept. `value` is the key for
    `key`, the sorted seat names as a JSON array for `experts`, "" for `all`.
    """

    basis = models.CharField(max_length=8, choices=DecisionBasis.choices)
    value = models.TextField(blank=True)
    p50_seconds = models.FloatField()
    p90_seconds = models.FloatField()
    samples = models.PositiveIntegerField()
    refreshed_at = models.DateTimeField()

    class Meta:
        verbose_name = "decision time statistic"

    def __str__(self) -> str:
        return f"{self.basis} {self.value!r}: p50 {self.p50_seconds:.0f} s ({self.samples})"
