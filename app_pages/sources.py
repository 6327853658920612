"""Sources: add and edit connectors in forms, test them with a preview, and look at the data profile."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import streamlit as st

from app_pages import schema_form, state, ui
from lib.artifacts import profile_charts
from lib.core import settings, tokens
from lib.data import colroles, profile
from lib.data.connectors import FILE_TYPES, REGISTRY
from lib.data.connectors.base import FetchContext, UploadLimits, fetch
from lib.data.connectors.csv_source import store_upload
from lib.data.sandbox import QueryError
from lib.data.snapshots import Warehouse
from lib.memory import relationships, schemas, workspace
from lib.memory.yamlio import declared_properties
from lib.ops import draft_data

ctx = ui.context("edit")
st.title("Sources")
if ctx.is_published and (in_place := ctx.repo.data_files_notice(ctx.slug)):
    st.info(in_place)
path = ctx.draft_path()
ws, diagnostics = workspace.load(path)
ui.show_diagnostics(diagnostics)
sources_doc = dict(ws.get("sources") or {"sources": []})
sources = list(sources_doc.get("sources") or [])
root = schemas.load_schema("sources")
uploads = settings.uploads_dir(ctx.slug)


def save(content: list, message: str) -> bool:
    with ui.user_errors(
        "Could not save the sources", invalid="Not saved: the source does not validate. Secrets go in as references, env:NAME or secrets:KEY."
    ) as caught:
        # The declared and rejected joins stay, but for those naming a table no source makes any more.
        kept = {**sources_doc, "sources": content}
        for gone in {s["name"] for s in sources} - {s["name"] for s in content}:
            kept = relationships.without_table(kept, gone)
        ctx.repo.save(ctx.user, ctx.slug, {"sources": kept}, message)
    return not caught.failed


def save_decision(content: dict, message: str) -> bool:
    with ui.user_errors("Could not save the relationship", invalid="Not saved: the relationship does not validate.") as caught:
        ctx.repo.save(ctx.user, ctx.slug, {"sources": content}, message)
    return not caught.failed


def preview(source: dict) -> None:
    started = time.perf_counter()
    table = None  # stays None only when fetching failed (the message is shown)
    with ui.user_errors("Could not test the source") as caught:  # a SourceError names the source and what failed
        # The preview's table is this session's: an uploaded file is read within the upload caps, as a viewer's is.
        limits = UploadLimits.from_settings() if str(source.get("path", "")).startswith("upload:") else None
        table = fetch(source, FetchContext(workspace_path=path, uploads_dir=uploads, limits=limits))
    if caught.failed or table is None:
        return
    st.success(f"Connected: {table.num_rows:,} rows × {table.num_columns} columns in {(time.perf_counter() - started) * 1000:.0f} ms")
    st.dataframe(table.slice(0, 20).to_pandas(), width="stretch")


def source_schema(kind: str) -> dict:
    """The settings a source of one type has: the common ones, then its type's (not all 32 of every type)."""
    specific = root["$defs"].get(kind) or {}
    return {
        "type": "object",
        "required": ["name", "type", *specific.get("required", [])],
        "properties": {**root["$defs"]["source"]["properties"], **declared_properties(specific, root)},
    }


for i, source in enumerate(sources):
    with st.expander(f"**{source['name']}** · {source['type']}" + (f" — {source['description']}" if source.get("description") else "")):
        with st.form(f"edit_{i}"):
            edited = schema_form.fields(root, source_schema(source["type"]), source, f"src{i}", skip=("name", "type"))
            edited = {"name": source["name"], "type": source["type"], **{k: v for k, v in edited.items() if k not in ("name", "type")}}
            c1, c2, c3 = st.columns(3)
            test = c1.form_submit_button("Test and preview")
            store = c2.form_submit_button("Save", type="primary")
            remove = c3.form_submit_button("Remove this source")
        if test:
            preview(edited)
        if store and save(sources[:i] + [edited] + sources[i + 1 :], f"Edit source {source['name']}"):
            st.rerun()
        if remove and save(sources[:i] + sources[i + 1 :], f"Remove source {source['name']}"):
            st.rerun()


