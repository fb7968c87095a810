"""The accounts' console screens (admins): people with their roles, agent tokens.

Importing the modules registers their ModelAdmins with the admin site.
"""

from accounts.admin import people, tokens

__all__ = ["people", "tokens"]
