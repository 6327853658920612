"""profile.yaml content on the public datasets and generated tables, written to a folder to compare two versions.

    python -m bench.profile_outputs OUT_DIR            # write one file per table
    python -m bench.profile_outputs OUT_DIR --check    # compare with the files already in OUT_DIR

Used to show that a change to how the profile is computed keeps its bytes:
write with the old code, then `--check` with the new one. Covers the public
files, a tiled global_superstore above the exact-quantile threshold, and
generated wide tables (text columns of many cardinalities, numbers, dates,
booleans, nulls).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable

from .common import DATASETS, PUBLIC


def tables() -> dict[str, Callable[[], dict]]:
    from lib.data.connectors.base import FetchContext, fetch

    from .profile import superstore_table, synthetic_wide

    out: dict[str, Callable[[], dict]] = {}
    for name in PUBLIC:
        out[name] = lambda name=name: {"t": fetch({"name": "t", "type": "csv", "path": str(DATASETS / name)}, FetchContext(workspace_path=DATASETS))}
    out["superstore_x44_300k"] = lambda: {"t": superstore_table(300_000)}
    out["synthetic_20k_x200"] = lambda: {"t": synthetic_wide(20_000, 200)}
    out["synthetic_5k_x1000"] = lambda: {"t": synthetic_wide(5_000, 1000)}
    out["odd_types"] = lambda: {"t": odd_types()}
    out["empty"] = lambda: {"t": synthetic_wide(0, 20)}
    out["two_tables"] = lambda: {"a": synthetic_wide(3_000, 30, seed=1), "b": synthetic_wide(2_000, 12, seed=2)}
    return out


def odd_types():
    """Column types that take the less common paths: dictionary-encoded and large strings, a
    high-cardinality text column that is still categorical, booleans with nulls, all-null text."""
    import pyarrow as pa

    from .profile import synthetic_wide

    base = synthetic_wide(60_000, 10, seed=3)
    rows = base.num_rows
    some = [f"s{i % 7000:05d}" for i in range(rows)]
    return (
        base.append_column("dict_text", base.column("text_0001").dictionary_encode())
        .append_column("large_text", base.column("text_0002").cast(pa.large_string()))
        .append_column("many_but_categorical", pa.array(some))
        .append_column("bools", pa.array([None if i % 5 == 0 else i % 3 == 0 for i in range(rows)]))
        .append_column("nothing", pa.nulls(rows, pa.string()))
    )


def main(argv=None) -> None:
    import os

    from lib.data import profile
    from lib.memory import workspace

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("out", type=Path)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    os.environ.setdefault("DASHMEM_DATA_DIRS", str(DATASETS))
    args.out.mkdir(parents=True, exist_ok=True)
    differ = 0
    for name, make in tables().items():
        rendered = workspace.render("profile", profile.build(make()))
        path = args.out / f"{name}.yaml"
        if args.check:
            same = path.read_text() == rendered
            differ += not same
            print(f"{'same' if same else 'DIFFERENT'}  {name}")
            if not same:
                path.with_suffix(".new.yaml").write_text(rendered)
        else:
            path.write_text(rendered)
            print(f"wrote {path} ({len(rendered)} bytes)")
    if differ:
        sys.exit(f"{differ} profile(s) differ")


if __name__ == "__main__":
    main()
