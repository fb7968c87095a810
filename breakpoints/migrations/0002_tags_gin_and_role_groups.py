"""PostgreSQL-only GIN index on tags (jsonb @> filters).

The reviewer/admin groups and their permissions are kept in step after every migrate
by accounts.people.role_groups_sync (a post_migrate handler).
"""

from django.db import migrations

GIN_INDEX = "bp_tags_gin"


def create_gin_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {GIN_INDEX} ON breakpoints_breakpoint "
            "USING gin (tags jsonb_path_ops)"
        )


def drop_gin_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {GIN_INDEX}")


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("breakpoints", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(create_gin_index, drop_gin_index),
    ]
