"""Messy business files (issue #16): ours against pandas reading the same file to the same typed columns.

    python -m bench.messy_files [--rows N] [--runs N]

Three files made from global_superstore.csv (51,290 x 24, tiled to --rows rows):
  - a European CSV: `;`-separated, numbers as `1.234,56`, `-` for missing
    values; ours is the csv source with `thousands: '.'`, `decimal: ','`,
    `null_values: ['-']`, pandas is read_csv(sep=';', thousands='.', decimal=',',
    na_values=['-']);
  - the same rows as an .xlsx sheet (a quarter of them: pandas and openpyxl are
    slow on sheets); ours is the excel source, pandas read_excel (openpyxl);
  - the same rows as Parquet with a struct column; ours is the parquet source
    (which flattens it), pandas read_parquet (which keeps it as dicts).
Both sides end with typed columns in memory. Medians of --runs runs in this
process, the two sides' runs interleaved, as ratios: pandas time / ours (above 1: ours is faster).
Goal (issue #16 states none for speed): no slower than pandas.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from .common import DATASETS, print_table


def _files(folder: Path, rows: int) -> dict[str, Path]:
    import openpyxl
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    base = pacsv.read_csv(DATASETS / "global_superstore.csv")
    table = pa.concat_tables([base] * (rows // base.num_rows + 1)).slice(0, rows)
    # European numbers: thousands '.', decimal ','; every 50th Profit is '-'.
    columns = {}
    for name in table.column_names:
        values = table.column(name)
        if pa.types.is_floating(values.type) or pa.types.is_integer(values.type):
            text = [None if v is None else f"{v:,.2f}".replace(",", "_").replace(".", ",").replace("_", ".") for v in values.to_pylist()]
            if name == "Profit":
                text = ["-" if i % 50 == 0 else v for i, v in enumerate(text)]
            columns[name] = pa.array(text, pa.string())
        else:
            columns[name] = pc.cast(values, pa.string())
    files = {"csv": folder / "european.csv", "xlsx": folder / "sheet.xlsx", "parquet": folder / "nested.parquet"}
    pacsv.write_csv(pa.table(columns), files["csv"], write_options=pacsv.WriteOptions(delimiter=";"))
    quarter = table.slice(0, rows // 4)
    book = openpyxl.Workbook(write_only=True)
    sheet = book.create_sheet("Orders")
    sheet.append(quarter.column_names)
    for row in quarter.to_pylist():
        sheet.append(list(row.values()))
    book.save(files["xlsx"])
    nested = table.append_column(
        "place", pa.StructArray.from_arrays([table.column("City").combine_chunks(), table.column("Country").combine_chunks()], ["city", "country"])
    )
    pq.write_table(nested, files["parquet"])
    return files


def _medians(ours, theirs, runs: int) -> tuple[float, float]:
    """Median seconds of each, their runs interleaved so that a load from other jobs falls on both alike."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(runs):
        for fn, kept in zip((ours, theirs), times):
            start = time.perf_counter()
            fn()
            kept.append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    import pandas as pd

    from lib.data.connectors.base import FetchContext, fetch

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        files = _files(folder, args.rows)
        ctx = FetchContext(workspace_path=folder)
        cases = [
            (
                f"European CSV, {args.rows:,} x 24",
                lambda: fetch({"name": "t", "type": "csv", "path": files["csv"].name, "thousands": ".", "decimal": ",", "null_values": ["-"]}, ctx),
                lambda: pd.read_csv(files["csv"], sep=";", thousands=".", decimal=",", na_values=["-"]),
            ),
            (
                f".xlsx sheet, {args.rows // 4:,} x 24",
                lambda: fetch({"name": "t", "type": "excel", "path": files["xlsx"].name}, ctx),
                lambda: pd.read_excel(files["xlsx"], engine="openpyxl"),
            ),
            (
                f"Parquet + struct, {args.rows:,} x 25",
                lambda: fetch({"name": "t", "type": "parquet", "path": files["parquet"].name}, ctx),
                lambda: pd.read_parquet(files["parquet"]),
            ),
        ]
        check = fetch({"name": "t", "type": "csv", "path": files["csv"].name, "thousands": ".", "decimal": ",", "null_values": ["-"]}, ctx)
        assert str(check.schema.field("Sales").type) == "double" and check.column("Profit").null_count > 0, check.schema  # the same work: typed numbers
        rows = []
        for label, ours, theirs in cases:
            ours_s, pandas_s = _medians(ours, theirs, args.runs)
            ratio = pandas_s / ours_s
            rows.append((label, ours_s, pandas_s, f"{ratio:.2f}x", ">= 1x (no slower)", "met" if ratio >= 1 else "NOT MET"))
    print_table(["file", "ours s", "pandas s", "speed-up", "goal", ""], rows)
    print(f"\nMedians of {args.runs} runs in one process; speed-up = pandas time / ours. The machine is shared: read the ratios.")


if __name__ == "__main__":
    main()
