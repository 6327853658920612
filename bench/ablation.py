"""The paper's Table 2 ablation: which memory lets a dashboard be regenerated on new data with its specification intact.

    python -m bench.ablation [--runs N] [--datasets gdp.csv adult.csv my/own.csv my/task.yaml ...] [--out DIR] [--scripted]

Per dataset, a workspace with one CSV source is loaded with the file (V1: one
of the public files by name, a CSV file of your own by its path, or a task
file naming one, bench/ablation_taskfile.py) and profiled, and gets a
formatting specification that no task prompt implies (bench/ablation_task.py):
a background colour and a threshold colour on a measure taken from the
profile (or the task file's), saved as checkable rules in task.yaml and as
output.yaml's theme.

Phase 1: an edit session builds a dashboard from V1 with the full prompt,
which states the specification. Then V2 is made from V1 (bench/data_versions.py:
same columns, rows shuffled, measures moved by up to ±15 %, a fixed seed) and
written over the source file. Phase 2: in each condition
(bench/ablation_conditions.py) an edit session on V2 gets only the message
"Regenerate the dashboard with this updated data." (or the task file's `phase2`) plus what that condition
remembers. A Phase 2 session completes when every lib.artifacts.checks check passes on
its dashboard over V2 and both specification rules are honoured, whatever the
condition's prompt showed (bench/ablation_task.py: the dashboard is judged as
it renders in its condition).

Per condition: completion rate, input/output/cache tokens, model calls and
wall time per session, and an exact McNemar test against selective_memory
over the paired (dataset, run) cells. `--runs N` repeats Phase 1 and every
Phase 2 cell N times. Separately per dataset: the zero-token refresh from V1
to V2 with lib.data.refresh, its time, and proof that no model client was made or
called on that path.

With an Anthropic API key the model is Claude (lib.chat.model.AnthropicClient);
without one, or with --scripted, it is bench/scripted_analyst.py, and the
output says so first. Results go to --out as Markdown and CSV.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import pyarrow.csv as pacsv

from lib.chat.agent import run_session
from lib.chat.model import AnthropicClient, api_key_available
from lib.core.settings import model_id
from lib.data.profile import build as build_profile
from lib.data.refresh import refresh
from lib.data.snapshots import Warehouse
from lib.memory import workspace
from lib.roles.access import OPERATOR, User

from .ablation_conditions import CONDITIONS, Condition, Phase1, SessionClient, phase2_context, phase2_files
from .ablation_results import SCRIPTED_LABEL, SCRIPTED_NOTICE, Cell, DatasetResult, RefreshMeasure, Study, print_study, write_results
from .ablation_task import RULE_DATE, FormattingSpec, completion, phase1_message, spec_for
from .ablation_taskfile import TaskFile, TaskFileError, is_task_file
from .ablation_taskfile import load as load_task_file
from .common import ROOT, public_datasets  # first: puts the project on sys.path for lib
from .data_versions import measure_columns, updated_version
from .scripted_analyst import TABLE, ScriptedAnalyst

DEFAULT_DATASETS = ("gdp.csv", "adult.csv", "global_superstore_sample1000.csv", "nyc311_sample5000.csv")
DEFAULT_OUT = ROOT / "bench" / "results"
SOURCE_FILE = "data/current.csv"  # inside the workspace folder: V1 is copied there, V2 written over it
OWNER = "bench"

# A client for one session, given the dataset's specification and the profile of the data the session runs on
# (the scripted analyst reads the profile only when the request shows it; Claude ignores both).
ClientFactory = Callable[[FormattingSpec, Mapping[str, Any]], Any]


def scripted_client(spec: FormattingSpec, profile: Mapping[str, Any]) -> ScriptedAnalyst:
    return ScriptedAnalyst(spec, profile)


def claude_client(spec: FormattingSpec, profile: Mapping[str, Any]) -> AnthropicClient:
    return AnthropicClient()


# --------------------------------------------------------------------------- the protocol


Dataset = Path | TaskFile  # a CSV file, or a task file naming one with its own specification and messages


def run_study(
    datasets: list[Dataset],
    runs: int,
    root: Path,
    make_client: ClientFactory,
    *,
    model: str,
    scripted: bool,
    progress: Callable[[str], None] = lambda line: None,
) -> Study:
    study = Study(model=model, scripted=scripted, runs=runs)
    for dataset in datasets:
        result, cells = run_dataset(dataset, runs, root, make_client, progress)
        study.datasets.append(result)
        study.cells.extend(cells)
    return study


def run_dataset(dataset: Dataset, runs: int, root: Path, make_client: ClientFactory, progress: Callable[[str], None]) -> tuple[DatasetResult, list[Cell]]:
    task = dataset if isinstance(dataset, TaskFile) else None
    csv_file = task.csv if task is not None else dataset
    assert isinstance(csv_file, Path)
    folder, warehouse, sources = create_workspace(csv_file, root)
    tables_v1, version_v1 = load_data(folder, warehouse)
    profile_v1 = build_profile(tables_v1, sources)
    spec = spec_for(csv_file.name, profile_v1)
    if task is not None:
        spec = task.applied(spec)
    phase1_files = remember_specification(folder, spec, profile_v1)
    user, slug = User(OWNER), folder.name
    progress(f"{csv_file.name}: Phase 1 on V1, {runs} run(s)")
    phase1 = [run_phase1(phase1_files, tables_v1, version_v1, spec, profile_v1, make_client, user, slug) for _ in range(runs)]
    kept = next((p.outcome.draft_dashboard for p in phase1 if p.outcome.passes), None)
    if kept is not None:
        workspace.save(folder, {"dashboard": kept})  # so the refresh re-checks a real dashboard's queries

    progress(f"{csv_file.name}: zero-token refresh to V2")
    perturbed = measure_columns(profile_v1)
    pacsv.write_csv(updated_version(tables_v1[TABLE], perturbed), folder / SOURCE_FILE)
    refreshed = measure_refresh(folder, warehouse, csv_file.name)
    snapshot = warehouse.current()
    assert snapshot is not None, "the refresh to V2 left no snapshot"
    tables_v2, version_v2 = warehouse.tables(), snapshot.id
    profile_v2 = build_profile(tables_v2, sources)
    workspace.save(folder, {"profile": profile_v2})
    memory = workspace.load(folder)[0].data

    progress(f"{csv_file.name}: Phase 2 on V2, {len(CONDITIONS)} conditions x {runs} run(s)")
    cells = []
    for run, first in enumerate(phase1, start=1):
        # A person saves a Phase 1 draft only when it passes its checks; otherwise there is no dashboard to keep.
        remembered = {kind: content for kind, content in memory.items() if kind != "dashboard"}
        if first.outcome.passes:
            remembered["dashboard"] = first.outcome.draft_dashboard
        for condition in CONDITIONS:
            cells.append(run_phase2(condition, remembered, first, tables_v2, version_v2, spec, profile_v2, make_client, user, slug, run))
    result = DatasetResult(csv_file.name, tables_v1[TABLE].num_rows, tables_v1[TABLE].num_columns, perturbed, spec, phase1, refreshed)
    return result, cells


def slug_of(csv_file: Path) -> str:
    """The workspace a dataset is studied in: its file name without .csv, lower case, dashes for underscores."""
    return csv_file.stem.replace("_", "-").lower()


def create_workspace(csv_file: Path, root: Path) -> tuple[Path, Warehouse, list[dict[str, Any]]]:
    """A workspace folder with one CSV source (a copy of the CSV file, as V1), and its own data cache."""
    slug = slug_of(csv_file)
    folder = root / slug
    (folder / "data").mkdir(parents=True)
    shutil.copyfile(csv_file, folder / SOURCE_FILE)
    content = workspace.blank(f"Ablation: {csv_file.name}", OWNER, RULE_DATE)
    content["sources"] = {"sources": [{"name": TABLE, "type": "csv", "path": SOURCE_FILE}]}
    workspace.save(folder, content)
    return folder, Warehouse(root / "cache" / slug), content["sources"]["sources"]


def load_data(folder: Path, warehouse: Warehouse) -> tuple[dict[str, Any], str]:
    """Load the workspace's data for the first time; its tables and snapshot id."""
    _require_ok(refresh(folder, warehouse, user=OPERATOR), "loading V1")
    snapshot = warehouse.current()
    assert snapshot is not None, "loading V1 left no snapshot"
    return warehouse.tables(), snapshot.id


