"""The contracts of RoFT, in one small pure package.

`app` (the site), `generation` and `analysis` all import from here, and nothing here imports Flask,
SQLAlchemy or pandas:

- `roftcore.boundary`: the boundary convention, RoFT's scoring rule and its conversions;
- `roftcore.reasons`: the eight reasons a player can give;
- `roftcore.records`: the example record (the JSONL line generation writes and `flask import`
  reads), with its provenance fields, and its validation.

See docs/boundary.md for the convention and docs/generation.md for the record.
"""
