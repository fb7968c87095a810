"""Run fill.main or snapshot.main under the settings of the tree in the current directory.

`python <this dir>/run.py fill|snapshot ARGS...`, with the tree to run (the base
commit's or the code under test) on PYTHONPATH and as the working directory. Static
files are served unhashed: these throwaway trees never run collectstatic, and the pages
are read for their content, not their assets.
"""

import importlib
import os
import sys

import django
from django.test.utils import override_settings

PLAIN_STATIC_FILES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}


def main(script: str, *args: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    with override_settings(STORAGES=PLAIN_STATIC_FILES):
        importlib.import_module(script).main(*args)


if __name__ == "__main__":
    main(*sys.argv[1:])