def remember_specification(folder: Path, spec: FormattingSpec, profile: Mapping[str, Any]) -> dict[str, Any]:
    """Save the specification as the workspace keeps it after Phase 1 (task rules, output theme) and the profile;
    return the files Phase 1 starts from, which know the data but not the specification."""
    before = workspace.load(folder)[0].data | {"profile": profile}
    before["output"] = {"data_injection": before["output"]["data_injection"]}
    workspace.save(folder, {"profile": profile, "task": {"rules": spec.rules()}, "output": {**before["output"], "theme": {"background": spec.background}}})
    return before


def measure_refresh(folder: Path, warehouse: Warehouse, dataset: str) -> RefreshMeasure:
    """The zero-token refresh to the data now in the source file, with model clients watched from outside."""
    with watching_model_clients() as counts:
        report = refresh(folder, warehouse, user=OPERATOR)
    _require_ok(report, f"{dataset}: refreshing to V2")
    measured = RefreshMeasure(report.swapped, report.seconds, report.model_calls, counts["made"], counts["calls"])
    if measured.model_calls or measured.clients_made or measured.client_calls:
        raise RuntimeError(f"{dataset}: the refresh path used a model ({measured})")
    return measured


def _require_ok(report, what: str) -> None:
    if not report.ok:
        raise RuntimeError(f"{what} failed:\n{report.summary()}")


