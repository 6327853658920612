"""Report export: standalone HTML with paged-media CSS, and a real PDF printed by headless Chromium, read back with pypdf."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import cast

import pandas as pd
import pytest

from lib.artifacts import pdf_print, report_export
from lib.roles.access import OPERATOR
from tests.helpers.report import _python_env, _run, needs_chromium, pages_text, rendered_report

from ..conftest import WORKSPACES

pypdf = pytest.importorskip("pypdf")
CHROMIUM = Path("/usr/bin/chromium")
ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------ HTML


def test_html_is_standalone_with_paged_media_rules(supply):
    folder, wh = supply
    html = report_export.to_html(rendered_report(folder, wh))
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)  # nothing to fetch: it opens offline
    page_rule = html[html.index("@page {") :]
    assert "size: A4;" in page_rule and "margin: 18mm 16mm 20mm 16mm;" in page_rule
    assert '@top-left { content: "Supply chain weekly report";' in page_rule
    assert 'content: "Page " counter(page) " of " counter(pages);' in page_rule
    assert ".component, .kpis, .chart, table, tr { break-inside: avoid; }" in html
    assert ".page-break { break-before: page; }" in html and ".page-break.not-taken { break-before: auto; }" in html
    main = html[html.index("<main>") : html.index("</main>")]
    # reading order: the heading, the KPI row, the prose, ..., the page break before the last heading
    order = [
        main.index(s) for s in ("<h2>Overview</h2>", 'class="row kpis"', 'id="prose_3"', 'id="daily"', 'class="page-break"', "<h2>Site-gates to look at</h2>")
    ]
    assert order == sorted(order)
    assert main.count("data-chart=") == 2 and "{{" not in main


def test_a_title_cannot_break_out_of_the_css_string_or_the_style_element(supply):
    folder, wh = supply
    hostile = 'Weekly" } body { display: none } </style><script>alert(1)</script>'
    html = report_export.to_html(rendered_report(folder, wh, lambda r: r.update(title=hostile)))
    style = html[html.index("<style>") : html.index("</style>") + len("</style>")]
    assert style.count("</style>") == 1 and "<script>alert(1)" not in html
    quoted = report_export.css_string(hostile)
    assert f"@top-left {{ content: {quoted};" in style and '"' not in quoted[1:-1]  # the quote that would end the string is escaped
    assert report_export.css_string('a"b\\c</style>') == '"a\\22 b\\5c c\\3c /style\\3e "'


def test_chosen_parameters_are_printed_with_the_report(supply):
    folder, wh = supply
    html = report_export.to_html(rendered_report(folder, wh, params={"site": ["Brno", "Porto"]}))
    assert "Sites: Brno, Porto" in html


# ------------------------------------------------------------------ PDF


@needs_chromium
def test_pdf_after_a_refresh_holds_this_weeks_figures_across_processes(tmp_path):
    folder = tmp_path / "supply-chain-weekly"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    env = _python_env(tmp_path)
    assert _run(["refresh", str(folder)], env, tmp_path).returncode == 0  # last week's data
    shutil.copy(folder / "data" / "next_week" / "gates.csv", folder / "data" / "gates.csv")  # Monday's new file
    refreshed = _run(["refresh", str(folder)], env, tmp_path)  # one process loads it...
    assert refreshed.returncode == 0, refreshed.stderr
    out = tmp_path / "out" / "weekly.pdf"
    exported = _run(["export", str(folder), "--pdf", str(out)], env, tmp_path)  # ...another prints it
    assert exported.returncode == 0, exported.stdout + exported.stderr
    assert "wrote" in exported.stdout and str(out) in exported.stdout

    pdf = out.read_bytes()
    assert pdf.startswith(b"%PDF-")
    pages = pages_text(pdf)
    text = "\n".join(pages)
    df = pd.read_csv(folder / "data" / "gates.csv")  # the figures, computed independently from the CSV
    units, target = df.actual.sum(), df.target.sum()
    per_site = cast(pd.DataFrame, df.groupby("site")[["actual", "target"]].sum())  # pandas' own types: any of its results
    best = (per_site.actual / per_site.target).idxmax()
    per_gate = cast(pd.DataFrame, df.groupby(["site", "gate"])[["actual", "target"]].sum())
    missed = int((per_gate.actual / per_gate.target < 0.95).sum())
    flat = " ".join(text.split())
    assert f"Week {df.week.max()}" in flat and "2026-W47" not in flat
    assert f"{units:,.0f} units went through the gates" in flat
    assert f"target of {target:,.0f}" in flat
    assert f"an attainment of {units / target * 100:.1f}%" in flat
    assert f"Strongest site: {best} at {(per_site.actual / per_site.target).max() * 100:.1f}%" in flat
    assert f"{missed} site-gates finished the week below target" in flat
    worst = per_gate.assign(a=per_gate.actual / per_gate.target).sort_values("a").iloc[0]
    assert f"{worst.name[0]} {worst.name[1]} {worst.target:,.0f} {worst.actual:,.0f}" in flat  # the table's first row


@needs_chromium
def test_every_page_has_the_running_header_and_footer(supply):
    folder, wh = supply
    pdf = report_export.to_pdf(report_export.to_html(rendered_report(folder, wh)))
    pages = pages_text(pdf)
    assert len(pages) >= 2  # the page break makes at least two
    for number, text in enumerate(pages, 1):
        assert "Supply chain weekly report" in text, number
        assert f"Page {number} of {len(pages)}" in text, text
        assert f"Data version {wh.current().id}" in text
    assert "Site-gates to look at" in pages[-1] and "Site-gates to look at" not in pages[0]  # after the page break


def _used(pdf: bytes) -> list[float]:
    """How far down each page its content reaches, from 0 (empty) to 1 (the bottom margin): the lowest text
    between the running header and footer, which sit in the margins."""
    import io

    reader = pypdf.PdfReader(io.BytesIO(pdf))
    out = []
    for page in reader.pages:
        height_pt = float(page.mediabox.height)
        top, bottom = height_pt - 18 * 72 / 25.4, 20 * 72 / 25.4  # the content box inside MARGINS
        lows: list[float] = []

        def seen(text, cm, tm, font, size, lows=lows, top=top, bottom=bottom):
            y = cm[1] * tm[4] + cm[3] * tm[5] + cm[5]
            if text.strip() and bottom < y < top:
                lows.append(y)

        page.extract_text(visitor_text=seen)
        out.append((top - min(lows)) / (top - bottom) if lows else 0.0)
    return out


@needs_chromium
def test_no_page_is_left_mostly_blank_by_a_page_break_after_a_chart_that_moved_on(supply):
    """Issue #31, 14: the demo's second page held one chart, pushed there whole, then the page break: two thirds
    of it blank. A page break that would end a page less than two thirds full is not taken."""
    folder, wh = supply
    pages = report_export.to_pdf(report_export.to_html(rendered_report(folder, wh)))
    used = _used(pages)
    assert len(used) >= 2 and all(u >= 2 / 3 for u in used[:-1]), used
    texts = pages_text(pages)
    assert "Site-gates to look at" in texts[-1] and "The ten lowest site-gates this week" in texts[-1]


@needs_chromium
@pytest.mark.parametrize("spacer_px,pages", [(0, 1), (700, 2)])
def test_a_page_break_is_taken_when_the_page_it_ends_is_full_enough(supply, spacer_px, pages):
    folder, wh = supply
    short = [
        {"type": "heading", "text": "First part", "level": 1},
        {"type": "prose", "markdown": "Week **{{week.week}}**."},
        {"type": "page_break"},
        {"type": "heading", "text": "Second part", "level": 1},
        {"type": "prose", "markdown": "Sites: {{week.sites}}."},
    ]
    html = report_export.to_html(rendered_report(folder, wh, lambda r: r.update(sections=short)))
    html = html.replace("<main>", f'<main>\n<div style="height: {spacer_px}px"></div>', 1)
    texts = pages_text(report_export.to_pdf(html))
    assert len(texts) == pages and "Second part" in texts[-1] and "Sites: 6." in texts[-1]
    assert ("First part" in texts[-1]) is (pages == 1)


def _page_of(pages: list[str], needle: str) -> int:
    found = [i for i, text in enumerate(pages) if needle in text]
    assert len(found) == 1, (needle, found)
    return found[0]


@needs_chromium
@pytest.mark.parametrize("keep_whole", [True, False])
def test_no_chart_is_split_across_a_page_break(supply, monkeypatch, keep_whole):
    """A chart that would straddle the page's end moves whole to the next page: its title, axes and legend
    on one page. Without the rules (the second case) the same layout splits it, so the test can see a split."""
    folder, wh = supply
    if not keep_whole:
        loose = report_export.PRINT_STYLE.replace("break-inside: avoid", "break-inside: auto").replace("break-after: avoid", "break-after: auto")
        monkeypatch.setattr(report_export, "PRINT_STYLE", loose)
        monkeypatch.setattr(report_export, "STYLE", report_export.STYLE.replace("break-inside: avoid", "break-inside: auto"))
    html = report_export.to_html(rendered_report(folder, wh, lambda r: r.update(sections=[s for s in r["sections"] if s.get("id") == "daily"])))
    # Push the chart down so that it starts near the end of the first page (A4 content height is about 980 px).
    html = html.replace("<main>", '<main>\n<div style="height: 720px"></div>', 1)
    pages = pages_text(report_export.to_pdf(html))
    title, axis, legend = (_page_of(pages, s) for s in ("Daily attainment by gate", "Nov 22, 2026", "Process"))
    assert (title == axis == legend) is keep_whole, pages


def test_a_missing_chromium_is_a_clear_error_and_writes_nothing(supply, tmp_path, monkeypatch):
    folder, wh = supply
    monkeypatch.setenv("DASHMEM_CHROMIUM", str(tmp_path / "no-chromium"))
    out = tmp_path / "r.pdf"
    with pytest.raises(report_export.ReportExportError, match="PDF export needs Chromium.*DASHMEM_CHROMIUM"):
        report_export.export_report(folder, tmp_path / "r.html", out, wh, user=OPERATOR)
    assert not out.exists() and not (tmp_path / "r.html").exists()


def test_cli_says_when_chromium_is_missing(tmp_path):
    folder = tmp_path / "supply-chain-weekly"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    env = {**_python_env(tmp_path), "DASHMEM_CHROMIUM": str(tmp_path / "nothing-here")}
    proc = _run(["export", str(folder), "--pdf", str(tmp_path / "r.pdf")], env, tmp_path)
    assert proc.returncode == 1 and "error: PDF export needs Chromium" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "r.pdf").exists()


def test_cli_html_chooses_the_report_or_the_dashboard(tmp_path):
    folder = tmp_path / "supply-chain-weekly"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    env = _python_env(tmp_path)
    assert _run(["export", str(folder), "--html", str(tmp_path / "d.html")], env, tmp_path).returncode == 0
    assert "Supply chain weekly report" not in (tmp_path / "d.html").read_text()  # both exist: --html is the dashboard's
    proc = _run(["export", str(folder), "--report", "--html", str(tmp_path / "r.html"), "--param", "site=Brno"], env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    html = (tmp_path / "r.html").read_text()
    assert "<title>Supply chain weekly report</title>" in html and "Sites: Brno" in html
    bad = _run(["export", str(folder), "--html", str(tmp_path / "x.html"), "--param", "site=Atlantis"], env, tmp_path)
    assert bad.returncode == 1 and "parameter 'site': 'Atlantis' is not one of its options" in bad.stderr
    assert not (tmp_path / "x.html").exists()
    (folder / "dashboard.yaml").unlink()  # a report-only workspace: --html is the report's
    assert _run(["export", str(folder), "--html", str(tmp_path / "only.html")], env, tmp_path).returncode == 0
    assert "<title>Supply chain weekly report</title>" in (tmp_path / "only.html").read_text()


# ------------------------------------------------------------------ printing is offline and bounded


@pytest.fixture
def loopback_server():
    """An HTTP server on loopback that records every request it gets (none is the answer we want)."""
    import http.server
    import threading

    hits: list[str] = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, format, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}", hits
    server.shutdown()
    server.server_close()


def _descendants() -> set[int]:
    """The ids of every process below this one (Chromium runs under Playwright's driver, two levels down)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = set(), {os.getpid()}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier} - found
        found |= frontier
    return found


def _marked(mark: str) -> list[int]:
    """Processes that have `mark` in their environment: whatever an export started, however it detached
    (Chromium starts a session of its own, its crash handler forks twice), inherits the environment."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if mark.encode() in environ.read_bytes():
                found.append(int(environ.parent.name))
        except OSError:
            continue
    return found


@pytest.fixture
def marked(monkeypatch):
    import uuid

    mark = f"dashmem-test-{uuid.uuid4().hex}"
    monkeypatch.setenv("DASHMEM_TEST_MARK", mark)
    return f"DASHMEM_TEST_MARK={mark}"


@needs_chromium
def test_printing_fetches_nothing_from_the_network_or_the_local_files(loopback_server, tmp_path):
    """Whatever the HTML asks for (an image, a style sheet, a frame, fetch, a WebSocket, a local file), Chromium sends nothing."""
    host, hits = loopback_server
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-LINE")
    html = f"""<!DOCTYPE html><html><head><link rel="stylesheet" href="http://{host}/css"></head><body><p>Printed</p>
<img src="http://{host}/img"><img src="file://{secret}"><iframe src="file://{secret}"></iframe><iframe src="http://{host}/frame"></iframe>
<script>
fetch("http://{host}/fetch").catch(() => 0);
try {{ new WebSocket("ws://{host}/socket"); }} catch (e) {{}}
navigator.sendBeacon("http://{host}/beacon", "x");
</script></body></html>"""
    pdf = report_export.to_pdf(html)
    text = "\n".join(pages_text(pdf))
    assert "Printed" in text and "TOP-SECRET-LINE" not in text
    assert hits == []


@needs_chromium
def test_a_chart_that_never_draws_stops_in_bounded_time_with_a_plain_message_and_no_chromium_left(supply, monkeypatch, marked):
    folder, wh = supply
    monkeypatch.setattr(pdf_print, "CHARTS_DRAWN", "() => false")  # as a chart that never finishes drawing
    monkeypatch.setenv("DASHMEM_PDF_DRAW_SECONDS", "1")
    before = _descendants()
    with pytest.raises(report_export.ReportExportError) as raised:
        report_export.to_pdf(report_export.to_html(rendered_report(folder, wh)))
    assert (
        str(raised.value)
        == "the report's charts were not drawn within 1 s, so nothing was printed; try again, or export the HTML (DASHMEM_PDF_DRAW_SECONDS sets the limit)"
    )
    assert _descendants() <= before and _marked(marked) == []  # Playwright's driver and Chromium have ended


@needs_chromium
def test_a_print_that_takes_too_long_is_stopped_whole_with_a_plain_message_and_no_chromium_left(monkeypatch, marked):
    """Chromium's print itself has no time limit in Playwright: a huge document (here thousands of long
    paragraphs, over a minute to print) is stopped at DASHMEM_PDF_SECONDS, with everything it started."""
    monkeypatch.setenv("DASHMEM_PDF_SECONDS", "4")
    paragraphs = "\n".join(f"<p>Paragraph {i} " + "long " * 2000 + "</p>" for i in range(3000))
    before = _descendants()
    with pytest.raises(report_export.ReportExportError) as raised:
        report_export.to_pdf(f"<!DOCTYPE html><html><body>{paragraphs}</body></html>")
    assert (
        str(raised.value)
        == "the report could not be printed within 4 s (it may be too long, or the machine busy: DASHMEM_PDF_SECONDS sets the limit); nothing was written"
    )
    assert _descendants() <= before and _marked(marked) == []


@needs_chromium
def test_two_exports_at_once_in_one_server_process_each_write_their_whole_pdf(supply, tmp_path):
    import threading

    folder, wh = supply
    results: dict[str, object] = {}

    def export(site: str) -> None:
        try:
            results[site] = report_export.export_report(folder, None, tmp_path / f"{site}.pdf", wh, {"site": [site]}, user=OPERATOR)
        except Exception as exc:  # noqa: BLE001 - the assertion below shows it
            results[site] = exc

    threads = [threading.Thread(target=export, args=(site,)) for site in ("Brno", "Porto")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for site, other in (("Brno", "Porto"), ("Porto", "Brno")):
        assert isinstance(results[site], dict), results[site]
        text = " ".join("\n".join(pages_text((tmp_path / f"{site}.pdf").read_bytes())).split())
        assert f"Sites: {site}" in text and f"Sites: {other}" not in text


@needs_chromium
def test_two_export_processes_at_once_each_write_their_whole_pdf_and_leave_no_chromium(supply, tmp_path, marked):
    folder, _ = supply
    env = _python_env(tmp_path)  # carries the mark
    assert _run(["refresh", str(folder)], env, tmp_path).returncode == 0
    before = _descendants()
    procs = {
        site: subprocess.Popen(
            [sys.executable, "-m", "lib", "export", str(folder), "--pdf", str(tmp_path / f"{site}.pdf"), "--param", f"site={site}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=tmp_path,
        )
        for site in ("Lyon", "Poznan")
    }
    for site, proc in procs.items():
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        text = " ".join("\n".join(pages_text((tmp_path / f"{site}.pdf").read_bytes())).split())
        assert f"Sites: {site}" in text
    assert _descendants() <= before and _marked(marked) == []


@needs_chromium
@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL])
def test_an_export_interrupted_while_printing_leaves_no_pdf_and_no_chromium(supply, tmp_path, marked, how):
    """Ctrl-C runs the export's own clean-up; a SIGKILL runs none, and the printer notices that its parent is gone."""
    folder, _ = supply
    # A Chromium that takes its time to start (as a wrapper script, say snap's, may): the signal lands while the
    # export waits on the printer, however fast this machine prints (a report printed before the signal, once).
    slow = tmp_path / "slow-chromium"
    slow.write_text(f'#!/bin/sh\nsleep 4\nexec {CHROMIUM} "$@"\n')
    slow.chmod(0o755)
    env = {**_python_env(tmp_path), "DASHMEM_CHROMIUM": str(slow)}
    assert _run(["refresh", str(folder)], env, tmp_path).returncode == 0
    out = tmp_path / "out" / "weekly.pdf"
    # As from a terminal, where Ctrl-C is not ignored, whatever the test run itself inherited (a run started in
    # the background by a non-interactive shell inherits SIGINT ignored).
    proc = subprocess.Popen(
        [sys.executable, "-m", "lib", "export", str(folder), "--pdf", str(out)],
        env=env,
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    # The printer is starting Chromium; beside a busy run (four workers, a Spark server) the export can take over 30 s to get there.
    printing = _wait_for(lambda: any("chrom" in _command(pid) for pid in _marked(marked)), attempts=1200)
    proc.send_signal(how)
    _, err = proc.communicate(timeout=60)
    assert printing and proc.returncode != 0
    assert b"Traceback" not in err, err
    if how == signal.SIGINT:
        assert proc.returncode == 130 and b"error: export interrupted" in err
    assert _wait_for(lambda: _marked(marked) == [])  # the printer and its Chromium end...
    assert not out.exists() and not (out.parent.exists() and any(out.parent.iterdir()))  # ...and nothing half-written


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def _wait_for(condition, attempts: int = 300) -> bool:
    """Poll `condition` up to `attempts` times, 0.1 s apart: waiting for a state, not timing one."""
    import time

    for _ in range(attempts):
        if condition():
            return True
        time.sleep(0.1)
    return False


@needs_chromium  # to_pdf looks for Chromium before it starts the printer
def test_a_printer_that_does_not_even_stop_itself_in_time_is_killed_with_the_same_plain_message(monkeypatch, tmp_path):
    """On a loaded machine the printer process may not have started printing, let alone stopped itself, when its
    time is up: the export says what a too-long print says, not a subprocess error, and leaves no process behind."""
    hung = tmp_path / "hung-printer"
    hung.write_text(f"#!/bin/sh\ntrap '' TERM\necho $$ > {tmp_path / 'pid'}\nexec sleep 60\n")
    hung.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(hung))
    monkeypatch.setenv("DASHMEM_PDF_SECONDS", "0.5")
    monkeypatch.setattr(pdf_print, "STOP_GRACE_S", 0.5)
    with pytest.raises(report_export.ReportExportError) as raised:
        report_export.to_pdf("<!DOCTYPE html><html><body><p>Hello</p></body></html>")
    assert (
        str(raised.value)
        == "the report could not be printed within 0.5 s (it may be too long, or the machine busy: DASHMEM_PDF_SECONDS sets the limit); nothing was written"
    )
    pid = int((tmp_path / "pid").read_text())
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()


@needs_chromium
@pytest.mark.parametrize("value", ["soon", "0", "-5", "1e9"])
def test_a_pdf_time_limit_that_is_no_number_of_seconds_is_refused_in_one_line_and_nothing_is_written(tmp_path, value):
    folder = tmp_path / "supply-chain-weekly"
    shutil.copytree(WORKSPACES / "supply-chain-weekly", folder)
    env = {**_python_env(tmp_path), "DASHMEM_PDF_SECONDS": value}
    assert _run(["refresh", str(folder)], env, tmp_path).returncode == 0
    out = tmp_path / "report.pdf"
    exported = _run(["export", str(folder), "--pdf", str(out)], env, tmp_path)
    assert exported.returncode != 0 and not out.exists()
    assert "Traceback" not in exported.stderr and f"DASHMEM_PDF_SECONDS is {value!r}" in exported.stderr, exported.stderr
