"""Email: mails with one-time decision links, and the page behind them."""

# Its routes' spec kind, its deliveries' channel and its feedback's via.
EMAIL = "email"
