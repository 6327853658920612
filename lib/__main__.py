"""`python -m lib <command>`: the command line (see lib/cli/__init__.py); each command imports what it needs."""

import sys

from .cli import main

sys.exit(main())
