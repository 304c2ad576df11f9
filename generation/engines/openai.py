"""The OpenAI-compatible engine (`--engine openai`): any server that speaks the OpenAI HTTP API,
such as vLLM (`vllm serve MODEL`), TGI or a hosted API.

Each example is one request to `/v1/completions` (plain and Grover prompts) or
`/v1/chat/completions` (`--prompt-format chat`) carrying its own sampling settings and seed; up to
`concurrency` requests are in flight at once, spread over one or more servers (`--base-url`, given
once per replica). A 429 or 5xx answer, a dropped connection or a timeout is retried with
exponential backoff and full jitter, or after the server's Retry-After when it sends one.

Each record carries the request exactly as sent (less the prompt) and what the server reported:
the model string, the system fingerprint and the finish reason. The API key is read from an
environment variable, sent only in the Authorization header, and never written or printed.

Only the standard library is used (urllib, threads).
"""

from __future__ import annotations

import email.utils
import http.client
import json
import os
import random
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from generation.engines.base import Continuation, EngineError, Request, unusable
from generation.filters import PROMPT_TOO_LONG
from generation.prompts import GROVER_END
from generation.sentences import complete_sentences, first_sentences

COMPLETIONS = "completions"
CHAT = "chat"
RETRY_CAP_S = 60.0  # longest backoff between two tries (a Retry-After may ask for more)
RETRY_AFTER_CAP_S = 600.0
# What servers say when a prompt plus max_tokens is longer than the model's context.
CONTEXT_WORDS = ("maximum context length", "context length", "context_length", "too long")


def safe_url(url: str) -> str:
    """The URL without user name, password or query (which could hold a credential)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """A Retry-After header in seconds: a number of seconds, or an HTTP date (RFC 9110)."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if seconds != seconds:  # nan
        return None
    return min(max(seconds, 0.0), RETRY_AFTER_CAP_S)


def backoff_seconds(attempt: int, base: float, rng: random.Random, cap: float = RETRY_CAP_S):
    """Full jitter: uniform on [0, min(cap, base * 2**attempt)]."""
    return rng.uniform(0.0, min(cap, base * (2**attempt)))


def request_params(request: Request, model: str, stop: tuple[str, ...]) -> dict:
    """The sampling part of the request body, exactly as it is sent (no prompt).

    Greedy decoding (p = 0) is temperature 0. top_k, min_p and repetition_penalty are not in the
    OpenAI API; they are sent (as vLLM's extra parameters) only when an example uses them."""
    decoding = request.decoding
    params: dict = {"model": model, "max_tokens": request.budget, "seed": request.seed, "n": 1}
    if decoding.greedy:
        params.update(temperature=0.0, top_p=1.0)
    else:
        params.update(temperature=decoding.temperature, top_p=decoding.p)
        if decoding.top_k:
            params["top_k"] = decoding.top_k
        if decoding.min_p is not None:
            params["min_p"] = decoding.min_p
    if decoding.repetition_penalty is not None:
        params["repetition_penalty"] = decoding.repetition_penalty
    if stop:
        params["stop"] = list(stop)
    return params


@dataclass
class Stats:
    requests: int = 0
    retries: int = 0
    retried_status: dict = field(default_factory=dict)  # "429" / "500" / "connection" -> count
    most_in_flight: int = 0


