"""A stand-in OpenAI-compatible chat server for the language-model coder's tests: /v1/models and
/v1/chat/completions over real HTTP, answering from a script keyed on words of the explanation.
It keeps every request body it got, so tests can check the settings that were sent."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "stand-in-coder"


def scripted(explanation: str, retry: bool) -> str:
    """The answer for an explanation (the last user message), first try or retry."""
    text = explanation.lower()
    if "banana" in text:
        return "fruit_salad"  # off the codebook, both times
    if "ramble" in text:
        return "Well, let me think about this.\nIt might be grammar, or not."  # both times
    if "second try" in text:
        return "generic" if retry else "I would say it is generic filler really."
    if "idk" in text:
        return "not_a_reason"
    if "off topic" in text and "typo" in text:
        return "Irrelevant, grammar."
    if "repeat" in text:
        return "repetition"
    if "off topic" in text:
        return "irrelevant"
    return "other"


class Handler(BaseHTTPRequestHandler):
    server: StandIn

    def log_message(self, *args) -> None:  # quiet
        return None

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": MODEL, "root": "stand-in"}]})
        else:
            self._send(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.bodies.append(body)
        if body.get("model") != MODEL:  # as vLLM answers for a model it does not serve
            self._send(
                404, {"error": {"message": f"The model `{body.get('model')}` does not exist."}}
            )
            return
        users = [m["content"] for m in body["messages"] if m["role"] == "user"]
        retry = len(users) > 1
        answer = scripted(users[0].removeprefix("Explanation: "), retry)
        self._send(
            200,
            {
                "model": MODEL,
                "choices": [
                    {"message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}
                ],
                "usage": {"completion_tokens": 3},
            },
        )


class StandIn(ThreadingHTTPServer):
    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.lock = threading.Lock()
        self.bodies: list[dict] = []
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"