def add_and_profile(new: dict) -> None:
    """Save a new source to the draft, load and profile it (lib.ops.draft_data), showing each step; then show its profile."""
    added = None
    with st.status(f"Adding {new['name'] or 'the source'}…", expanded=True) as status:
        show = ui.progress_bar()
        with ui.user_errors(
            "Could not add the source", invalid="Not saved: the source does not validate. Secrets go in as references, env:NAME or secrets:KEY."
        ):
            added = draft_data.add_source(ctx.repo, ctx.user, ctx.slug, new, progress=show)
        if added is None or not added.ok:
            status.update(label="Not added" if added is None else f"Added {added.names[0]}, but not loaded and profiled", state="error")
        else:
            status.update(label=f"Added, loaded and profiled {added.names[0]}", state="complete")
    if added is None:  # not saved: the reason is shown, and the form keeps what was typed
        return
    st.session_state[state.ADD_SOURCE_FORM] += 1
    st.session_state[state.SOURCES_DONE if added.ok else state.SOURCES_PROBLEM] = added.headline()
    st.rerun()


st.subheader("Add a source")
kind = st.selectbox("Type", list(REGISTRY), format_func=lambda t: REGISTRY[t].label)
if st.session_state.get(state.SOURCES_DONE):
    st.success(st.session_state.pop(state.SOURCES_DONE))
if st.session_state.get(state.SOURCES_PROBLEM):
    st.error(st.session_state.pop(state.SOURCES_PROBLEM))
# A fresh form after each addition, so the last upload and name do not linger in it.
with st.form(f"add_source_{st.session_state.setdefault(state.ADD_SOURCE_FORM, 0)}"):
    name = st.text_input("Table name", placeholder="orders", help=root["$defs"]["source"]["properties"]["name"]["description"])
    is_file = kind in FILE_TYPES
    upload = st.file_uploader(REGISTRY[kind].label, type=list(REGISTRY[kind].extensions)) if is_file else None
    settings_for_type = schema_form.fields(root, root["$defs"][kind], {}, f"new_{kind}", skip=("path",) if is_file else ())
    common = schema_form.fields(
        root, {"properties": {k: v for k, v in root["$defs"]["source"]["properties"].items() if k in ("description", "sample_values")}}, {}, "new_common"
    )
    c1, c2 = st.columns(2)
    test = c1.form_submit_button("Test and preview")
    add = c2.form_submit_button("Add to my draft", type="primary")
if test or add:
    new = {"name": name.strip(), "type": kind, **common, **settings_for_type}
    if is_file and upload is not None:
        new["path"] = store_upload(uploads, upload.name, upload.getvalue())
    if is_file and "path" not in new:
        endings = ", ".join("." + e for e in REGISTRY[kind].extensions)
        st.error(f"Upload a file ({endings}).")
    elif test:
        preview(new)
    else:
        add_and_profile(new)

st.divider()
st.subheader("Data profile")
prof = ws.get("profile")
if st.button("Update the profile from the current data", help="Loads your draft's sources, profiles them and saves profile.yaml to your draft."):
    with st.status("Loading and profiling…", expanded=True) as status:
        show = ui.progress_bar()
        updated = None
        with ui.user_errors("Could not update the profile"):
            updated = draft_data.update_profile(ctx.repo, ctx.user, ctx.slug, progress=show)
        if updated is None or not updated.ok:
            failed = updated is not None and any(r.status == "failed" for r in updated.reports)
            status.update(label="Could not load the data" if failed else "Could not update the profile", state="error")
            if updated is not None:
                st.error(updated.problem)
        else:
            status.update(label="Profile saved to your draft", state="complete")
            prof = updated.profile
if not prof:
    st.info("No profile yet.")
    st.stop()

wh = Warehouse.for_workspace(path)
ui.first_load(path, wh, ws, ctx.user)  # the histograms read the draft's data
served = wh.current()


