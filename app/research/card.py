"""What lets others pick an export up: its dataset card and its Croissant metadata (pure).

Both are made from the one schema table (`export_schema.schema`): a table added there gets its card
section, its `configs`/`dataset_info` entry and its Croissant record set without any change here.

- `README.md` is a Hugging Face dataset card: a YAML header (licence, task categories, size
  category, one config per table listing its file, and each table's features with the types the
  schema gives) and sections on the fields, sizes, licence, collection, intended uses, limitations
  and pseudonymisation.
- `croissant.json` is Croissant 1.1 JSON-LD: a schema.org Dataset whose distribution lists every
  file with its SHA-256, one record set per table with a field per column and its dataType, and the
  Responsible-AI properties (rai:dataCollection, rai:personalSensitiveInformation, …).

`TYPES` maps the schema's types to pandas, Arrow, Hugging Face and Croissant types: the same column
is an int64 in the Parquet file, in the card and in Croissant, also when the table is empty.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from app.research import study_card

CROISSANT_VERSION = "http://mlcommons.org/croissant/1.1"
CARD_NAME = "README.md"
CROISSANT_NAME = "croissant.json"
DEFAULT_LICENSE = "cc-by-4.0"
LICENSE_URLS = {
    "cc-by-4.0": "https://creativecommons.org/licenses/by/4.0/",
    "cc-by-sa-4.0": "https://creativecommons.org/licenses/by-sa/4.0/",
    "cc-by-nc-4.0": "https://creativecommons.org/licenses/by-nc/4.0/",
    "cc0-1.0": "https://creativecommons.org/publicdomain/zero/1.0/",
    "odc-by": "https://opendatacommons.org/licenses/by/1-0/",
    "mit": "https://opensource.org/licenses/MIT",
}
ENCODINGS = {
    "csv": "text/csv",
    "parquet": "application/x-parquet",
    "sqlite": "application/vnd.sqlite3",
    "json": "application/json",
    "md": "text/markdown",
}


@dataclass(frozen=True)
class ColumnType:
    pandas: str  # the dtype of the column in the exported DataFrame
    nullable_pandas: str  # the dtype when the column has missing values
    arrow: pa.DataType  # in the Parquet file
    hf_parquet: str  # Hugging Face `datasets` dtype for the Parquet config
    hf_text: str  # … for the CSV config (timestamps are ISO 8601 text there)
    croissant: str  # Croissant dataType


TIMESTAMP = pa.timestamp("us", tz="UTC")
TYPES: dict[str, ColumnType] = {
    "string": ColumnType("str", "str", pa.string(), "string", "string", "sc:Text"),
    "integer": ColumnType("int64", "Int64", pa.int64(), "int64", "int64", "sc:Integer"),
    "float": ColumnType("float64", "float64", pa.float64(), "float64", "float64", "sc:Float"),
    "boolean": ColumnType("bool", "boolean", pa.bool_(), "bool", "bool", "sc:Boolean"),
    "timestamp": ColumnType(
        "datetime64[us, UTC]",
        "datetime64[us, UTC]",
        TIMESTAMP,
        "timestamp[us, tz=UTC]",
        "string",
        "sc:DateTime",
    ),
    "date": ColumnType("str", "str", pa.string(), "string", "string", "sc:Date"),
}
SIZE_CATEGORIES = (
    (1_000, "n<1K"),
    (10_000, "1K<n<10K"),
    (100_000, "10K<n<100K"),
    (1_000_000, "100K<n<1M"),
    (10_000_000, "1M<n<10M"),
)

COLLECTION = (
    "Players of a web game (Real or Fake Text) read a text one sentence at a time; the first "
    "sentence is always human-written and, in most texts, a language model or a baseline wrote "
    "the rest from some sentence on. After each sentence the player says whether it was written "
    "by a machine (and why, by choosing reasons and optionally writing an explanation) or asks for "
    "the next one; at the end of the text they may say it was all human. Points follow RoFT's rule "
    "(5 for the boundary sentence, fewer the later the guess). Only answered rounds are "
    "annotations; practice rounds of crowd studies are left out. Crowd workers (where a study "
    "ran) played the same task on the same site, with attention checks."
)
USES = (
    "Measuring how well people detect where human-written text ends and machine-generated text "
    "begins, by text category, generating system and decoding setting; comparing people with "
    "automatic detectors on the same texts; studying the reasons people give."
)
OUT_OF_SCOPE = (
    "Identifying or profiling individual players; training systems meant to make generated text "
    "harder to detect without reporting it; treating the generated texts as facts."
)
LIMITATIONS = [
    "Players choose to play and to consent: they are not a sample of any population, and "
    "keen players contribute many more rounds than others (analyse with player as a random "
    "effect or cluster, not as independent rows).",
    "The texts, systems and categories are those the site ran; a system may have written only "
    "one category, in which case system and category effects cannot be told apart.",
    "Generated sentences may be false, odd or offensive; the human texts are from the site's "
    "corpus and carry its biases.",
    "Explanations are free text written by players and were not checked beyond the site's "
    "moderation; reasons are what the player ticked.",
    "Timings are measured in the browser and include reading, thinking and distraction.",
]


def license_id(config_value: str | None) -> str:
    return (config_value or DEFAULT_LICENSE).strip().lower()


def license_url(license: str) -> str:
    return LICENSE_URLS.get(license, license)


def size_category(rows: int) -> str:
    for limit, name in SIZE_CATEGORIES:
        if rows < limit:
            return name
    return "n>10M"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _yaml(value) -> str:
    """A YAML scalar: JSON's quoted strings and numbers are valid YAML."""
    return json.dumps(value, ensure_ascii=False)


