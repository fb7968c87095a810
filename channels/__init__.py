"""The channels reviewers decide in besides the console, one package per provider, both
directions in each: Slack (slack/), email (email/), JIRA (jira/).

Outbound, each package's `send` is one attempt of a delivery the outbox wrote
(notifications); inbound, each endpoint verifies its caller before it parses anything,
maps the far side's user to a reviewer and decides through the same services (and the
same checks) as the API.
"""
