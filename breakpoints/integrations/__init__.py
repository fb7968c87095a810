"""Inbound HTTP from the channels: Slack interactions, email decision links, JIRA webhooks.

Each endpoint verifies its caller before it parses anything, maps the far side's user to
a reviewer, and decides through the same services (and permissions) as the API.
"""
