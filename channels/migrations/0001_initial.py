"""The email decision links' uses, moved here from the breakpoints app
(table breakpoints_decisionlinkuse)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('breakpoints', '0014_forwarded_deliveries'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        # State only: the tables exist already and keep their names.
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='DecisionLinkUse',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('nonce', models.CharField(max_length=64, unique=True)),
                        ('used_at', models.DateTimeField(auto_now_add=True)),
                        ('outcome', models.CharField(help_text='What the link decided: approved, rejected.', max_length=16)),
                        ('breakpoint', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='decision_link_uses', to='breakpoints.breakpoint')),
                        ('user', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'breakpoints_decisionlinkuse',
                        'ordering': ['-used_at'],
                    },
                ),
            ],
        ),
    ]
