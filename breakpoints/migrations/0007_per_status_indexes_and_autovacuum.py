"""A partial index per status, and autovacuum settings for a queue table (PostgreSQL).

Breakpoints are a queue: rows are inserted waiting and then each one is updated once,
often many at a time (a TTL sweep, a fleet's run ending), so the newest rows can all share
one status. The (status, created_at) index lost to bp_created in the planner (a
multi-column index's heap correlation is discounted), which then walked past every newer
row of another status: after a sweep expired the 100,000 newest of 1,000,000 rows,
`?status=waiting` read all of them. One single-column partial index per status wins
that comparison, and a row sits in exactly one of them, as it did in the old index.

Every such update also leaves a dead row version and dead index entries behind until
VACUUM. With the server defaults (autovacuum_vacuum_scale_factor 0.2,
autovacuum_analyze_scale_factor 0.1) a table of 1,000,000 rows is vacuumed only after
200,000 dead rows and analyzed after 100,000 changes: that sweep triggers neither. The
per-table settings below make both follow about 1 % of the table.
"""

from django.db import migrations, models

TABLE = "breakpoints_breakpoint"
# Vacuum after 1,000 + 1 % dead rows, analyze after 1,000 + 1 % changed rows, and vacuum
# after 5 % new rows too (it sets the visibility map that index-only scans, such as the
# console's counts, rely on).
AUTOVACUUM = {
    "autovacuum_vacuum_scale_factor": "0.01",
    "autovacuum_vacuum_threshold": "1000",
    "autovacuum_analyze_scale_factor": "0.01",
    "autovacuum_analyze_threshold": "1000",
    "autovacuum_vacuum_insert_scale_factor": "0.05",
}


def autovacuum_set(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    settings = ", ".join(f"{name} = {value}" for name, value in AUTOVACUUM.items())
    schema_editor.execute(f"ALTER TABLE {TABLE} SET ({settings})")


def autovacuum_reset(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f"ALTER TABLE {TABLE} RESET ({', '.join(AUTOVACUUM)})")


def status_index(status):
    return models.Index(
        condition=models.Q(("status", status)),
        fields=["-created_at"],
        name=f"bp_{status}_created",
    )


class Migration(migrations.Migration):
    dependencies = [
        ("breakpoints", "0006_queue_order_index"),
    ]

    operations = [
        *(
            migrations.AddIndex(model_name="breakpoint", index=status_index(status))
            for status in ("waiting", "released", "expired", "cancelled")
        ),
        migrations.RemoveIndex(model_name="breakpoint", name="bp_status_created"),
        migrations.RunPython(autovacuum_set, autovacuum_reset),
    ]
