"""`streamlit run` with every network address the server tries to reach written, a line each, to OUTBOUND_LOG_TO.

A spy, not a stand-in: a Python audit hook sees each `socket.connect`, `socket.sendto` and name lookup
(`socket.getaddrinfo`) before it happens, and lets it go on. tests/app/test_start_offline.py runs the app
server as `python -m tests.outbound_log run app.py ...` to see whether a start reaches past loopback.
The first line, `hook installed`, shows the spy was there.
"""

from __future__ import annotations

import json
import os
import sys


def _log(event: str, args: tuple) -> None:
    if event in ("socket.connect", "socket.sendto"):
        where = args[1] if len(args) > 1 else None
    elif event == "socket.getaddrinfo":
        where = args[0] if args else None
    else:
        return
    if isinstance(where, bytes):
        where = where.decode(errors="replace")
    with open(os.environ["OUTBOUND_LOG_TO"], "a", encoding="utf-8") as out:
        out.write(json.dumps([event, where if isinstance(where, (str, int, type(None))) else list(where)]) + "\n")


with open(os.environ["OUTBOUND_LOG_TO"], "a", encoding="utf-8") as _out:
    _out.write("hook installed\n")
sys.addaudithook(_log)

if __name__ == "__main__":
    from streamlit.web.cli import main

    sys.exit(main(prog_name="streamlit"))
