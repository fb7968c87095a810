"""`python -m bpm_client ARGS` is `bpm ARGS`: what the git hooks run (`bpm events hooks
install`), by the interpreter's absolute path, whatever PATH git runs them with."""

import sys

from .cli import main

sys.exit(main())
