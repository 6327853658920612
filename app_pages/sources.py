"""Sources: add and edit connectors in forms, test them with a preview, and look at the data profile."""
from __future__ import annotations

import time

import altair as alt
import pandas as pd
import streamlit as st

from app_pages import schema_form, ui
from lib import coltypes, profile, schemas, settings, workspace
from lib.access import PermissionDenied
from lib.configrepo import ConfigRepoError
from lib.connectors import FetchContext, SourceError, fetch
from lib.connectors.csv_source import store_upload
from lib.diagnostics import ValidationFailed

ctx = ui.context("edit")
st.title("Sources")
path = ctx.draft_path()
ws, diagnostics = workspace.load(path)
ui.show_diagnostics(diagnostics)
sources = list((ws.get("sources") or {}).get("sources") or [])
root = schemas.load_schema("sources")
uploads = settings.uploads_dir(ctx.slug)


def save(content: list, message: str) -> bool:
    try:
        ctx.repo.save(ctx.user, ctx.slug, {"sources": {"sources": content}}, message)
        return True
    except ValidationFailed as exc:
        st.error("Not saved: the source does not validate. Secrets go in as references, env:NAME or secrets:KEY.")
        ui.show_diagnostics(exc.diagnostics)
    except (ConfigRepoError, PermissionDenied) as exc:
        st.error(str(exc))
    return False


def preview(source: dict) -> None:
    started = time.perf_counter()
    try:
        table = fetch(source, FetchContext(workspace_path=path, uploads_dir=uploads))
    except SourceError as exc:
        st.error(str(exc))
        return
    st.success(f"Connected: {table.num_rows:,} rows × {table.num_columns} columns in {(time.perf_counter() - started) * 1000:.0f} ms")
    st.dataframe(table.slice(0, 20).to_pandas(), width="stretch")


for i, source in enumerate(sources):
    with st.expander(f"**{source['name']}** · {source['type']}" + (f" — {source['description']}" if source.get("description") else "")):
        with st.form(f"edit_{i}"):
            edited = schema_form.fields(root, root["$defs"]["source"], source, f"src{i}", skip=("name", "type"))
            edited = {"name": source["name"], "type": source["type"], **{k: v for k, v in edited.items() if k not in ("name", "type")}}
            c1, c2, c3 = st.columns(3)
            test = c1.form_submit_button("Test and preview")
            store = c2.form_submit_button("Save", type="primary")
            remove = c3.form_submit_button("Remove this source")
        if test:
            preview(edited)
        if store and save(sources[:i] + [edited] + sources[i + 1:], f"Edit source {source['name']}"):
            st.rerun()
        if remove and save(sources[:i] + sources[i + 1:], f"Remove source {source['name']}"):
            st.rerun()

st.subheader("Add a source")
kind = st.selectbox("Type", ["csv", "sql", "rest", "mcp"], format_func={"csv": "CSV file", "sql": "SQL database", "rest": "REST API",
                                                                          "mcp": "MCP server"}.get)
with st.form("add_source"):
    name = st.text_input("Table name", placeholder="orders", help=root["$defs"]["source"]["properties"]["name"]["description"])
    upload = st.file_uploader("CSV file", type=["csv", "tsv", "txt"]) if kind == "csv" else None
    settings_for_type = schema_form.fields(root, root["$defs"][kind], {}, f"new_{kind}",
                                           skip=("path",) if kind == "csv" else ())
    common = schema_form.fields(root, {"properties": {k: v for k, v in root["$defs"]["source"]["properties"].items()
                                                      if k in ("description", "sample_values")}}, {}, "new_common")
    c1, c2 = st.columns(2)
    test = c1.form_submit_button("Test and preview")
    add = c2.form_submit_button("Add to my draft", type="primary")
if test or add:
    new = {"name": name.strip(), "type": kind, **common, **settings_for_type}
    if kind == "csv" and upload is not None:
        new["path"] = store_upload(uploads, upload.name, upload.getvalue())
    if kind == "csv" and "path" not in new:
        st.error("Upload a CSV file.")
    elif test:
        preview(new)
    elif any(s["name"] == new["name"] for s in sources):
        st.error(f"A source named {new['name']!r} exists already.")
    elif save(sources + [new], f"Add source {new['name']}"):
        st.success(f"Added {new['name']}. Refresh the dashboard (your draft) to load it, then update the profile below.")

st.divider()
st.subheader("Data profile")
prof = ws.get("profile")
if st.button("Update the profile from the current data", help="Loads your draft's sources, profiles them and saves profile.yaml to your draft."):
    from lib.refresh import fetch_candidate

    with st.status("Loading and profiling…") as status:
        # The sources as they are now, even where they no longer fit the recorded
        # shape: describing the new shape is what a new profile is for.
        tables, reports = fetch_candidate(path)
        failed = [r for r in reports if r.status == "failed"]
        if failed:
            status.update(label="Could not load the data", state="error")
            st.error("\n\n".join(r.message for r in failed))
        else:
            prof = profile.build(tables, sources)
            try:
                ctx.repo.save(ctx.user, ctx.slug, {"profile": prof}, "Update the data profile")
                status.update(label="Profile saved to your draft", state="complete")
            except (ValidationFailed, ConfigRepoError) as exc:
                st.error(str(exc))
if not prof:
    st.info("No profile yet.")
    st.stop()

for table in prof.get("tables") or []:
    st.markdown(f"#### {table['name']} · {table['rows']:,} rows")
    st.dataframe(pd.DataFrame([{"column": c["name"], "type": c["type"], "role": c.get("role"), "null share": c.get("null_share"),
                                "distinct": c.get("distinct"), "min": str(c.get("min", "")), "max": str(c.get("max", ""))}
                               for c in table["columns"]]), hide_index=True, width="stretch")
    charts = []
    for c in table["columns"]:
        if c.get("top"):
            frame = pd.DataFrame([{"value": str(t["value"]), "rows": t["count"]} for t in c["top"]])
            charts.append(alt.Chart(frame, title=c["name"]).mark_bar().encode(
                x=alt.X("rows:Q"), y=alt.Y("value:N", sort="-x", title=None)).properties(height=120))
        elif c.get("quantiles") and coltypes.family(c["type"]) == "number":
            frame = pd.DataFrame([{"quantile": k, "value": v} for k, v in c["quantiles"].items()])
            charts.append(alt.Chart(frame, title=f"{c['name']} (quantiles)").mark_line(point=True).encode(
                x=alt.X("quantile:O", sort=None), y="value:Q").properties(height=120))
    for start in range(0, len(charts), 3):
        cols = st.columns(3)
        for col, chart in zip(cols, charts[start:start + 3]):
            col.altair_chart(chart, width="stretch")
rels = prof.get("relationships") or []
if rels:
    st.markdown("#### Relationships")
    st.dataframe(pd.DataFrame(rels), hide_index=True, width="stretch")
with st.expander("What the model sees"):
    text = profile.text(prof)
    from lib import tokens

    st.code(text)
    st.caption(f"about {tokens.estimate(text)} tokens")
