"""`python -m lib <command>`: the command line (see lib/cli.py); each command imports what it needs."""

import sys

from .cli import main

sys.exit(main())
