"""Local stand-ins for the services the channels talk to (Slack, JIRA, ...), on 127.0.0.1 only."""
