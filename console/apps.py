from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps


class ConsoleConfig(AppConfig):
    """The reviewer console. Its label stays "reviews", the app's name when it was created:
    its migrations, permissions and admin history are recorded under that label."""

    name = "console"
    label = "reviews"
    verbose_name = "Reviews"


class ConsoleAdminConfig(admin_apps.AdminConfig):
    """django.contrib.admin with the console's site (see console.sites); in INSTALLED_APPS."""

    default = False  # "console" itself still means ConsoleConfig
    default_site = "console.sites.ConsoleAdminSite"
