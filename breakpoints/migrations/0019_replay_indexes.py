# The indexes a rule's replay reads alone (breakpoints.rule_replay, issue 38): bp_replay, the
# finished breakpoints by creation with what the precedence reads; bp_rejected, the
# rejections newest first. On PostgreSQL a million breakpoints take seconds to index.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("breakpoints", "0018_replay_columns"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="breakpoint",
            index=models.Index(
                condition=models.Q(("status__in", ("released", "expired", "cancelled"))),
                fields=["created_at"],
                include=(
                    "key",
                    "tags",
                    "experts",
                    "prevent_self_review",
                    "needs_person",
                    "person_decision",
                    "agent_id",
                    "id",
                ),
                name="bp_replay",
            ),
        ),
        migrations.AddIndex(
            model_name="breakpoint",
            index=models.Index(
                condition=models.Q(("person_decision", "rejected")),
                fields=["-created_at", "-id"],
                include=("key", "tags", "experts", "prevent_self_review", "needs_person"),
                name="bp_rejected",
            ),
        ),
    ]
