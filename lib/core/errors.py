"""One error model: `DashmemError` is the base of every error whose message is meant for a person.

A DashmemError's message is plain language for whoever uses the app or the
CLI: what went wrong and, where it helps, what to do; never a traceback, a
server path the person did not give, or a secret value. The pages show it with
`app_pages.ui.user_errors` and the CLI prints it as one line; anything else
that escapes is a bug, shown as a generic message while its traceback goes to
the log.

Each family keeps its other base, so existing `except` clauses keep working
(`except PermissionError` still catches `PermissionDenied`).

User-facing (subclass DashmemError), by wing; a test keeps this table equal to the code:

| error | module | other base |
|---|---|---|
| `ValidationFailed` | core.diagnostics | ValueError |
| `SettingError` | core.settings | ValueError |
| `UnknownSetting` | core.settings | LookupError |
| `UnknownRule` | memory.rule_review | KeyError |
| `SecretMissing` | memory.secrets | KeyError |
| `InvalidName` | memory.workspace | ValueError |
| `WorkspaceExists` | memory.workspace | FileExistsError |
| `ScheduleError` | memory.intervals | ValueError |
| `YamlSyntaxError` | memory.yamlio | ValueError |
| `PermissionDenied` | roles.access | PermissionError |
| `AccessChangeRefused` | roles.access | ValueError |
| `AuthConfigError` | roles.auth | RuntimeError |
| `DraftChanged` | repo.drafts | ConfigRepoError |
| `PublishConflict` | repo.drafts | ConfigRepoError |
| `Busy` | repo.gitops | ConfigRepoError |
| `CheckoutBehind` | repo.gitops | ConfigRepoError |
| `ConfigRepoError` | repo.gitops | RuntimeError |
| `RemoteUnreachable` | repo.replica | ConfigRepoError |
| `SourceError` | data.connectors.base | RuntimeError |
| `NoEarlierData` | data.engine | QueryError |
| `LiveProfileError` | data.live_profile | Exception |
| `Refused` | data.netguard | Exception |
| `WorkerError` | data.query_worker | RuntimeError |
| `QueryError` | data.sandbox | ValueError |
| `QueryRefused` | data.sandbox | QueryError |
| `StandInRefused` | data.standins | QueryRefused |
| `NothingToDraft` | artifacts.autodraft | ValueError |
| `DrilldownError` | artifacts.drilldown | ValueError |
| `ExplainError` | artifacts.explain | ValueError |
| `ExploreError` | artifacts.explore | ValueError |
| `ExportError` | artifacts.export | RuntimeError |
| `ReportExportError` | artifacts.report_export | RuntimeError |
| `ReadOnlyData` | artifacts.time_travel | PermissionError |
| `TimeTravelError` | artifacts.time_travel | ValueError |
| `RefreshBusy` | ops.schedule | RuntimeError |
| `AlertError` | delivery.alerts | ValueError |
| `MailError` | delivery.mail | RuntimeError |
| `DeliveryError` | delivery.run | ValueError |
| `WebhookError` | delivery.webhook | RuntimeError |
| `ModelError` | chat.model | Exception |

Internal (not DashmemError): `data.connectors.csv_source._NotUtf8`,
`data.connectors.mcp_source.NoHandshake` and `data.connectors.result_text.NotRows`
(raised reading an MCP tool's answer, caught by mcp_source). They are caught inside
their connector, which turns them into a `SourceError` with a message for
the person; they never reach a page or the CLI. `data.connectors.policy.Transient`
(a failure worth another attempt) is raised by the sql, rest and mcp connectors
and caught by the retry policy they run under, which turns the last one into a
`SourceError`. `data.connectors.spark_connect.SparkFailure` (a Spark Connect call that failed, in
plain words) is caught by the live layer, the live profile and the Spark snapshot fetch, which turn it into a
`QueryError`, `LiveProfileError` or `SourceError`. Python's own errors (OSError,
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
