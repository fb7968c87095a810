# requestedBy, preventSelfReview and payloadDigest (issue 22). The breakpoints still
# waiting get their digest now (they may still be decided, and a receipt names it);
# finished ones keep null: nobody was shown a digest for them.

from django.db import migrations, models

from core.digests import content_digest


def digest_waiting(apps, schema_editor):
    Breakpoint = apps.get_model("breakpoints", "Breakpoint")
    waiting = Breakpoint.objects.filter(status="waiting", payload_digest__isnull=True)
    batch = []
    for bp in waiting.only("pk", "question", "title", "payload").iterator(chunk_size=500):
        bp.payload_digest = content_digest(question=bp.question, title=bp.title, payload=bp.payload)
        batch.append(bp)
        if len(batch) == 500:
            Breakpoint.objects.bulk_update(batch, ["payload_digest"])
            batch = []
    Breakpoint.objects.bulk_update(batch, ["payload_digest"])


class Migration(migrations.Migration):

    dependencies = [
        ("breakpoints", "0015_models_to_their_apps"),
    ]

    operations = [
        migrations.AddField(
            model_name="breakpoint",
            name="payload_digest",
            field=models.CharField(blank=True, editable=False, max_length=71, null=True),
        ),
        migrations.AddField(
            model_name="breakpoint",
            name="prevent_self_review",
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name="breakpoint",
            name="requested_by",
            field=models.CharField(blank=True, max_length=254, null=True),
        ),
        migrations.RunPython(digest_waiting, migrations.RunPython.noop, elidable=True),
    ]
