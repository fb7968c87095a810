from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps


class ReviewsConfig(AppConfig):
    name = "reviews"
    verbose_name = "Reviews"


class ConsoleAdminConfig(admin_apps.AdminConfig):
    """django.contrib.admin with the console's site (see reviews.sites); in INSTALLED_APPS."""

    default = False  # "reviews" itself still means ReviewsConfig
    default_site = "reviews.sites.ConsoleAdminSite"
