"""The policies' console screens (admins): auto-approval rules and always-break-on tags
(with an evaluator), notification routes.

Importing the modules registers their ModelAdmins with the admin site.
"""

from policies.admin import routes, rules

__all__ = ["routes", "rules"]
