"""Auto-approval rules, always-break-on tags and notification routes, moved here from
the breakpoints app (their tables keep their names)."""

import policies.models.rule
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('breakpoints', '0014_forwarded_deliveries'),
    ]

    operations = [
        # State only: the tables exist already and keep their names.
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='AlwaysBreakOnTag',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('tag', models.CharField(max_length=100, unique=True)),
                        ('note', models.TextField(blank=True)),
                        ('created_by', models.CharField(blank=True, max_length=200)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        'verbose_name': 'always-break-on tag',
                        'db_table': 'breakpoints_alwaysbreakontag',
                        'ordering': ['tag'],
                    },
                ),
                migrations.CreateModel(
                    name='AutoApprovalRule',
                    fields=[
                        ('id', models.CharField(default=policies.models.rule.new_rule_id, editable=False, max_length=13, primary_key=True, serialize=False)),
                        ('pattern', models.CharField(help_text="Canonical form, e.g. gate.*(tags contains 'prerequisites' AND expert = 'owner').", max_length=500)),
                        ('action', models.CharField(choices=[('auto-approve', 'Auto-approve'), ('never-auto-approve', 'Never auto-approve')], default='auto-approve', max_length=32)),
                        ('note', models.TextField(blank=True)),
                        ('created_by', models.CharField(help_text='Username at the time of creation.', max_length=200)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        'verbose_name': 'auto-approval rule',
                        'db_table': 'breakpoints_autoapprovalrule',
                        'ordering': ['created_at', 'id'],
                    },
                ),
                migrations.CreateModel(
                    name='NotificationRoute',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(max_length=100, unique=True)),
                        ('pattern', models.CharField(max_length=500)),
                        ('channels', models.JSONField(default=list)),
                        ('defaults', models.JSONField(blank=True, default=dict)),
                        ('enabled', models.BooleanField(default=True)),
                        ('created_by', models.CharField(blank=True, max_length=200)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        'db_table': 'breakpoints_notificationroute',
                        'ordering': ['name'],
                    },
                ),
            ],
        ),
    ]
