"""A tiny %%giltracer cell's output in a real Jupyter kernel (nbclient) is at most 60 KB
with the kernel's own threads (IOPub, heartbeat, history, control) traced beside
the cell's: the same target bench/output_bytes.py holds in a fresh process."""

import base64
import html
import json
import re
import zlib

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

TINY_MAX = 60_000

CELLS = [
    "%load_ext giltracer",
    "%%giltracer\nsum(range(10))",
]


def parts(page):
    """Bytes of the page's blocks, for the failure message: #gt-data (as shipped), #gt-code,
    #gt-bin, and the JSON of #gt-data inflated."""
    out = {}
    for name in ("gt-data", "gt-code", "gt-bin"):
        m = re.search(r'id="%s">\s*(.*?)\s*</script>' % name, page, re.S)
        out[name] = len(m.group(1).encode()) if m else 0
    m = re.search(r'id="gt-data">\s*(.*?)\s*</script>', page, re.S)
    if m and not m.group(1).startswith("{"):
        out["gt-data inflated"] = len(zlib.decompress(base64.b64decode(m.group(1))))
    return out


def test_tiny_cell_output_in_a_kernel_is_at_most_60_kb(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    cell = nb.cells[1]
    assert not [o for o in cell.outputs if o.get("output_type") == "error"], cell.outputs
    shown = [o["data"] for o in cell.outputs if o.get("output_type") == "display_data"]
    assert len(shown) == 1 and "text/html" in shown[0], cell.outputs
    by_type = {k: len((v if isinstance(v, str) else json.dumps(v)).encode("utf-8"))
               for k, v in shown[0].items()}
    total = sum(by_type.values())
    page = html.unescape(shown[0]["text/html"])
    assert 'id="gt-data"' in page  # the viewer, not a fallback
    assert total <= TINY_MAX, f"{total:,} bytes: {by_type}, of the page: {parts(page)}"
