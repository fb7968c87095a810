"""Models to the apps of their subjects (issue 20), with the tables they have.

ApiToken to accounts; AutoApprovalRule, AlwaysBreakOnTag and NotificationRoute to
policies; Webhook and WebhookDelivery to notifications; DecisionLinkUse to channels;
Feedback from reviews to here. Each move is state only (SeparateDatabaseAndState: no
table, index or constraint changes), and the django_content_type rows are repointed, so
permission grants and admin history keep pointing at the same models.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


# (old app label, model) -> new app label
MOVED = {
    ("breakpoints", "apitoken"): "accounts",
    ("breakpoints", "autoapprovalrule"): "policies",
    ("breakpoints", "alwaysbreakontag"): "policies",
    ("breakpoints", "notificationroute"): "policies",
    ("breakpoints", "webhook"): "notifications",
    ("breakpoints", "webhookdelivery"): "notifications",
    ("breakpoints", "decisionlinkuse"): "channels",
    ("reviews", "feedback"): "breakpoints",
}


def _repoint(apps, moves):
    """Each moved model's content type row to its new label (permissions and admin
    history follow the row). Where both rows exist, the old one's grants and history
    move to the new one and the old row goes."""
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    LogEntry = apps.get_model("admin", "LogEntry")
    for (old_label, model), new_label in moves:
        old = ContentType.objects.filter(app_label=old_label, model=model).first()
        if old is None:
            continue
        new = ContentType.objects.filter(app_label=new_label, model=model).first()
        if new is None:
            old.app_label = new_label
            old.save(update_fields=["app_label"])
            continue
        taken = set(Permission.objects.filter(content_type=new).values_list("codename", flat=True))
        Permission.objects.filter(content_type=old).exclude(codename__in=taken).update(
            content_type=new
        )
        for permission in Permission.objects.filter(content_type=old):
            twin = Permission.objects.get(content_type=new, codename=permission.codename)
            twin.user_set.add(*permission.user_set.all())
            twin.group_set.add(*permission.group_set.all())
        LogEntry.objects.filter(content_type=old).update(content_type=new)
        old.delete()


def content_types_repoint(apps, schema_editor):
    _repoint(apps, MOVED.items())


def content_types_restore(apps, schema_editor):
    _repoint(apps, [((new, model), old) for (old, model), new in MOVED.items()])


class Migration(migrations.Migration):

    dependencies = [
        ('breakpoints', '0014_forwarded_deliveries'),
        ('reviews', '0004_via_trigger'),
        ('accounts', '0001_initial'),
        ('policies', '0001_initial'),
        ('notifications', '0001_initial'),
        ('channels', '0001_initial'),
        ('contenttypes', '0002_remove_content_type_name'),
        ('admin', '0003_logentry_add_action_flag_choices'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='Feedback',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('author', models.CharField(help_text='Username at the time of writing.', max_length=150)),
                        ('comment', models.TextField(blank=True)),
                        ('releases', models.BooleanField(default=False, help_text='This comment released the breakpoint.')),
                        ('approved', models.BooleanField(blank=True, null=True)),
                        ('option', models.CharField(blank=True, max_length=500, null=True)),
                        ('via', models.CharField(blank=True, choices=[('api', 'Api'), ('console', 'Console'), ('slack', 'Slack'), ('email', 'Email'), ('jira', 'Jira'), ('trigger', 'Trigger')], help_text='Where it was given.', max_length=16)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('author_user', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL)),
                        ('breakpoint', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='feedback', to='breakpoints.breakpoint')),
                    ],
                    options={
                        'verbose_name_plural': 'feedback',
                        'db_table': 'reviews_feedback',
                        'ordering': ['created_at', 'id'],
                    },
                ),
                migrations.DeleteModel(
                    name='AlwaysBreakOnTag',
                ),
                migrations.RemoveField(
                    model_name='apitoken',
                    name='user',
                ),
                migrations.DeleteModel(
                    name='AutoApprovalRule',
                ),
                migrations.RemoveField(
                    model_name='decisionlinkuse',
                    name='breakpoint',
                ),
                migrations.RemoveField(
                    model_name='decisionlinkuse',
                    name='user',
                ),
                migrations.DeleteModel(
                    name='NotificationRoute',
                ),
                migrations.RemoveField(
                    model_name='webhookdelivery',
                    name='webhook',
                ),
                migrations.RemoveField(
                    model_name='webhookdelivery',
                    name='breakpoint',
                ),
                migrations.DeleteModel(
                    name='ApiToken',
                ),
                migrations.DeleteModel(
                    name='DecisionLinkUse',
                ),
                migrations.DeleteModel(
                    name='Webhook',
                ),
                migrations.DeleteModel(
                    name='WebhookDelivery',
                ),
                migrations.AddIndex(
                    model_name='feedback',
                    index=models.Index(fields=['breakpoint', 'created_at'], name='feedback_bp_created'),
                ),
            ],
        ),
        migrations.RunPython(content_types_repoint, content_types_restore),
    ]
