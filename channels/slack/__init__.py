"""Slack: messages with decision buttons, and the interactions they send back."""

# Its routes' spec kind, its deliveries' channel and its feedback's via.
SLACK = "slack"
