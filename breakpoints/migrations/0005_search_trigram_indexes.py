"""PostgreSQL-only trigram indexes for ?search= (title/question icontains).

`icontains` becomes `UPPER(col::text) LIKE UPPER('%term%')`, which no btree serves; GIN
trigram indexes on exactly those expressions turn a full scan into an index scan.
"""

from django.db import migrations

INDEXES = {
    "bp_title_trgm": "UPPER((title)::text)",
    "bp_question_trgm": "UPPER((question)::text)",
}


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    for name, expression in INDEXES.items():
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {name} ON breakpoints_breakpoint "
            f"USING gin ({expression} gin_trgm_ops)"
        )


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name in INDEXES:
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


class Migration(migrations.Migration):
    dependencies = [("breakpoints", "0004_rules_and_routing")]

    operations = [migrations.RunPython(create, drop)]
