"""WebhookDelivery is Delivery: the outbox's row for a message on any channel, not only a
webhook's. The table keeps its name; RenameModel renames the content type (Django's
contenttypes does that for a RenameModel), and the permissions' codenames and names follow
here, so grants and admin history stay with the model."""

from django.db import migrations

OLD, NEW = "webhookdelivery", "delivery"


def _rename_permissions(apps, old: str, new: str, old_name: str, new_name: str) -> None:
    Permission = apps.get_model("auth", "Permission")
    for action in ("add", "change", "delete", "view"):
        Permission.objects.filter(
            content_type__app_label="notifications", codename=f"{action}_{old}"
        ).update(codename=f"{action}_{new}", name=f"Can {action} {new_name}")


def permissions_forward(apps, schema_editor):
    _rename_permissions(apps, OLD, NEW, "webhook delivery", "delivery")


def permissions_backward(apps, schema_editor):
    _rename_permissions(apps, NEW, OLD, "delivery", "webhook delivery")


class Migration(migrations.Migration):

    dependencies = [
        ("notifications", "0001_initial"),
        ("breakpoints", "0015_models_to_their_apps"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [
        migrations.RenameModel("WebhookDelivery", "Delivery"),
        migrations.AlterModelOptions(
            name="delivery",
            options={"ordering": ["-created_at"], "verbose_name_plural": "deliveries"},
        ),
        migrations.RunPython(permissions_forward, permissions_backward),
    ]
