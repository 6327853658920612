"""A log of the app server's script runs, as the server sees them, for measuring it (DASHMEM_RUN_LOG).

One JSON line per script run: the session, when the server received the
browser's request to run the script (a `rerun_script` message: the first
page, a sign-in, a click), when it had queued the last message of that run
for the browser (its `script_finished`), and how the run ended. The time
between them is the server's part of a page load, without the browser's
drawing, so a benchmark can tell the two apart (bench.app).

Streamlit has no public hook for either moment, so `install` wraps two
methods of its AppSession, once per process, and only when the setting is
on: a served app without it runs Streamlit untouched. The app installs it in
its first script run, so the runs asked for before that one ended (the
process's first) are not logged.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

_LOCK = threading.Lock()
_INSTALLED: list[Path] = []


def install(path: Path) -> None:
    """Log every script run of this process to `path` (appending); a second call changes nothing."""
    from streamlit.runtime.app_session import AppSession
    from streamlit.runtime.scriptrunner import ScriptRunnerEvent

    with _LOCK:
        if _INSTALLED:
            return
        _INSTALLED.append(Path(path))
    asked: dict[str, float] = {}  # session id -> when its pending run was asked for
    ended = {
        ScriptRunnerEvent.SCRIPT_STOPPED_WITH_SUCCESS: "finished",
        ScriptRunnerEvent.SCRIPT_STOPPED_WITH_COMPILE_ERROR: "error",
        ScriptRunnerEvent.SCRIPT_STOPPED_FOR_RERUN: "interrupted",
    }
    handle_backmsg = AppSession.handle_backmsg
    on_event = AppSession._handle_scriptrunner_event_on_event_loop

    def handle_backmsg_logged(self: AppSession, msg: Any) -> None:
        if msg.WhichOneof("type") == "rerun_script":
            asked[self.id] = time.time()
        handle_backmsg(self, msg)

    def on_event_logged(self: AppSession, sender: Any, event: Any, *args: Any, **kwargs: Any) -> None:
        on_event(self, sender, event, *args, **kwargs)  # queues the run's script_finished for the browser
        if event in ended and self.id in asked:
            record({"session": self.id, "asked": asked.pop(self.id), "done": time.time(), "ended": ended[event]})

    AppSession.handle_backmsg = handle_backmsg_logged  # a wrapper with the same signature
    AppSession._handle_scriptrunner_event_on_event_loop = on_event_logged


def record(entry: dict[str, Any]) -> None:
    if not _INSTALLED:
        return
    line = json.dumps(entry) + "\n"
    with _LOCK, _INSTALLED[0].open("a", encoding="utf-8") as out:
        out.write(line)


def read(path: Path) -> list[dict[str, Any]]:
    """The runs logged in `path`, oldest first; a line cut short by a crash is skipped."""
    runs = []
    if not Path(path).exists():
        return runs
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            runs.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return runs
