from django.db import migrations

from policies.configuration import watch


class Migration(migrations.Migration):
    """Every change to the webhooks moves the configuration's generation: a process's copy of
    the active webhooks (notifications.outbox) is read again after it (policies.configuration)."""

    dependencies = [
        ('notifications', '0003_delivery_body_rows'),
        ('policies', '0003_configuration_generation'),
    ]

    operations = [watch('breakpoints_webhook')]
