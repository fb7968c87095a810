#!/bin/sh
# The image's build stage: a virtualenv with the dependencies pyproject.toml declares
# (the code itself runs from /app), then without pip, which the image does not need.
#   build-venv VENV PYPROJECT
# PIP_CERT (a CA bundle mounted for the build) and PIP_INDEX_URL are used when given.
set -eu
venv=$1
pyproject=$2

# An empty build argument means "not given", not "an empty path" or "no index".
if [ -z "${PIP_CERT:-}" ] || [ ! -r "${PIP_CERT:-}" ]; then unset PIP_CERT; fi
if [ -z "${PIP_INDEX_URL:-}" ]; then unset PIP_INDEX_URL; fi
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_DEFAULT_TIMEOUT=120

python3 -m venv "$venv"
python3 -c '
import sys, tomllib
with open(sys.argv[1], "rb") as file:
    print("\n".join(tomllib.load(file)["project"]["dependencies"]))
' "$pyproject" >/tmp/requirements.txt
"$venv/bin/pip" install --quiet -r /tmp/requirements.txt
"$venv/bin/pip" uninstall --quiet --yes pip setuptools
# Translations' sources: gettext reads the compiled .mo files beside them.
find "$venv" -name '*.po' -type f -delete
rm -f /tmp/requirements.txt
