"""`streamlit run` with every bcrypt call of the server counted, a line each, in the file COUNT_BCRYPT_TO.

A spy, not a stand-in: the real bcrypt still checks. test_signed_in_reload runs the app server as
`python -m tests.counting_bcrypt run app.py ...` to see which page loads check a password.
"""

from __future__ import annotations

import functools
import os
import sys

import bcrypt


def _counted(name: str):
    real = getattr(bcrypt, name)

    @functools.wraps(real)
    def counted(*args, **kwargs):
        with open(os.environ["COUNT_BCRYPT_TO"], "a", encoding="utf-8") as out:
            out.write(name + "\n")
        return real(*args, **kwargs)

    return counted


for _name in ("checkpw", "hashpw", "kdf"):
    setattr(bcrypt, _name, _counted(_name))

if __name__ == "__main__":
    from streamlit.web.cli import main

    sys.exit(main(prog_name="streamlit"))
