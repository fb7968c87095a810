#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    if "DEBUG" not in os.environ and "SECRET_KEY" not in os.environ:
        # A bare local checkout (no configuration at all) is development. Production sets
        # SECRET_KEY, and the web server and workers never take this default.
        os.environ["DEBUG"] = "1"
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
