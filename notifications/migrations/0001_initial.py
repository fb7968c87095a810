"""Webhook subscriptions and the outbox's deliveries, moved here from the breakpoints app
(their tables keep their names)."""

import django.db.models.deletion
import notifications.models
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
                    name='Webhook',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('url', models.URLField(max_length=2000)),
                        ('secret', models.CharField(default=notifications.models.new_webhook_secret, help_text='whsec_<base64> is used base64-decoded; any other secret as UTF-8 bytes.', max_length=200)),
                        ('event_types', models.JSONField(blank=True, default=list, help_text='Subscribed event types; empty means all.')),
                        ('active', models.BooleanField(default=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('removed_at', models.DateTimeField(blank=True, editable=False, help_text='Set when removed: kept with its deliveries for the history, never again sent to, listed or re-activated.', null=True)),
                    ],
                    options={
                        'db_table': 'breakpoints_webhook',
                        'ordering': ['id'],
                    },
                ),
                migrations.CreateModel(
                    name='WebhookDelivery',
                    fields=[
                        ('id', models.CharField(default=notifications.models.new_delivery_id, editable=False, max_length=40, primary_key=True, serialize=False)),
                        ('channel', models.CharField(choices=[('webhook', 'Webhook'), ('slack', 'Slack'), ('email', 'Email'), ('jira', 'Jira')], default='webhook', max_length=16)),
                        ('target', models.JSONField(blank=True, default=dict, help_text='Where a channel sends: Slack channel, address…')),
                        ('reply', models.JSONField(blank=True, default=dict, help_text='What the far end answered (a Slack ts, a JIRA key).')),
                        ('event_type', models.CharField(max_length=40)),
                        ('body', models.JSONField(help_text='The exact JSON sent: {type, timestamp, data}.')),
                        ('status', models.CharField(choices=[('pending', 'Pending'), ('delivered', 'Delivered'), ('failed', 'Failed')], default='pending', max_length=16)),
                        ('attempts', models.PositiveIntegerField(default=0)),
                        ('next_attempt_at', models.DateTimeField()),
                        ('locked_until', models.DateTimeField(blank=True, null=True)),
                        ('last_status_code', models.PositiveIntegerField(blank=True, null=True)),
                        ('last_error', models.TextField(blank=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('delivered_at', models.DateTimeField(blank=True, null=True)),
                        ('breakpoint', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='deliveries', to='breakpoints.breakpoint')),
                        ('webhook', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='deliveries', to='notifications.webhook')),
                    ],
                    options={
                        'verbose_name_plural': 'webhook deliveries',
                        'db_table': 'breakpoints_webhookdelivery',
                        'ordering': ['-created_at'],
                        'indexes': [models.Index(condition=models.Q(('status', 'pending')), fields=['next_attempt_at'], name='delivery_pending_due'), models.Index(condition=models.Q(('status', 'failed')), fields=['-created_at'], name='delivery_failed_created')],
                    },
                ),
            ],
        ),
    ]
