"""Loading a Hugging Face causal language model and its tokenizer, ready for batched generation."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import torch

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
# generation_config.json entries that only name tokens or describe the file: not decoding settings.
NOT_SETTINGS = {
    "_from_model_config",
    "transformers_version",
    "bos_token_id",
    "eos_token_id",
    "pad_token_id",
    "decoder_start_token_id",
    "output_attentions",
    "output_hidden_states",
    "use_cache",
}

DTYPES = {
    "auto": None,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}


class ModelError(ValueError):
    """A model or tokenizer that cannot be loaded, or a device that is not there."""


@dataclass
class LoadedModel:
    model: object
    tokenizer: object
    name: str  # as given: a hub id or a local path
    device: torch.device
    dtype: str
    revision: str | None = None
    commit: str | None = None  # the hub commit the files came from, when known
    eos_ids: list[int] = field(default_factory=list)
    weights_sha256: str | None = None
    weight_files: dict[str, str] = field(default_factory=dict)  # file name -> SHA-256
    # The model's generation_config.json settings; `generate` would apply them silently. They are
    # switched off (see `load`) and recorded, so every example's settings are the ones it states.
    model_defaults: dict = field(default_factory=dict)

    def describe(self) -> dict:
        config = self.model.config
        return {
            "name_or_path": self.name,
            "revision": self.revision,
            "commit": self.commit,
            "architecture": type(self.model).__name__,
            "model_type": getattr(config, "model_type", None),
            "parameters": sum(p.numel() for p in self.model.parameters()),
            "max_positions": max_positions(self.model),
            "dtype": self.dtype,
            "device": str(self.device),
            "weights_sha256": self.weights_sha256,
            "weight_files": self.weight_files,
            "generation_config_ignored": self.model_defaults,
        }

    def provenance(self, code_version: str) -> dict:
        """What every record this model writes carries in `provenance` (roftcore.records)."""
        import transformers

        return {
            "model": self.name,
            "weights_sha256": self.weights_sha256,
            "hub_commit": self.commit,
            "code_version": code_version,
            "generation": {
                "architecture": type(self.model).__name__,
                "dtype": self.dtype,
                "device_type": self.device.type,
                "transformers": transformers.__version__,
                "torch": torch.__version__.split("+")[0],
                "model_generation_config_ignored": self.model_defaults,
            },
        }


def hash_weights(folder: Path) -> tuple[str | None, dict[str, str]]:
    """SHA-256 of every weight file in `folder` (by name), and one digest over all of them
    (SHA-256 of the sorted "name sha256" lines). (None, {}) when there is none."""
    files = sorted(p for p in Path(folder).iterdir() if p.name.endswith(WEIGHT_SUFFIXES))
    digests = {}
    for path in files:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        digests[path.name] = digest.hexdigest()
    if not digests:
        return None, {}
    lines = "".join(f"{name} {sha}\n" for name, sha in sorted(digests.items()))
    return hashlib.sha256(lines.encode()).hexdigest(), digests


def _model_folder(name: str, source: str, revision: str | None, commit: str | None) -> Path | None:
    """The folder the weights were read from: the local path, or the hub cache's snapshot."""
    if Path(source).is_dir():
        return Path(source)
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(name, revision=commit or revision, local_files_only=True))
    except Exception:  # not in the cache in a form we can find: the commit still identifies it
        return None


def _switch_off_defaults(model) -> dict:
    """Replace the model's generation config with a blank one; return what it had set."""
    from transformers import GenerationConfig

    config = getattr(model, "generation_config", None)
    if config is None:
        return {}
    blank = GenerationConfig().to_dict()
    found = {
        key: value
        for key, value in config.to_dict().items()
        if key not in NOT_SETTINGS and blank.get(key, object()) != value
    }
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id,
        eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
    )
    return dict(sorted(found.items()))


def resolve_device(name: str) -> torch.device:
    """cpu, cuda, cuda:N, mps or auto (the first CUDA GPU if there is one, else the CPU)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ModelError(f"unknown device {name!r}; use cpu, cuda, cuda:N or auto") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ModelError(f"device {name!r} asked for, but no CUDA GPU is available")
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise ModelError(f"device {name!r}: only {torch.cuda.device_count()} GPU(s) present")
    return device


def _looks_like_path(name: str) -> bool:
    """Hub ids look like `gpt2` or `owner/name`; anything else with a slash is a path."""
    return name.startswith((".", "/", "~")) or name.endswith("/") or name.count("/") > 1


def max_positions(model) -> int | None:
    config = model.config
    for key in ("n_positions", "max_position_embeddings", "n_ctx"):
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def load(
    name: str,
    *,
    device: str = "auto",
    dtype: str = "auto",
    revision: str | None = None,
    progress: bool = True,
) -> LoadedModel:
    """Load `name` (hub id or local folder) with AutoModelForCausalLM and AutoTokenizer.

    The tokenizer pads on the left (transformers 5 does not save `padding_side`), and gets a pad
    token (the end-of-text token) when it has none. `progress=False` hides transformers' own
    bars (downloading, loading the weights).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as transformers_logging

    if dtype not in DTYPES:
        raise ModelError(f"unknown dtype {dtype!r}; choose from {', '.join(DTYPES)}")
    target = resolve_device(device)
    local = Path(name).expanduser()
    if _looks_like_path(name) and not local.exists():
        raise ModelError(f"model path {name!r} does not exist")
    if local.is_dir() and not (local / "config.json").exists():
        raise ModelError(f"model folder {name!r} has no config.json (save it with save_pretrained)")
    source = str(local) if local.exists() else name
    torch_dtype = DTYPES[dtype]
    if torch_dtype is None:
        torch_dtype = torch.float32 if target.type == "cpu" else torch.bfloat16
    bars = transformers_logging.is_progress_bar_enabled()
    if not progress:
        transformers_logging.disable_progress_bar()
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, revision=revision)
        model = AutoModelForCausalLM.from_pretrained(source, revision=revision, dtype=torch_dtype)
    except (OSError, ValueError, KeyError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ModelError(
            f"cannot load model {name!r}: not a local folder with a saved model, and not "
            f"available from the Hugging Face Hub ({first})"
        ) from None
    finally:
        if bars and not progress:
            transformers_logging.enable_progress_bar()
    if not getattr(model.config, "is_decoder", True) and not hasattr(model, "generate"):
        raise ModelError(f"model {name!r} is not a causal language model")
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise ModelError(f"tokenizer of {name!r} has neither a pad nor an end-of-text token")
        tokenizer.pad_token = tokenizer.eos_token
    model.to(target)
    model.eval()
    commit = getattr(model.config, "_commit_hash", None)
    folder = _model_folder(name, source, revision, commit)
    weights_sha256, weight_files = hash_weights(folder) if folder else (None, {})
    model_defaults = _switch_off_defaults(model)
    eos_ids = []
    if tokenizer.eos_token_id is not None:
        eos_ids.append(tokenizer.eos_token_id)
    from generation.prompts import GROVER_END

    grover_end = tokenizer.convert_tokens_to_ids(GROVER_END)
    known = isinstance(grover_end, int) and grover_end >= 0 and grover_end != tokenizer.unk_token_id
    if known and tokenizer.convert_ids_to_tokens(grover_end) == GROVER_END:
        eos_ids.append(grover_end)
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        name=name,
        device=target,
        dtype=str(torch_dtype).removeprefix("torch."),
        revision=revision,
        commit=commit,
        eos_ids=sorted(set(eos_ids)),
        weights_sha256=weights_sha256,
        weight_files=weight_files,
        model_defaults=model_defaults,
    )
