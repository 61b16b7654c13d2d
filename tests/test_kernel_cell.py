"""A notebook user sees their cell, not the kernel's: in a real Jupyter kernel (nbclient),
a ThreadPoolExecutor cell's trace lists the cell's threads with the kernel's own on one
background line, its profile starts at the cell, its code is named "In [N]", and a cell
with a top-level await is traced on the kernel's loop."""

import json
import os
import re

import pytest
from conftest import PROFILE_HEAD, TOP_HELD, TOP_WAIT

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

N = 400_000  # a few tenths of a second in four calls

DEFINE = """import asyncio, json, threading
from concurrent.futures import ThreadPoolExecutor
def cpu(n):
    s = 0
    for i in range(n):
        s += i
    return s"""

POOL = f"""with ThreadPoolExecutor(2) as ex:
    total = sum(ex.map(cpu, [{N}] * 4))"""

FACTS = """def facts(t):
    payload = json.loads(t.result.payload())
    return {
        "title": t.result.title,
        "summary": [s.name for s in t.summary()],
        "all": [[s.name, s.background] for s in t.summary(all_threads=True)],
        "payload_background": sorted(th["name"] or "?" for th in payload["threads"] if th.get("background")),
        "functions": [[r.name, r.file, r.line] for r in t.functions()[:8]],
        "by_self": [[r.name, r.file, r.line] for r in t.functions(sort="self")[:3]],
        "by_held": [[r.name, r.file, r.line] for r in t.functions(sort="held")[:3]],
        "named": sorted({(r.name, r.file, r.line) for r in t.functions() if r.file.startswith("In [")}),
        "root": [c.name for c in t.profile().children],
        "outer": [n.name for n in t.profile(outer_frames=True).walk()],
        "threads": {th.name: th.tid for th in t.threads},
        "main_tid": threading.main_thread().native_id,
    }"""

CELLS = [
    "%load_ext giltracer",
    DEFINE,                                   # In [2]
    "%%giltracer --var t\n" + POOL,           # In [3]
    FACTS + "\nprint(json.dumps(facts(t)))",  # In [4]
    "%%gilprofile --var p --top 3\n" + POOL,  # In [5]
    "print(json.dumps(facts(p)))",            # In [6]
    f"""%%giltracer --var a -q
async def job(n):
    return await asyncio.to_thread(cpu, n)
results = await asyncio.gather(job({N}), job({N}), asyncio.sleep(0.01))""",  # In [7]
    "print(json.dumps(dict(facts(a), results=results[:2])))",  # In [8]
]


@pytest.fixture(scope="module")
def notebook(tmp_path_factory):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    work = tmp_path_factory.mktemp("kernel-cell")
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(work)}})
    client.execute()
    return nb


def shown_text(cell):
    """The text/plain of what a cell displayed (the magics' bundle)."""
    return "".join(o["data"]["text/plain"] for o in cell.outputs
                   if o.get("output_type") == "display_data" and "text/plain" in o.get("data", {}))


def printed(cell):
    return json.loads("".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout"))


def table_names(text):
    """Thread names of the per-thread table's rows (after the header line)."""
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.split()[:2] == ["tid", "name"])
    rows = []
    for line in lines[head + 1:]:
        m = re.match(r"\s*(\d+)\s+(.+?)\s+\d+\.\d+ (?:s|ms|us)\s", line)
        if not m:
            break
        rows.append(m.group(2))
    return rows, lines[head + 1 + len(rows)]


def is_cell_thread(name):
    return name == "MainThread" or name.startswith("ThreadPoolExecutor-")


def test_text_and_summary_list_the_cells_threads(notebook):
    text = shown_text(notebook.cells[2])
    rows, after = table_names(text)
    assert rows[0] == "MainThread" and all(is_cell_thread(n) for n in rows), text
    assert sum(n.startswith("ThreadPoolExecutor-") for n in rows) == 2, text
    m = re.match(r" (\d+) background threads?: (.+)$", after)
    assert m and int(m.group(1)) >= 3, text  # the kernel's: Shell channel, IOPub, Heartbeat, ...
    assert "IOPub" in m.group(2) and "Heartbeat" in m.group(2), after
    facts = printed(notebook.cells[3])
    assert facts["summary"] == rows
    background = sorted(name for name, bg in facts["all"] if bg)
    assert len(background) == int(m.group(1)) and not any(is_cell_thread(n) for n in background)
    assert len(facts["payload_background"]) == len(background)  # the viewer folds the same ones


def test_profile_and_functions_start_at_the_cell(notebook):
    facts = printed(notebook.cells[3])
    assert "<module>" in facts["root"], facts["root"]  # the cell itself, not the kernel's stack
    kernel = ("dispatch_shell", "execute_request", "run_cell", "run_cell_magic", "run_code",
              "select", "poll", "_run_once")
    assert not any(k in name for name in facts["root"] for k in kernel), facts["root"]
    assert any("dispatch_shell" in n for n in facts["outer"])  # kept, unfolded on request
    assert not any(k in r[0] for r in facts["functions"] for k in kernel), facts["functions"]
    assert ["cpu", "In [2]", 3] in facts["named"], facts["named"]  # named by its cell
    # The only Python work of the cell holds the GIL the most. By self time it leads only
    # when the two workers overlapped; the main thread's wait in lock.acquire spans the
    # whole pool, so a run where the workers took turns ties them (seen once on 3.14).
    assert facts["by_held"][0] == ["cpu", "In [2]", 3], facts["by_held"]
    assert ["cpu", "In [2]", 3] in facts["by_self"][:2], facts["by_self"]
    assert facts["functions"][:3] == facts["by_self"], facts["functions"]  # self by default
    assert facts["title"] == "%%giltracer In [3]"


def test_gilprofile_tables_start_with_the_cells_functions(notebook):
    text = shown_text(notebook.cells[4])
    assert text.startswith(f"{PROFILE_HEAD} %%gilprofile In [5]"), text[:200]
    tables = {}
    for title in (TOP_WAIT, TOP_HELD):
        lines = text.split(title, 1)[1].splitlines()[2:5]  # the top 3, below the header
        tables[title] = [(line.split()[0], " ".join(line.split()[1:3])) for line in lines]
    # held: the cell's loop first; waited: where the cell's threads waited (in its loop, or
    # in the pool's locks on the way back from a blocking call), never a kernel thread
    assert tables[TOP_HELD][0] == ("cpu", "In [2]:3"), tables
    rows, after = table_names(text)
    assert all(is_cell_thread(n) for n in rows) and "background thread" in after, text
    assert not any(k in text for k in ("ParentPoller", "EpollSelector", "epoll"))
    assert printed(notebook.cells[5])["summary"] == rows


def test_top_level_await_is_traced_on_the_kernels_loop(notebook):
    cell = notebook.cells[6]
    assert not [o for o in cell.outputs if o.get("output_type") == "error"], cell.outputs
    facts = printed(notebook.cells[7])
    assert facts["results"] == [sum(range(N))] * 2
    assert facts["title"] == "%%giltracer In [7]"
    assert "MainThread" in facts["summary"]  # the loop's thread: the kernel runs its loop there
    assert facts["threads"]["MainThread"] == facts["main_tid"]
    assert any(n.startswith("asyncio_") for n in facts["summary"]), facts["summary"]  # to_thread's
    # the awaited code, named by its cells (line numbers within the cell, below %%giltracer)
    assert ["cpu", "In [2]", 3] in facts["named"], facts["named"]
    assert ["job", "In [7]", 2] in facts["named"], facts["named"]
