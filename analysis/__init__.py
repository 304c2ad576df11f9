"""Offline analysis of RoFT annotations: our exports (`flask export`) and the public `roft.csv`.

`analysis.load.load(path)` reads either into one DataFrame schema; `python -m analysis report
INPUT --out DIR` writes the full report (tables, figures, summary.json, report.md, a HEDS
datasheet). Points always come from roftcore.boundary, the one scoring rule the site uses too.
See docs/analysis.md.
"""

__version__ = "1.1.0"
