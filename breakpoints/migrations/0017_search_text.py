# search_text: UPPER(title, a newline, question), a stored generated column that ?search=
# and the console's search box match with one LIKE per row (issue 23). On PostgreSQL one
# trigram index on it replaces the two on UPPER(title) and UPPER(question) (0005), and the
# list's order index carries it.
#
# Adding a stored generated column rewrites the table under an exclusive lock: about a
# minute per million breakpoints on a small machine (README, "Upgrading").

from django.db import migrations, models
from django.db.models.functions import Concat, Upper

OLD_INDEXES = {
    "bp_title_trgm": "UPPER((title)::text)",
    "bp_question_trgm": "UPPER((question)::text)",
}


def trigram_index_create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(
        "CREATE INDEX IF NOT EXISTS bp_search_trgm ON breakpoints_breakpoint "
        "USING gin (search_text gin_trgm_ops)"
    )
    for name in OLD_INDEXES:
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


def trigram_index_drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name, expression in OLD_INDEXES.items():
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {name} ON breakpoints_breakpoint "
            f"USING gin ({expression} gin_trgm_ops)"
        )
    schema_editor.execute("DROP INDEX IF EXISTS bp_search_trgm")


class Migration(migrations.Migration):
    dependencies = [
        ("breakpoints", "0016_requester_and_digest"),
    ]

    operations = [
        migrations.AddField(
            model_name="breakpoint",
            name="search_text",
            field=models.GeneratedField(
                db_persist=True,
                expression=Upper(
                    Concat("title", models.Value("\n"), "question", output_field=models.TextField())
                ),
                output_field=models.TextField(),
            ),
        ),
        # The list's order index carries id and search_text, so a search finds a page's
        # keys in it alone (selectors.breakpoint_page_keys).
        migrations.RemoveIndex(model_name="breakpoint", name="bp_created"),
        migrations.AddIndex(
            model_name="breakpoint",
            index=models.Index(
                fields=["-created_at"], include=("id", "search_text"), name="bp_created"
            ),
        ),
        migrations.RunPython(trigram_index_create, trigram_index_drop),
    ]
