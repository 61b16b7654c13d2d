"""Execute the lessons headless in a real Jupyter kernel and render each to HTML.

    python notebooks/lessons.py [-o build/notebooks] [notebook.ipynb ...]

With no notebooks named, runs every ``notebooks/*.ipynb``. Exits non-zero if a cell
raised (a check cell's assertion among them). The notebooks on disk stay without outputs.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import tempfile
from typing import List

import nbclient
import nbformat

HERE = os.path.dirname(os.path.abspath(__file__))
CELL_TIMEOUT_S = 300


def kernel_env() -> dict:
    """The kernel's environment: this one, with notebooks/ importable (the lessons import
    their checks, claims.py, as Jupyter started in this folder would) and without writing
    __pycache__ into it."""
    path = os.environ.get("PYTHONPATH")
    return dict(os.environ, PYTHONPATH=HERE + (os.pathsep + path if path else ""),
                PYTHONDONTWRITEBYTECODE="1")


def execute(nb: nbformat.NotebookNode, workdir: str) -> None:
    """Execute `nb` in place, top to bottom, in a fresh python3 kernel whose working
    directory is `workdir`. Raises nbclient's CellExecutionError at the first failing cell
    (its outputs so far stay in `nb`)."""
    client = nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                                     resources={"metadata": {"path": workdir}})
    client.execute(env=kernel_env())


def to_html(nb: nbformat.NotebookNode) -> str:
    """The executed notebook as one self-contained HTML page (the viewers stay inline)."""
    from nbconvert import HTMLExporter  # only rendering needs nbconvert

    body, _ = HTMLExporter(template_name="classic").from_notebook_node(nb)
    return body


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--outdir", default=os.path.join("build", "notebooks"))
    ap.add_argument("notebooks", nargs="*")
    args = ap.parse_args(argv)
    paths = args.notebooks or sorted(glob.glob(os.path.join(HERE, "*.ipynb")))
    os.makedirs(args.outdir, exist_ok=True)
    failed = []
    for path in paths:
        name = os.path.splitext(os.path.basename(path))[0]
        out = os.path.join(args.outdir, name + ".html")
        nb = nbformat.read(path, as_version=4)
        with tempfile.TemporaryDirectory(prefix="giltracer-nb-") as workdir:
            try:
                execute(nb, workdir)
            except Exception as e:  # a failing cell, and also a dead kernel or a timeout
                print(f"{name}: FAILED ({type(e).__name__})\n{e}", file=sys.stderr)
                failed.append(name)
        with open(out, "w", encoding="utf-8") as f:
            f.write(to_html(nb))  # a failed lesson is rendered too, up to its error
        if name not in failed:
            print(f"{name}: ok -> {out}")
    if failed:
        print(f"notebooks failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
