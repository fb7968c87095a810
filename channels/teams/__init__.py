"""Microsoft Teams: an Adaptive Card per breakpoint, and the button presses it sends back."""

# Its routes' spec kind, its deliveries' channel and its feedback's via.
TEAMS = "teams"
