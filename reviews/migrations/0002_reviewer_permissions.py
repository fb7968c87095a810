"""Model permissions for the console roles.

Reviewers may view breakpoints, feedback and audit events (the console's queue and
review screens); they get no add/change/delete on anything. Admins get every
permission on breakpoints, tokens, feedback, events, users and groups. The console's
ModelAdmins also check the roles themselves; these grants keep Django's own
permission checks (stock User/Group admin, user.has_perm) in agreement.
"""

from django.contrib.auth.management import create_permissions
from django.db import migrations

REVIEWER_PERMISSIONS = [
    ("breakpoints", "view_breakpoint"),
    ("reviews", "view_feedback"),
    ("audit", "view_event"),
]
ADMIN_MODELS = [
    ("breakpoints", "breakpoint"),
    ("breakpoints", "apitoken"),
    ("reviews", "feedback"),
    ("audit", "event"),
    ("auth", "user"),
    ("auth", "group"),
]


def _ensure_permissions(apps):
    """Permissions are normally created after migrate; create them now so we can grant them."""
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None


def grant(apps, schema_editor):
    _ensure_permissions(apps)
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    reviewers, _ = Group.objects.get_or_create(name="reviewers")
    admins, _ = Group.objects.get_or_create(name="admins")
    for app_label, codename in REVIEWER_PERMISSIONS:
        reviewers.permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    for app_label, model in ADMIN_MODELS:
        admins.permissions.add(
            *Permission.objects.filter(content_type__app_label=app_label, content_type__model=model)
        )


def revoke(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for name, perms in (
        ("reviewers", [codename for _, codename in REVIEWER_PERMISSIONS]),
        ("admins", None),
    ):
        group = Group.objects.filter(name=name).first()
        if group is None:
            continue
        if perms is None:
            for app_label, model in ADMIN_MODELS:
                group.permissions.remove(
                    *Permission.objects.filter(
                        content_type__app_label=app_label, content_type__model=model
                    )
                )
        else:
            group.permissions.remove(*Permission.objects.filter(codename__in=perms))


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("breakpoints", "0002_tags_gin_and_role_groups"),
        ("reviews", "0001_initial"),
        ("audit", "0001_initial"),
    ]

    operations = [migrations.RunPython(grant, revoke)]