@st.cache_data(max_entries=512, show_spinner=False)
def histogram(folder: str, snapshot_id: str, sql: str) -> pa.Table | None:
    """A column's histogram over one snapshot; snapshots never change, so it is computed once, not at every rerun."""
    try:
        wh = Warehouse(Path(folder))
        return wh.query(sql, max_rows=50, snapshot=wh.snapshot(snapshot_id)).table
    except (QueryError, OSError, ValueError):
        return None


def column_chart(table: str, c: dict):
    """The column's chart (lib.artifacts.profile_charts): its frequent values, or its histogram over the data served."""
    sql = profile_charts.histogram_query(table, c)
    rows = histogram(str(wh.folder), served.id, sql) if sql and served and table in served.tables else None
    return profile_charts.column_chart(c, rows)


for table in prof.get("tables") or []:
    st.markdown(f"#### {table['name']} · {table['rows']:,} rows")
    for c in table["columns"]:
        label, chart_col = st.columns([1, 3], vertical_alignment="center")
        label.markdown(f"**{c['name']}**  \n`{c['type']}`" + (f" · {colroles.Meaning(c['role'], c.get('aggregate')).describe()}" if c.get("role") else ""))
        share, filled = profile_charts.filled(c)
        label.progress(share, text=filled)
        chart = column_chart(table["name"], c)
        if chart is not None:
            chart_col.vega_lite_chart(chart.streamlit_spec(), width="stretch")
        else:
            chart_col.caption(" · ".join(f"{k} {c[k]}" for k in ("min", "max") if c.get(k) is not None) or "no chart for this type")
rels = relationships.merged(prof, sources_doc)
if rels or sources_doc.get("rejected_relationships"):
    st.markdown("#### Relationships")
    st.caption(
        "Confirm a candidate join to declare it (it survives every profile update and the model sees it as declared); reject one to stop it being proposed."
    )
if st.session_state.get(state.RELATIONSHIP_DONE):
    st.success(st.session_state.pop(state.RELATIONSHIP_DONE))
for rel in rels:
    left, right = rel["left"], rel["right"]
    about, first, second = st.columns([4, 1, 1], vertical_alignment="center")
    match = f"{rel['overlap']:.0%} of values match" if rel.get("overlap") is not None else ""
    if rel["evidence"] == "declared":
        about.markdown(f"`{left}` → `{right}` · **declared**" + (f" · {match}" if match else ""))
        decision = (relationships.forget, f"Remove the declared join {left} -> {right}") if first.button("Remove", key=f"rel_forget:{left}:{right}") else None
    else:
        about.markdown(f"`{left}` → `{right}` · candidate ({rel.get('evidence', 'values')}) · {match}")
        decision = (
            (relationships.confirm, f"Declare the join {left} -> {right}")
            if first.button("Confirm", key=f"rel_confirm:{left}:{right}", type="primary")
            else None
        )
        if second.button("Reject", key=f"rel_reject:{left}:{right}"):
            decision = (relationships.reject, f"Reject the candidate join {left} -> {right}")
    if decision and save_decision(decision[0](sources_doc, left, right), decision[1]):
        st.session_state[state.RELATIONSHIP_DONE] = f"{decision[1]}: saved to your draft."
        st.rerun()
for rel in sources_doc.get("rejected_relationships") or []:
    about, first = st.columns([5, 1], vertical_alignment="center")
    about.markdown(f"`{rel['from']}` → `{rel['to']}` · rejected")
    if first.button("Propose again", key=f"rel_unreject:{rel['from']}:{rel['to']}") and save_decision(
        relationships.forget(sources_doc, rel["from"], rel["to"]), f"Propose the join {rel['from']} -> {rel['to']} again"
    ):
        st.rerun()
with st.expander("What the model sees"):
    text = profile.text({**prof, "relationships": rels})
    st.code(text)
    st.caption(f"about {tokens.estimate(text)} tokens")