def table_files(tables: dict, fmt: str) -> dict[str, str]:
    """table -> its data file, for the formats with one file per table (none for SQLite)."""
    if fmt not in ("csv", "parquet"):
        return {}
    return {name: f"{name}.{fmt}" for name in tables}


def card_header(doc: dict, counts: dict[str, int], fmt: str, license: str) -> list[str]:
    files = table_files(doc["tables"], fmt)
    lines = [
        "---",
        f"license: {_yaml(license)}",
        f"pretty_name: {_yaml('RoFT boundary-detection annotations')}",
        "language:",
        "- en",
        "task_categories:",
        "- text-classification",
        "tags:",
        "- machine-generated-text-detection",
        "- human-annotation",
        "- roft",
        "size_categories:",
        f"- {_yaml(size_category(counts.get('rounds', 0)))}",
    ]
    if files:
        lines.append("configs:")
        for index, (table, path) in enumerate(files.items()):
            lines += [
                f"- config_name: {_yaml(table)}",
                "  data_files:",
                "  - split: train",
                f"    path: {_yaml(path)}",
            ]
            if index == 0:
                lines.append("  default: true")
        lines.append("dataset_info:")
        for table, columns in doc["tables"].items():
            lines += [f"- config_name: {_yaml(table)}", "  features:"]
            for column in columns:
                kind = TYPES[column["type"]]
                dtype = kind.hf_parquet if fmt == "parquet" else kind.hf_text
                lines += [f"  - name: {_yaml(column['name'])}", f"    dtype: {_yaml(dtype)}"]
    lines.append("---")
    return lines


def field_tables(doc: dict, heading: str) -> list[str]:
    """One Markdown table of fields per table of the schema (`export_schema.schema`), each under a
    `heading` ("##", "###") with the table's name: the card and the data dictionary share it."""
    lines: list[str] = []
    for table, columns in doc["tables"].items():
        lines += [
            f"{heading} {table}",
            "",
            "| column | type | unit | description |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| `{c['name']}` | {c['type']} | {c['unit']} | {c['description']} |" for c in columns
        ]
        lines.append("")
    return lines


def card(
    doc: dict,
    manifest: dict,
    sizes: dict[str, int],
    license: str,
    intro: list[str],
) -> str:
    """The dataset card (README.md): YAML header, then the sections. `doc` is the schema, `sizes`
    file -> bytes, `intro` the export's own first lines (what it is, private or not)."""
    counts, fmt = manifest["counts"], manifest["format"]
    lines = [*card_header(doc, counts, fmt, license), "", *intro]
    lines += ["## Loading", "", *_loading(table_files(doc["tables"], fmt), counts, fmt)]
    lines += ["## Sizes", "", "| table | rows |", "|---|---|"]
    lines += [f"| `{table}` | {counts.get(table, 0)} |" for table in doc["tables"]]
    lines += ["", "| file | bytes |", "|---|---|"]
    lines += [f"| `{name}` | {size} |" for name, size in sizes.items()]
    lines += ["", "## Fields", ""]
    lines += [
        "Positions: `boundary` is the index of the first machine-written sentence (N = all "
        "human); RoFT's `true_boundary_index` and `predicted_boundary_index` are one less. "
        "Types: string, integer (int64; empty where the description says so), float, boolean, "
        "timestamp (UTC), date (YYYY-MM-DD text).",
        "",
    ]
    lines += field_tables(doc, "###")
    if study := manifest.get("study"):
        lines += study_card.section(study, manifest.get("preregistration"))
    lines += [
        "## Licence",
        "",
        f"{license} ({license_url(license)}). Cite the RoFT papers (Dugan et al., 2020 and 2023) "
        "when you use the task or its data.",
        "",
        "## How the data was collected",
        "",
        COLLECTION,
        "",
        f"Task as players read it: {manifest.get('task_instruction', '')}",
        "",
        "Rounds: "
        + (
            "ALL players, including those who did not consent to research use."
            if manifest["include_unconsented"]
            else "only players who consented to research use."
        )
        + f" Filters: {json.dumps(manifest['filters'])}. Made {manifest['created_at']}.",
        "",
        "## Intended uses",
        "",
        USES,
        "",
        f"Out of scope: {OUT_OF_SCOPE}",
        "",
        "## Limitations",
        "",
        *[f"- {item}" for item in study_card.limitations(manifest, LIMITATIONS)],
        "",
        "## Pseudonymisation",
        "",
        pseudonymisation(manifest),
        "",
    ]
    return "\n".join(lines)


