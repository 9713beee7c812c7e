"""Builds analysis.ipynb, the notebook of run_script's chore benchmark (tools/script_bench_test.go).

It is jupyter-mcp-server's dev notebook (ydoc/testdata/jupyter-mcp-server--notebook.ipynb: 161
cells, plots, nbformat 4.2) with a data section spliced in after its imports: pandas imports,
a failed read, a table, a KeyError, a ZeroDivisionError and a plot, run in a real IPython kernel
so that the outputs and tracebacks are what IPython writes (ANSI colours included).

Run once from the repository root with a Python that has nbclient, ipykernel, pandas and
matplotlib (the .venv of `make venv` has them):

    .venv/bin/python tools/testdata/chores/make_analysis.py
"""

import json
import os
import tempfile

import nbformat
from nbclient import NotebookClient

HERE = os.path.dirname(os.path.abspath(__file__))
BASE = os.path.join(HERE, "..", "..", "..", "ydoc", "testdata", "jupyter-mcp-server--notebook.ipynb")

SECTION = [
    ("code", "import pandas as pd\nimport numpy as np"),
    ("markdown", "## Sales data\n\nThe regional sales, loaded from the export."),
    ("code", 'df = pd.read_csv("data/sales.csv")\ndf.head()'),
    ("code", 'df = pd.DataFrame({"region": ["north", "south", "east"], "units": [120, 95, 143]})\ndf.head()'),
    ("code", 'df["revenue"].sum()'),
    ("code", 'total = int(df["units"].sum())\nrate = total / len(df[df["units"] > 1000])'),
    ("markdown", "### Units by region"),
    ("code", 'import pandas as pd  # again, for the plots\nax = df.plot.bar(x="region", y="units")'),
]

nb = nbformat.v4.new_notebook()
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
for kind, src in SECTION:
    nb.cells.append(nbformat.v4.new_code_cell(src) if kind == "code" else nbformat.v4.new_markdown_cell(src))
with tempfile.TemporaryDirectory() as tmp:
    NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True, resources={"metadata": {"path": tmp}}).execute()

with open(BASE) as f:
    base = json.load(f)
cells = []
for c in nb.cells:
    c = json.loads(json.dumps(c))  # plain dicts
    c.pop("id", None)  # the base notebook is nbformat 4.2: no cell ids
    c.setdefault("metadata", {})
    cells.append(c)
# Library frames name the site-packages of the Python that ran this; write them as a typical
# installation's.
site = os.path.dirname(os.path.dirname(__import__("pandas").__file__))
cells = json.loads(json.dumps(cells).replace(site, "/opt/conda/lib/python3.11/site-packages"))
at = next(i for i, c in enumerate(base["cells"]) if "".join(c["source"]).startswith("import matplotlib")) + 1
base["cells"][at:at] = cells
with open(os.path.join(HERE, "analysis.ipynb"), "w") as f:
    json.dump(base, f, indent=1, ensure_ascii=False)
    f.write("\n")
print("analysis.ipynb:", len(base["cells"]), "cells")
