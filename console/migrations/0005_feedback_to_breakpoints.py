"""Feedback moved to the breakpoints app (its table keeps its name: reviews_feedback)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('reviews', '0004_via_trigger'),
        ('breakpoints', '0015_models_to_their_apps'),
    ]

    operations = [
        # State only: the table now belongs to breakpoints.Feedback.
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name='Feedback')],
        ),
    ]