def _loading(files: dict[str, str], counts: dict[str, int], fmt: str) -> list[str]:
    """The card's "Loading" section: reading the tables with pandas, `datasets` or sqlite3."""
    if files:
        first = next(iter(files))
        lines = [
            "```python",
            "import pandas as pd",
            f'rounds = pd.read_{fmt}("{files[first]}")',
            "",
            "from datasets import load_dataset",
            f'rounds = load_dataset("path/to/this/folder", "{first}", split="train")',
            "",
            "import mlcroissant as mlc",
            'dataset = mlc.Dataset(jsonld="croissant.json")',
            "```",
            "",
            "Each table is one config (`" + "`, `".join(files) + "`); an empty table keeps its "
            "columns and their types.",
            "",
        ]
        empty = [table for table in files if not counts.get(table)]
        if empty:
            lines += [
                "Empty in this export: `"
                + "`, `".join(empty)
                + "`. pandas reads "
                + ("them" if len(empty) > 1 else "it")
                + (
                    " with every column and its type"
                    if fmt == "parquet"
                    else " with every column (a CSV file holds no types: take them from "
                    "schema.json or the features above)"
                )
                + "; `datasets` builds no split of 0 rows from files, "
                'so load an empty table with `load_dataset(folder, "'
                + empty[0]
                + '", split="train", streaming=True)` (its features, no rows).',
                "",
            ]
    else:
        lines = [
            "One SQLite file holds every table (and `export_info`); read it with `sqlite3` or "
            "`pandas.read_sql`. Export as Parquet or CSV for `datasets` and Croissant records.",
            "",
        ]
    return lines


def pseudonymisation(manifest: dict) -> str:
    if manifest["private"]:
        return (
            "NONE: this is a PRIVATE export (--private). `username` and `worker_id` identify "
            "players and crowd workers; do not share it outside the research team."
        )
    return (
        "Players appear only as keyed pseudonyms (" + manifest["pseudonyms"] + "). No usernames, "
        "emails, passwords, sessions, addresses or crowd worker ids are exported; the day a player "
        "joined is kept, not the time. Free-text explanations are players' own words and may, "
        "rarely, contain something personal."
    )


CONTEXT = {
    "@language": "en",
    "@vocab": "https://schema.org/",
    "arrayShape": "cr:arrayShape",
    "citeAs": "cr:citeAs",
    "column": "cr:column",
    "conformsTo": "dct:conformsTo",
    "containedIn": "cr:containedIn",
    "cr": "http://mlcommons.org/croissant/",
    "rai": "http://mlcommons.org/croissant/RAI/",
    "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "dct": "http://purl.org/dc/terms/",
    "equivalentProperty": "cr:equivalentProperty",
    "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract",
    "field": "cr:field",
    "fileProperty": "cr:fileProperty",
    "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet",
    "format": "cr:format",
    "includes": "cr:includes",
    "isArray": "cr:isArray",
    "isLiveDataset": "cr:isLiveDataset",
    "jsonPath": "cr:jsonPath",
    "key": "cr:key",
    "md5": "cr:md5",
    "parentField": "cr:parentField",
    "path": "cr:path",
    "recordSet": "cr:recordSet",
    "references": "cr:references",
    "regex": "cr:regex",
    "repeated": "cr:repeated",
    "replace": "cr:replace",
    "samplingRate": "cr:samplingRate",
    "sc": "https://schema.org/",
    "separator": "cr:separator",
    "source": "cr:source",
    "subField": "cr:subField",
    "transform": "cr:transform",
}


