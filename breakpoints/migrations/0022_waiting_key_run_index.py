# The queue's groups (selectors.breakpoint_groups): waiting breakpoints counted by key and
# run, with the oldest of each, read from this partial index alone (an index-only scan).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('breakpoints', '0021_feedback_via_from_the_channels'),
    ]

    operations = [
        migrations.AddIndex(
            model_name='breakpoint',
            index=models.Index(condition=models.Q(('status', 'waiting')), fields=['key', 'run_id', 'created_at'], name='bp_waiting_key_run'),
        ),
    ]
