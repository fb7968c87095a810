"""JIRA: an issue per breakpoint, and the webhook that decides by its status."""

# Its routes' spec kind, its deliveries' channel and its feedback's via.
JIRA = "jira"