class OpenAIEngine:
    def __init__(
        self,
        model: str,
        base_urls: list[str],
        *,
        api_key_env: str = "OPENAI_API_KEY",
        concurrency: int = 8,
        max_retries: int = 6,
        retry_base: float = 1.0,
        timeout: float = 600.0,
        stop: tuple[str, ...] = (),
        prompt_format: str = "plain",
    ):
        if not base_urls:
            raise EngineError("--engine openai needs --base-url (e.g. http://localhost:8000/v1)")
        for url in base_urls:
            if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
                raise EngineError(f"--base-url {safe_url(url)!r} must start with http(s)://")
        self.name = model
        self.base_urls = [url.rstrip("/") for url in base_urls]
        self.api_key_env = api_key_env
        self._api_key = os.environ.get(api_key_env) or None
        self.concurrency = max(1, concurrency)
        self.max_retries = max(0, max_retries)
        self.retry_base = retry_base
        self.timeout = timeout
        self.endpoint = CHAT if prompt_format == "chat" else COMPLETIONS
        self.stop = tuple(stop) + ((GROVER_END,) if prompt_format == "grover" else ())
        self.served: list[dict] = []
        self._warnings: list[str] = []
        self.stats = Stats()
        self._lock = threading.Lock()
        self._in_flight = 0
        self._next = 0
        self._rng = random.Random()

    # -- HTTP ---------------------------------------------------------------------------------
    def _headers(self) -> dict:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _call(self, url: str, body: dict | None, retries: int | None = None) -> dict | None:
        """One JSON call with retries (`max_retries` unless `retries` is given). None when the
        server says the prompt is too long."""
        data = None if body is None else json.dumps(body).encode("utf-8")
        retries = self.max_retries if retries is None else retries
        for attempt in range(retries + 1):
            wait, why, last = None, None, ""
            method = "GET" if data is None else "POST"
            try:
                request = urllib.request.Request(
                    url, data=data, headers=self._headers(), method=method
                )
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    return json.loads(response.read().decode("utf-8"))
            except urllib.error.HTTPError as error:
                detail = error.read()[:1000].decode("utf-8", "replace")
                if error.code == 429 or error.code >= 500:
                    why = str(error.code)
                    wait = retry_after_seconds(error.headers.get("Retry-After"))
                elif error.code == 400 and any(w in detail.lower() for w in CONTEXT_WORDS):
                    return None
                else:
                    raise EngineError(
                        f"{safe_url(url)} answered HTTP {error.code}: {_message(detail)}"
                        + (
                            f" (is the API key in ${self.api_key_env} right?)"
                            if error.code in (401, 403)
                            else ""
                        )
                    ) from None
            except (urllib.error.URLError, http.client.HTTPException, OSError) as error:
                why = "connection"
                reason = getattr(error, "reason", error)
                last = f"{type(error).__name__}: {reason}"
            except json.JSONDecodeError:
                why = "bad_json"
            if attempt == retries:
                detail = last if why == "connection" else f"HTTP {why}"
                if retries == 0:
                    raise EngineError(f"{safe_url(url)}: {detail}")
                raise EngineError(
                    f"{safe_url(url)}: still failing after {retries + 1} tries "
                    f"({detail}); run again with --resume when the server is back"
                )
            with self._lock:
                self.stats.retries += 1
                self.stats.retried_status[why] = self.stats.retried_status.get(why, 0) + 1
                if wait is None:
                    wait = backoff_seconds(attempt, self.retry_base, self._rng)
            time.sleep(wait)
        raise AssertionError("unreachable")

    def check(self) -> None:
        """Make sure every server can complete with the model.

        The model list at /v1/models is a hint, not a contract: servers differ in what they list
        (`transformers serve` lists nothing, or answers 500 when its cache folder is missing).
        When a server's list cannot be read or does not name the model, one warning says so and
        one short completion decides instead; only a server that cannot complete stops the run."""
        self.served, self._warnings = [], []
        unlisted: list[str] = []
        for base in self.base_urls:
            entry, why = self._listed(base)
            if entry is not None:
                self.served.append(entry)
                continue
            unlisted.append(f"{safe_url(base)} ({why})")
            answer = self._probe(base)
            self.served.append({"id": self.name, "listed": False, "model": answer.get("model")})
        if unlisted:
            self._warnings.append(
                f"model {self.name!r} was not found in the model list of "
                f"{'; '.join(unlisted)}; one short completion with it worked, so the run goes on"
            )

    def _listed(self, base: str) -> tuple[dict | None, str]:
        """What the server's /models says of the model (asked once, no retries), or why not."""
        try:
            listing = self._call(f"{base}/models", None, retries=0) or {}
        except EngineError as error:
            return None, str(error).removeprefix(f"{safe_url(base)}/models").lstrip(": ")
        data = listing.get("data") if isinstance(listing, dict) else None
        models = [m for m in data or [] if isinstance(m, dict)]
        entry = next((m for m in models if m.get("id") == self.name), None)
        if entry is None:
            ids = ", ".join(str(m.get("id")) for m in models) or "nothing"
            return None, f"it lists: {ids}"
        keep = ("id", "root", "owned_by", "max_model_len", "created")
        return {k: entry[k] for k in keep if k in entry}, ""

    def _probe(self, base: str) -> dict:
        """One short completion with the model; an EngineError when the server cannot."""
        body: dict = {"model": self.name, "max_tokens": 1, "temperature": 0.0, "n": 1}
        if self.endpoint == CHAT:
            path = "chat/completions"
            body["messages"] = [{"role": "user", "content": "Hello"}]
        else:
            path = "completions"
            body["prompt"] = "Hello"
        try:
            answer = self._call(f"{base}/{path}", body)
        except EngineError as error:
            raise EngineError(
                f"{error}; {safe_url(base)} could not complete with model {self.name!r}: pass "
                "--model with the id the server serves"
            ) from None
        if not isinstance(answer, dict) or not answer.get("choices"):
            raise EngineError(
                f"{safe_url(base)}/{path} answered a short completion with model {self.name!r} "
                f"without choices: {json.dumps(answer)[:300]}"
            )
        return answer

    # -- the interface ------------------------------------------------------------------------
    def generate(self, requests: list[Request]) -> list[Continuation]:
        if not requests:
            return []
        pool = ThreadPoolExecutor(max_workers=min(self.concurrency, len(requests)))
        try:
            futures = [pool.submit(self._one, r) for r in requests]
            return [f.result() for f in futures]
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _one(self, request: Request) -> Continuation:
        params = request_params(request, self.name, self.stop)
        if self.endpoint == CHAT:
            if request.messages is None:
                raise EngineError("the chat endpoint needs --prompt-format chat")
            body = {**params, "messages": [dict(m) for m in request.messages]}
        else:
            body = {**params, "prompt": request.prompt}
        with self._lock:
            base = self.base_urls[self._next % len(self.base_urls)]
            self._next += 1
            self.stats.requests += 1
            self._in_flight += 1
            self.stats.most_in_flight = max(self.stats.most_in_flight, self._in_flight)
        path = "chat/completions" if self.endpoint == CHAT else "completions"
        try:
            answer = self._call(f"{base}/{path}", body)
        finally:
            with self._lock:
                self._in_flight -= 1
        if answer is None:
            return unusable(PROMPT_TOO_LONG)
        try:
            choice = answer["choices"][0]
            text = choice["message"]["content"] if self.endpoint == CHAT else choice["text"]
        except (KeyError, IndexError, TypeError):
            raise EngineError(
                f"{safe_url(base)}/{path}: an answer without choices[0] text: "
                f"{json.dumps(answer)[:300]}"
            ) from None
        text = text or ""
        finish = choice.get("finish_reason")
        finished = finish == "stop"
        # Keep what --engine hf keeps: the text up to where `needed` sentences are complete.
        cut = first_sentences(text, request.needed)
        if cut != text:
            text, finished = cut, False
        usage = answer.get("usage") or {}
        provenance = {
            "engine": "openai",
            "endpoint": self.endpoint,
            "request": params,
            "served_model": answer.get("model"),
            "system_fingerprint": answer.get("system_fingerprint"),
            "finish_reason": finish,
        }
        return Continuation(
            text=text,
            sentences=complete_sentences(text, finished),
            new_tokens=int(usage.get("completion_tokens") or 0),
            finished=finished,
            provenance=provenance,
        )

    def describe(self) -> dict:
        return {
            "engine": "openai",
            "name_or_path": self.name,
            "endpoint": self.endpoint,
            "base_urls": [safe_url(u) for u in self.base_urls],
            "served": self.served,
            "api_key_env": self.api_key_env,
            "api_key_set": self._api_key is not None,
            "concurrency": self.concurrency,
            "max_retries": self.max_retries,
            "stop": list(self.stop),
        }

    def provenance(self, code_version: str) -> dict:
        served = self.served[0] if self.served else {}
        return {
            "model": self.name,
            "weights_sha256": None,
            "hub_commit": None,
            "code_version": code_version,
            "generation": {
                "engine": "openai",
                "served_root": served.get("root"),
            },
        }

    def warnings(self, prompt_format: str) -> list[str]:
        return list(self._warnings)

    def check_chat(self) -> None:  # the server applies its own chat template
        return None

    def chat_template(self) -> dict:
        return {"source": "server", "name": f"{self.name} chat template (applied by the server)"}

    def request_stats(self) -> dict:
        return {
            "requests": self.stats.requests,
            "retries": self.stats.retries,
            "retried_by_status": dict(sorted(self.stats.retried_status.items())),
            "most_in_flight": self.stats.most_in_flight,
        }


def _message(detail: str) -> str:
    """The error message of an OpenAI-style error body, or the body's start."""
    try:
        body = json.loads(detail)
        error = body.get("error", body)
        if isinstance(error, dict):
            return str(error.get("message") or error)[:300]
        return str(error)[:300]
    except (ValueError, AttributeError):
        return detail[:300]