def _file_object(name: str, digest: str) -> dict:
    """Croissant's description of one data file of the export."""
    return {
        "@type": "cr:FileObject",
        "@id": name,
        "name": name,
        "contentUrl": name,
        "encodingFormat": ENCODINGS[name.rsplit(".", 1)[-1]],
        "sha256": digest,
    }


def _record_sets(doc: dict, manifest: dict, files: dict[str, str]) -> list[dict]:
    """Croissant's record sets: one per table, each column a field read from the table's file."""
    record_sets = []
    # Croissant reads records from CSV and Parquet files, not from SQLite: a SQLite export lists
    # its file only (its tables are in schema.json).
    for table, columns in doc["tables"].items() if files else ():
        fields = []
        for column in columns:
            field = {
                "@type": "cr:Field",
                "@id": f"{table}/{column['name']}",
                "name": column["name"],
                "description": column["description"]
                + (f" (unit: {column['unit']})" if column["unit"] else ""),
                "dataType": TYPES[column["type"]].croissant,
            }
            if table in files:
                field["source"] = {
                    "fileObject": {"@id": files[table]},
                    "extract": {"column": column["name"]},
                }
            fields.append(field)
        record_sets.append(
            {
                "@type": "cr:RecordSet",
                "@id": table,
                "name": table,
                "description": f"The {table} table: {manifest['counts'].get(table, 0)} rows.",
                "field": fields,
            }
        )
    return record_sets


def croissant(
    doc: dict,
    manifest: dict,
    digests: dict[str, str],
    license: str,
    url: str | None,
) -> dict:
    """Croissant 1.1 JSON-LD for one export: `digests` is file -> SHA-256 of every data file;
    `url` the project's address (left out when none is configured, never made up)."""
    fmt = manifest["format"]
    files = table_files(doc["tables"], fmt)
    record_sets = _record_sets(doc, manifest, files)
    description = (
        "Annotations from Real or Fake Text: people reading a text sentence by sentence and "
        "saying where a machine took over; with the texts, how each was made, and "
        "pseudonymised players."
    )
    if not files:
        description += (
            " This export is one SQLite file; its tables and columns are in schema.json. Export "
            "as Parquet or CSV for Croissant record sets."
        )
    out = {
        "@context": CONTEXT,
        "@type": "sc:Dataset",
        "name": "roft-annotations",
        "description": description,
        "conformsTo": CROISSANT_VERSION,
        "license": license_url(license),
        "url": url,
        "version": "1.0.0",
        "datePublished": manifest["created_at"][:10],
        "citeAs": study_card.CITATION,
        "creator": {"@type": "sc:Organization", "name": "RoFT site operators"},
        "keywords": ["machine-generated text detection", "human annotation", "RoFT"],
        "isLiveDataset": False,
        "distribution": [_file_object(name, digest) for name, digest in digests.items()],
        "rai:dataCollection": COLLECTION,
        "rai:dataCollectionType": ["Crowdsourced", "Web game"],
        "rai:dataCollectionTimeframe": [manifest["created_at"][:10]],
        "rai:dataAnnotationProtocol": manifest.get("task_instruction", ""),
        "rai:dataAnnotationPlatform": "The RoFT web game (public players and crowd studies)",
        "rai:annotatorDemographics": (
            "Not collected. Players may answer an optional survey on their familiarity with the "
            "text categories and with AI text generators and whether English is their native "
            "language (rounds.*_familiarity, rounds.native_speaker; -1 = not given)."
        ),
        "rai:personalSensitiveInformation": pseudonymisation(manifest),
        "rai:dataUseCases": USES,
        "rai:dataLimitations": " ".join(LIMITATIONS),
        "rai:dataBiases": LIMITATIONS[0],
        "rai:dataSocialImpact": (
            "Helps measure and teach the detection of machine-generated text; the generated texts "
            "could be misread as human-written if taken out of the dataset."
        ),
        "rai:dataPreprocessingProtocol": (
            "Positions converted to RoFT's convention in true/predicted_boundary_index; players "
            "replaced by keyed pseudonyms; CSV text cells that a spreadsheet would run as a "
            "formula get a leading apostrophe."
        ),
        "rai:dataReleaseMaintenancePlan": (
            "Each export is a snapshot made with `flask export`; a later export is a new version."
        ),
    }
    if record_sets:
        out["recordSet"] = record_sets
    if url is None:
        del out["url"]
    if study := manifest.get("study"):
        out.update(study_card.croissant_part(study, url))
    return out