def run_phase1(
    files: dict[str, Any], tables, version: str, spec: FormattingSpec, profile: Mapping[str, Any], make_client: ClientFactory, user: User, slug: str
) -> Phase1:
    client = SessionClient(make_client(spec, profile))
    text = phase1_message(spec)
    outcome = run_session(files, tables, version, "edit", text, client, user=user, slug=slug, today=RULE_DATE)
    done = outcome.draft_dashboard is not None and completion(outcome.draft_dashboard, spec, tables, version, files.get("output")).completed
    return Phase1(text, outcome, client.transcript(), done)


def run_phase2(
    condition: Condition,
    memory: Mapping[str, Any],
    phase1: Phase1,
    tables,
    version: str,
    spec: FormattingSpec,
    profile: Mapping[str, Any],
    make_client: ClientFactory,
    user: User,
    slug: str,
    run: int,
) -> Cell:
    extra_system, history = phase2_context(condition, spec, phase1)
    client = SessionClient(make_client(spec, profile), extra_system, history)
    started = time.perf_counter()
    files = phase2_files(condition, memory)
    outcome = run_session(files, tables, version, "edit", spec.phase2_message, client, user=user, slug=slug, today=RULE_DATE)
    seconds = time.perf_counter() - started
    judged = completion(outcome.draft_dashboard, spec, tables, version, files.get("output")) if outcome.draft_dashboard is not None else None
    return Cell(
        spec.dataset,
        run,
        condition.name,
        outcome.draft_dashboard,
        judged,
        dict(outcome.usage),
        seconds,
        outcome.stopped_reason,
        outcome.error,
        client.sent[0] if client.sent else None,
    )


