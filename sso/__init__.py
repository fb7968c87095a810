"""Reviewers sign in with the company's identity provider: OpenID Connect (docs/sso.md)."""
