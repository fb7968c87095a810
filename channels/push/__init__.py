"""Web Push: a notification on each device where a reviewer turned them on (the console's
Devices page), opening the breakpoint's review page when tapped."""

# Its routes' spec kind and its deliveries' channel.
PUSH = "push"
