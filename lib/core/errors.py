"""One error model: `DashmemError` is the base of every error whose message is meant for a person.

A DashmemError's message is plain language for whoever uses the app or the
CLI: what went wrong and, where it helps, what to do; never a traceback, a
server path the person did not give, or a secret value. The pages show it with
`app_pages.ui.user_errors` and the CLI prints it as one line; anything else
that escapes is a bug, shown as a generic message while its traceback goes to
the log.

Each family keeps its other base, so existing `except` clauses keep working
(`except PermissionError` still catches `PermissionDenied`).

User-facing (subclass DashmemError):

| error | module | other base |
|---|---|---|
| `PermissionDenied` | access | PermissionError |
| `AuthConfigError` | auth | RuntimeError |
| `ConfigRepoError` (and `PublishConflict`, `Busy`) | configrepo | RuntimeError |
| `ValidationFailed` | diagnostics | ValueError |
| `YamlSyntaxError` | yamlio | ValueError |
| `InvalidName` | workspace | ValueError |
| `WorkspaceExists` | workspace | FileExistsError |
| `SecretMissing` | secrets | KeyError |
| `SourceError` | connectors.base | RuntimeError |
| `Refused` (an address a source may not reach) | netguard | Exception |
| `QueryError` (and `QueryRefused`) | warehouse | ValueError |
| `WorkerError` | query_worker | RuntimeError |
| `ModelError` | model | Exception |
| `ExportError` | export | RuntimeError |
| `NothingToDraft` | autodraft | ValueError |
| `ScheduleError` | schedule | ValueError |
| `RefreshBusy` | schedule | RuntimeError |
| `ExplainError` | explain | ValueError |
| `TimeTravelError` | time_travel | ValueError |
| `ReadOnlyData` | time_travel | PermissionError |
| `NoEarlierData` | time_travel | QueryError |
| `ExploreError` | explore | ValueError |

Internal (not DashmemError): `connectors.csv_source._NotUtf8`, and
`connectors.mcp_source.NotRows` / `NoHandshake`. They are raised and caught
inside their module, which turns them into a `SourceError` with a message for
the person; they never reach a page or the CLI. `connectors.policy.Transient`
(a failure worth another attempt) is raised by the sql, rest and mcp connectors
and caught by the retry policy they run under, which turns the last one into a
`SourceError`. Python's own errors (OSError,
KeyError, a bug's TypeError, ...) are not DashmemError either: their text is
not written for a person, so a page or the CLI shows the generic message.

This module imports nothing from the project, so every module (the query
worker's process included) can import it.
"""

from __future__ import annotations


class DashmemError(Exception):
    """An error whose message is written for the person using the app or the CLI; show `str(exc)` as it is."""

    @property
    def user_message(self) -> str:
        """The message to show: `str(exc)`, or a plain fallback when it is empty."""
        text = str(self).strip()
        return text or "the operation could not be completed"
