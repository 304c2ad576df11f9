"""Reading a corpus of human-written documents: a JSONL file or a folder of .txt files.

JSONL: one object per line, `{"id", "text"}` plus optional `title`, `date`, `authors`
(a list of names or one string), `domain` and `category` (the document's category, a lowercase
slug; it wins over the run's --category and the file name). A corpus that names its category
otherwise (`genre`, `topic`, …) is read with `category_field` (the CLI's --category-field): that
field is then the category, its text made a slug ("Short Stories" → short-stories), and a document
without it is an error naming the file and line. A folder: every `*.txt` file is one
document whose id is the file name without `.txt`. Documents are split into sentences once, when
read.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from generation.sentences import split_sentences

OPTIONAL_FIELDS = ("title", "date", "authors", "domain", "category")
CATEGORY_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


class CorpusError(ValueError):
    """A corpus that cannot be read; the message names the file and, for data, the line."""


@dataclass(frozen=True)
class Document:
    id: str
    text: str
    sentences: tuple[str, ...]
    title: str | None = None
    date: str | None = None
    authors: tuple[str, ...] = ()
    domain: str | None = None
    category: str | None = None  # the document's own category field, when it has one
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def has_metadata(self) -> bool:
        return bool(self.title or self.date or self.authors or self.domain)


def _text_field(obj: dict, key: str, where: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise CorpusError(f"{where}: {key!r} must be a string, got {type(value).__name__}")
    return value.strip() or None


def _authors(obj: dict, where: str) -> tuple[str, ...]:
    value = obj.get("authors")
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise CorpusError(f"{where}: 'authors' must be a string or a list of strings")
    return tuple(a.strip() for a in value if a.strip())


def category_slug(value: str) -> str:
    """A category value as a slug: lowercase, runs of other characters as one dash."""
    return re.sub(r"[^a-z0-9_]+", "-", value.strip().lower()).strip("-_")[:64]


def _category(obj: dict, where: str, category_field: str | None) -> str | None:
    if category_field is None or category_field == "category":
        category = _text_field(obj, "category", where)
        if category is not None and not CATEGORY_RE.fullmatch(category):
            raise CorpusError(
                f"{where}: 'category' must be a lowercase slug (letters, digits, - or _), "
                f"got {category!r}"
            )
        return category
    value = obj.get(category_field)
    if value is None:
        raise CorpusError(f"{where}: no {category_field!r} field (named by --category-field)")
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise CorpusError(f"{where}: {category_field!r} must be a string")
    category = category_slug(str(value))
    if not CATEGORY_RE.fullmatch(category):
        raise CorpusError(f"{where}: {category_field!r} value {value!r} makes no category slug")
    return category


def document_from_json(obj, where: str, category_field: str | None = None) -> Document:
    """One document from a decoded JSON value; `where` ("file:line") prefixes every error.
    `category_field` names the field holding the document's category (default `category`)."""
    if not isinstance(obj, dict):
        raise CorpusError(f"{where}: expected a JSON object with 'id' and 'text'")
    doc_id = obj.get("id")
    if isinstance(doc_id, int) and not isinstance(doc_id, bool):
        doc_id = str(doc_id)
    if not isinstance(doc_id, str) or not doc_id.strip():
        raise CorpusError(f"{where}: 'id' must be a non-empty string")
    text = obj.get("text")
    if not isinstance(text, str) or not text.strip():
        raise CorpusError(f"{where}: 'text' must be a non-empty string")
    named = ("id", "text", *OPTIONAL_FIELDS, category_field or "category")
    extra = {k: v for k, v in obj.items() if k not in named}
    category = _category(obj, where, category_field)
    return Document(
        id=doc_id.strip(),
        text=text,
        sentences=tuple(split_sentences(text)),
        title=_text_field(obj, "title", where),
        date=_text_field(obj, "date", where),
        authors=_authors(obj, where),
        domain=_text_field(obj, "domain", where),
        category=category,
        extra=extra,
    )


def _read_jsonl(path: Path, category_field: str | None = None) -> list[Document]:
    docs = []
    try:
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                where = f"{path}:{number}"
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as error:
                    raise CorpusError(
                        f"{where}: not valid JSON ({error.msg} at column {error.colno})"
                    ) from None
                docs.append(document_from_json(obj, where, category_field))
    except UnicodeDecodeError as error:
        raise CorpusError(f"{path}: not UTF-8 text ({error.reason})") from None
    except OSError as error:
        raise CorpusError(f"{path}: cannot read the corpus ({error.strerror})") from None
    return docs


def _read_folder(path: Path) -> list[Document]:
    files = sorted(path.glob("*.txt"))
    if not files:
        raise CorpusError(f"{path}: the folder has no .txt files")
    docs = []
    for file in files:
        try:
            text = file.read_text(encoding="utf-8")
        except UnicodeDecodeError as error:
            raise CorpusError(f"{file}: not UTF-8 text ({error.reason})") from None
        except OSError as error:
            raise CorpusError(f"{file}: cannot read ({error.strerror})") from None
        if not text.strip():
            raise CorpusError(f"{file}: the file is empty")
        docs.append(Document(id=file.stem, text=text, sentences=tuple(split_sentences(text))))
    return docs


def corpus_sha256(path: Path) -> str:
    """SHA-256 of the corpus as read: the JSONL file's bytes, or, for a folder, of each .txt
    file's name and the SHA-256 of its bytes, in name order."""
    path = Path(path)
    if not path.is_dir():
        return hashlib.sha256(path.read_bytes()).hexdigest()
    digest = hashlib.sha256()
    for file in sorted(path.glob("*.txt")):
        digest.update(f"{file.name}\t{hashlib.sha256(file.read_bytes()).hexdigest()}\n".encode())
    return digest.hexdigest()


def read_corpus(path: Path, category_field: str | None = None) -> list[Document]:
    """Every document of a JSONL file or a folder of .txt files; duplicate ids are errors.
    `category_field` (JSONL only) names the field that holds each document's category."""
    path = Path(path)
    if path.is_dir():
        if category_field not in (None, "category"):
            raise CorpusError(f"{path}: --category-field needs a JSONL corpus, not a folder")
        docs = _read_folder(path)
    elif path.exists():
        docs = _read_jsonl(path, category_field)
    else:
        raise CorpusError(f"{path}: no such corpus file or folder")
    if not docs:
        raise CorpusError(f"{path}: the corpus has no documents")
    seen: set[str] = set()
    for doc in docs:
        if doc.id in seen:
            raise CorpusError(f"{path}: document id {doc.id!r} appears more than once")
        seen.add(doc.id)
    return docs


CATEGORY_LIKE = ("genre", "topic", "section", "label", "subject", "source_category", "type")


def category_field_hint(docs: list[Document]) -> str | None:
    """When no document has a `category` field but most have a field that looks like one (genre,
    topic, …), a sentence suggesting --category-field; None otherwise. Without it every document
    is of the run's category, and the splice baseline would mix what that field tells apart."""
    if not docs or any(d.category for d in docs):
        return None
    for name in CATEGORY_LIKE:
        values = [d.extra.get(name) for d in docs if isinstance(d.extra.get(name), str)]
        if len(values) * 2 >= len(docs) and len(set(values)) > 1:
            return (
                f"the documents have no 'category' field but {len(values)} of {len(docs)} have "
                f"{name!r} ({len(set(values))} values): pass --category-field {name} to make "
                "it their category (splices stay within a category)"
            )
    return None


def default_category(path: Path) -> str:
    """The category a corpus gets when none is given: its file name (without suffix) or folder."""
    path = Path(path)
    return (path.name if path.is_dir() else path.stem).lower()
