# person_decision and needs_person: what a rule's replay (breakpoints.rule_replay, issue 38)
# reads of a finished breakpoint besides its key, tags and experts, kept by the database;
# the indexes that hold it are in 0019.
#
# Adding a stored generated column rewrites the table under an exclusive lock, once per
# column: 4 minutes for a million breakpoints on 2 busy cores (docs/operations.md,
# "Upgrading").

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("breakpoints", "0017_search_text"),
    ]

    operations = [
        migrations.AddField(
            model_name="breakpoint",
            name="needs_person",
            field=models.GeneratedField(
                db_persist=True,
                expression=models.ExpressionWrapper(
                    models.Q(
                        (
                            "auto_approval__reason",
                            "Its form has required fields and no proposal: a person must fill it in; no automatic approval applies",
                        )
                    ),
                    output_field=models.BooleanField(),
                ),
                output_field=models.BooleanField(null=True),
            ),
        ),
        migrations.AddField(
            model_name="breakpoint",
            name="person_decision",
            field=models.GeneratedField(
                db_persist=True,
                expression=models.Case(
                    models.When(
                        models.Q(
                            ("result__approved", True),
                            ("status", "released"),
                            models.Q(("auto_approval__recommended", True), _negated=True),
                            models.Q(("result__respondedBy", "timeout-policy"), _negated=True),
                        ),
                        then=models.Value("approved"),
                    ),
                    models.When(
                        models.Q(
                            ("result__approved", False),
                            ("status", "released"),
                            models.Q(("auto_approval__recommended", True), _negated=True),
                            models.Q(("result__respondedBy", "timeout-policy"), _negated=True),
                        ),
                        then=models.Value("rejected"),
                    ),
                    default=None,
                    output_field=models.CharField(max_length=8),
                ),
                output_field=models.CharField(max_length=8, null=True),
            ),
        ),
    ]
