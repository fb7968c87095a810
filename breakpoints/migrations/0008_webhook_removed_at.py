"""Webhooks are removed softly (removed_at); delivery events lose the URL's credentials.

Notification events recorded before this release hold the subscription's full URL,
user:password and query string included: they are rewritten to the redacted form
(scheme, host, port, path), the one new events are recorded with.
"""

from urllib.parse import urlsplit, urlunsplit

from django.db import migrations, models

BATCH = 2000


def _redacted(url: str) -> str:
    # A copy of infra.net.redacted_url: migrations do not follow app code.
    try:
        parts = urlsplit(str(url))
    except ValueError:
        return ""
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))


def redact_notification_urls(apps, schema_editor) -> None:
    Event = apps.get_model("audit", "Event")
    changed = []
    events = Event.objects.filter(type="notification").only("id", "metadata").order_by()
    for event in events.iterator(chunk_size=BATCH):
        metadata = event.metadata
        if not isinstance(metadata, dict) or not isinstance(metadata.get("url"), str):
            continue
        redacted = _redacted(metadata["url"])
        if redacted != metadata["url"]:
            event.metadata = {**metadata, "url": redacted}
            changed.append(event)
        if len(changed) >= BATCH:
            Event.objects.bulk_update(changed, ["metadata"])
            changed = []
    if changed:
        Event.objects.bulk_update(changed, ["metadata"])


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0002_drop_redundant_fk_index"),
        ("breakpoints", "0007_per_status_indexes_and_autovacuum"),
    ]

    operations = [
        migrations.AddField(
            model_name="webhook",
            name="removed_at",
            field=models.DateTimeField(
                blank=True,
                editable=False,
                help_text="Set when removed: kept with its deliveries for the history, never "
                "again sent to, listed or re-activated.",
                null=True,
            ),
        ),
        # Not reversible in substance (the credentials are gone): backwards is a no-op.
        migrations.RunPython(redact_notification_urls, migrations.RunPython.noop),
    ]
