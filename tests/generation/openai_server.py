"""A small OpenAI-compatible server for the tests: /v1/models, /v1/completions and
/v1/chat/completions, answered by a real (tiny) causal LM with real sampling that honours `seed`,
`temperature`, `top_p` and `max_tokens` (and vLLM's `top_k`, `min_p`, `repetition_penalty`).

    python tests/generation/openai_server.py --model DIR [--served-name NAME] [--api-key-env VAR]

It binds a free port on 127.0.0.1 and prints `PORT <n>` on its first line. Test controls:
POST /control {"fail": [429, 500, ...], "retry_after": "0", "delay": 0.05} makes the next requests
fail with those statuses (one each, in order) and delays every generation request; its "models"
says what /v1/models does until the next /control: "list" (the default) lists the served model,
"empty" lists nothing (as `transformers serve` does), "500" answers 500 (as `transformers serve`
does when its cache folder is missing) and "missing" answers 404; GET /stats
says how many requests came, how many were in flight at once at most, which failures were sent
and whether every request carried the expected API key.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch

from generation.decoding import Decoding
from generation.engines.base import Request
from generation.generator import continue_batch
from generation.models import load

NO_SENTENCE_LIMIT = 10**6


class State:
    def __init__(self, lm, served_name: str, api_key: str | None):
        self.lm = lm
        self.served_name = served_name
        self.api_key = api_key
        self.model_lock = threading.Lock()
        self.lock = threading.Lock()
        self.fail: list[int] = []
        self.retry_after: str | None = None
        self.delay = 0.0
        self.models = "list"
        self.requests = 0
        self.in_flight = 0
        self.most_in_flight = 0
        self.failures_sent: list[int] = []
        self.bad_keys = 0
        self.bodies: list[dict] = []
        digest = (lm.weights_sha256 or "0" * 64)[:12]
        self.fingerprint = f"fp_tiny_{digest}"


def decoding_of(body: dict) -> Decoding:
    temperature = float(body.get("temperature", 1.0))
    top_p = float(body.get("top_p", 1.0))
    penalty = body.get("repetition_penalty")
    if temperature == 0:
        return Decoding(p=0.0, repetition_penalty=penalty)
    return Decoding(
        p=top_p,
        temperature=temperature,
        top_k=body.get("top_k"),
        min_p=body.get("min_p"),
        repetition_penalty=penalty,
    )


def generate(state: State, prompt: str, body: dict) -> tuple[str, str, int]:
    request = Request(
        prompt=prompt,
        needed=NO_SENTENCE_LIMIT,
        decoding=decoding_of(body),
        seed=int(body.get("seed", 0)),
        budget=int(body.get("max_tokens", 16)),
    )
    with state.model_lock:
        result = continue_batch(state.lm, [request])[0]
    text, finish = result.text, "stop" if result.finished else "length"
    for stop in body.get("stop") or []:
        if stop in text:
            text, finish = text[: text.index(stop)], "stop"
    return text, finish, result.new_tokens


def make_handler(state: State):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def _send(self, status: int, obj: dict, headers: dict | None = None) -> None:
            data = json.dumps(obj).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def _authorised(self) -> bool:
            if state.api_key is None:
                return True
            if self.headers.get("Authorization") == f"Bearer {state.api_key}":
                return True
            with state.lock:
                state.bad_keys += 1
            self._send(401, {"error": {"message": "invalid API key", "type": "auth"}})
            return False

        def do_GET(self):
            if self.path == "/stats":
                with state.lock:
                    self._send(
                        200,
                        {
                            "requests": state.requests,
                            "most_in_flight": state.most_in_flight,
                            "failures_sent": state.failures_sent,
                            "bad_keys": state.bad_keys,
                            "bodies": state.bodies,
                        },
                    )
                return
            if self.path == "/v1/models":
                if not self._authorised():
                    return
                if state.models == "500":
                    self._send(500, {"error": {"message": "cache folder not found"}})
                    return
                if state.models == "missing":
                    self._send(404, {"detail": "Not Found"})
                    return
                if state.models == "empty":
                    self._send(200, {"object": "list", "data": []})
                    return
                model = {"id": state.served_name, "object": "model", "owned_by": "tests"}
                model["root"] = str(state.lm.name)
                model["max_model_len"] = 1024
                self._send(200, {"object": "list", "data": [model]})
                return
            self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if self.path == "/control":
                with state.lock:
                    state.fail = list(body.get("fail", []))
                    state.retry_after = body.get("retry_after")
                    state.delay = float(body.get("delay", 0.0))
                    state.models = body.get("models", "list")
                    if body.get("reset"):
                        state.requests = state.most_in_flight = state.bad_keys = 0
                        state.failures_sent, state.bodies = [], []
                self._send(200, {"ok": True})
                return
            if self.path not in ("/v1/completions", "/v1/chat/completions"):
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            if not self._authorised():
                return
            with state.lock:
                state.requests += 1
                status = state.fail.pop(0) if state.fail else None
                if status is not None:
                    state.failures_sent.append(status)
                state.in_flight += 1
                state.most_in_flight = max(state.most_in_flight, state.in_flight)
            done = False

            def leave() -> None:
                """Out of flight before the answer is written: a client that has read it may
                send its next request at once, and must not be counted twice."""
                nonlocal done
                if not done:
                    done = True
                    with state.lock:
                        state.in_flight -= 1

            try:
                if status is not None:
                    headers = {}
                    if state.retry_after is not None:
                        headers["Retry-After"] = state.retry_after
                    leave()
                    self._send(status, {"error": {"message": f"test {status}"}}, headers)
                    return
                time.sleep(state.delay)
                chat = self.path == "/v1/chat/completions"
                if body.get("model") != state.served_name:
                    leave()
                    self._send(404, {"error": {"message": f"model {body.get('model')!r}?"}})
                    return
                with state.lock:
                    state.bodies.append({k: v for k, v in body.items() if k != "prompt"})
                if chat:
                    prompt = state.lm.tokenizer.apply_chat_template(
                        body["messages"], add_generation_prompt=True, tokenize=False
                    )
                else:
                    prompt = body["prompt"]
                text, finish, tokens = generate(state, prompt, body)
                choice = {"index": 0, "finish_reason": finish}
                if chat:
                    choice["message"] = {"role": "assistant", "content": text}
                else:
                    choice["text"] = text
                leave()
                self._send(
                    200,
                    {
                        "id": "cmpl-" + hashlib.sha256(json.dumps(body).encode()).hexdigest()[:8],
                        "object": "chat.completion" if chat else "text_completion",
                        "model": state.served_name,
                        "system_fingerprint": state.fingerprint,
                        "choices": [choice],
                        "usage": {"completion_tokens": tokens},
                    },
                )
            finally:
                leave()

    return Handler


@contextlib.contextmanager
def serve(model_dir, served_name: str, key_env: str, key: str):
    """Run this server as a separate process for a test: yields {"base": its /v1 URL,
    "control": a function taking /control's settings, "stats": a function returning /stats}."""
    env = {**os.environ, key_env: key, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, __file__, "--model", str(model_dir), "--served-name", served_name]
    process = subprocess.Popen(
        [*command, "--api-key-env", key_env],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        line = process.stdout.readline()
        if not line.startswith("PORT "):
            process.kill()
            raise RuntimeError(f"the test server did not start: {process.stderr.read()[-2000:]}")
        root = f"http://127.0.0.1:{int(line.split()[1])}"

        def control(**settings) -> None:
            data = json.dumps(settings).encode()
            request = urllib.request.Request(f"{root}/control", data=data, method="POST")
            urllib.request.urlopen(request, timeout=10).read()

        def stats() -> dict:
            return json.loads(urllib.request.urlopen(f"{root}/stats", timeout=10).read())

        yield {"base": f"{root}/v1", "control": control, "stats": stats}
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--served-name", default="tiny")
    parser.add_argument("--api-key-env", help="require the key in this environment variable")
    args = parser.parse_args()
    torch.set_num_threads(1)
    lm = load(args.model, device="cpu", dtype="float32")
    key = os.environ.get(args.api_key_env) if args.api_key_env else None
    state = State(lm, args.served_name, key)
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(state))
    server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
