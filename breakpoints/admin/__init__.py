"""The breakpoints app's admin-only console screens, one module per subject.

- tokens: agent tokens (create shown once, revoke)
- webhooks: subscriptions and deliveries (re-send)
- rules: auto-approval rules and always-break-on tags (with an evaluator)
- people: users, with product roles for admins (the stock form stays for superusers)
- routes: notification routes (which channels hear about which breakpoints)

The Breakpoint queue and review screens live in reviews/admin.py (the console app).
Importing the modules registers their ModelAdmins with the admin site.
"""

from breakpoints.admin import people, routes, rules, tokens, webhooks

__all__ = ["people", "routes", "rules", "tokens", "webhooks"]