@contextlib.contextmanager
def watching_model_clients() -> Iterator[dict[str, int]]:
    """Count model clients constructed and model calls made, anywhere in the process, while the block runs.

    Wraps the constructors of every client class there is (the SDK's own included) and the project's `create`
    methods, and restores them after, so the zero-token claim does not rest on lib.data.refresh's own report.
    """
    import anthropic

    from lib.chat import model

    counts = {"made": 0, "calls": 0}
    targets = [(cls, "__init__", "made") for cls in (anthropic.Anthropic, model.AnthropicClient, model.ScriptedModel, ScriptedAnalyst)]
    targets += [(cls, "create", "calls") for cls in (model.AnthropicClient, model.ScriptedModel, ScriptedAnalyst)]
    saved = []
    for cls, name, key in targets:
        original, own = getattr(cls, name), name in cls.__dict__
        saved.append((cls, name, original, own))
        setattr(cls, name, _counting(original, counts, key))
    try:
        yield counts
    finally:
        for cls, name, original, own in reversed(saved):
            if own:
                setattr(cls, name, original)
            else:
                delattr(cls, name)


def _counting(function, counts: dict[str, int], key: str):
    def counted(*args, **kwargs):
        counts[key] += 1
        return function(*args, **kwargs)

    return counted


# --------------------------------------------------------------------------- command line


def dataset_files(names: list[str], refuse: Callable[[str], Any]) -> list[Dataset]:
    """Each --datasets entry: a CSV file of the user's own (a path to it), a task file naming one
    (bench/ablation_taskfile.py), or the name of a public file.

    Calls `refuse` with what is wrong (an entry that is none of these, a file that is not .csv, a task file's
    problems with their lines, two datasets with one name)."""
    public = {path.name: path for path in public_datasets()} if any(not Path(name).is_file() for name in names) else {}
    files: list[Dataset] = []
    unknown = []
    for name in names:
        path = Path(name)
        if path.is_file() and is_task_file(name):
            try:
                files.append(load_task_file(path))
            except TaskFileError as exc:
                refuse(f"{name} cannot be used:\n{exc}")
        elif path.is_file():
            if path.suffix.lower() != ".csv":
                refuse(f"{name}: not a .csv file or a task file (.yaml); the study loads each dataset as one CSV source")
            files.append(path.resolve())
        elif name in public:
            files.append(public[name])
        else:
            unknown.append(name)
    if unknown:
        refuse(f"unknown dataset(s) {', '.join(unknown)}: neither a CSV file nor one of the public files {', '.join(public)}")
    slugs = [slug_of(f.csv if isinstance(f, TaskFile) else f) for f in files]
    twice = sorted({slug for slug in slugs if slugs.count(slug) > 1})
    if twice:
        refuse(f"two datasets named {', '.join(twice)}: each becomes a workspace of that name; rename one file")
    return files


def main(argv=None) -> Study:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=1, help="repetitions of every (dataset, condition) cell")
    parser.add_argument(
        "--datasets",
        nargs="+",
        default=list(DEFAULT_DATASETS),
        metavar="FILE",
        help="public files by name, paths to CSV files of your own, or task files naming them",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder for the Markdown and CSV results")
    parser.add_argument("--scripted", action="store_true", help="use the scripted model even when an API key is set")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    csv_files = dataset_files(args.datasets, parser.error)

    scripted = args.scripted or not api_key_available()
    if scripted:
        print(SCRIPTED_NOTICE)
    else:
        print(f"Model: {model_id()} through the Anthropic API (this run makes real, billed calls).")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dashmem-ablation-") as tmp:
        study = run_study(
            csv_files,
            args.runs,
            Path(tmp),
            scripted_client if scripted else claude_client,
            model=SCRIPTED_LABEL if scripted else model_id(),
            scripted=scripted,
            progress=lambda line: print(line, file=sys.stderr),
        )
    print_study(study)
    markdown, table = write_results(study, args.out)
    print(f"\nwrote {markdown} and {table} in {time.perf_counter() - started:.1f} s")
    return study


if __name__ == "__main__":
    main()
