"""Offline generation of boundary examples: documents → prompts → continuations → JSONL.

Run `python -m generation --help`; the guide is docs/generation.md.
"""

__version__ = "1.1.0"
