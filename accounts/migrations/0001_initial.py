"""ApiToken, moved here from the breakpoints app (table breakpoints_apitoken)."""

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
                    name='ApiToken',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('kind', models.CharField(choices=[('agent', 'Agent'), ('user', 'Personal (user)')], max_length=8)),
                        ('name', models.CharField(blank=True, max_length=200)),
                        ('agent_id', models.CharField(blank=True, max_length=128, null=True)),
                        ('prefix', models.CharField(db_index=True, max_length=16)),
                        ('token_hash', models.CharField(max_length=64, unique=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('last_used_at', models.DateTimeField(blank=True, null=True)),
                        ('revoked_at', models.DateTimeField(blank=True, null=True)),
                        ('user', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='api_tokens', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'breakpoints_apitoken',
                        'ordering': ['-created_at'],
                        'constraints': [models.CheckConstraint(condition=models.Q(models.Q(('agent_id__isnull', False), ('kind', 'agent'), ('user__isnull', True)), models.Q(('agent_id__isnull', True), ('kind', 'user'), ('user__isnull', False)), _connector='OR'), name='token_bound_to_agent_or_user')],
                    },
                ),
            ],
        ),
    ]
