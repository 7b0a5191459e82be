"""Run lm-evaluation-harness's own ``gsm8k`` task against a recording OpenAI-compatible server.

Input (stdin, JSON): ``{"test": path, "train": path, "limit": N, "prompting":
"completion"|"chat", "responses": [text, ...]}``; ``responses[i]`` is what the server
answers for test problem ``i``.

lm-eval runs unmodified: ``simple_evaluate`` with its ``local-completions`` or
``local-chat-completions`` model, the ``gsm8k.yaml`` shipped in the wheel (only the
dataset is pointed at the local JSONL files, through a task file that ``include``\\ s
it), ``--apply_chat_template --fewshot_as_multiturn`` for chat, default seeds.

Output (stdout, JSON): per problem index, the request body lm-eval sent, and per
filter (``strict-match``, ``flexible-extract``) the filtered answer and ``exact_match``.
"""

from __future__ import annotations

import json
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

RESULT_OUT = sys.stdout
sys.stdout = sys.stderr  # the libraries print; only the result goes to the real stdout


def question_of(body: dict[str, Any]) -> str:
    """The test question a request asks: the text after its last ``Question: ``."""
    text = body["prompt"] if "prompt" in body else body["messages"][-1]["content"]
    return text.rsplit("Question: ", 1)[1].removesuffix("\nAnswer:")


class Recorder(BaseHTTPRequestHandler):
    by_question: dict[str, int] = {}
    responses: list[str] = []
    requests: dict[int, dict[str, Any]] = {}

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        index = self.by_question[question_of(body)]
        self.requests[index] = body
        text = self.responses[index]
        if "messages" in body:
            choice: dict[str, Any] = {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": text},
            }
            kind = "chat.completion"
        else:
            choice = {"index": 0, "finish_reason": "stop", "text": text}
            kind = "text_completion"
        payload = json.dumps(
            {
                "id": "x",
                "object": kind,
                "model": body.get("model", ""),
                "choices": [choice],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


def main() -> None:
    spec = json.load(sys.stdin)
    import lm_eval
    from lm_eval import evaluator
    from lm_eval.tasks import TaskManager

    tests = [
        json.loads(line) for line in Path(spec["test"]).read_text().splitlines() if line.strip()
    ]
    Recorder.by_question = {t["question"]: i for i, t in enumerate(tests[: spec["limit"]])}
    Recorder.responses = spec["responses"]
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]

    shipped = Path(lm_eval.__file__).parent / "tasks" / "gsm8k" / "gsm8k.yaml"
    chat = spec["prompting"] == "chat"
    with tempfile.TemporaryDirectory() as tasks_dir:
        Path(tasks_dir, "gsm8k_local.yaml").write_text(
            json.dumps(
                {
                    "include": str(shipped),
                    "task": "gsm8k_local",
                    "dataset_path": "json",
                    "dataset_name": None,
                    "dataset_kwargs": {
                        "data_files": {"train": spec["train"], "test": spec["test"]}
                    },
                }
            )
        )
        endpoint = "chat/completions" if chat else "completions"
        results = evaluator.simple_evaluate(
            model="local-chat-completions" if chat else "local-completions",
            model_args={
                "base_url": f"http://127.0.0.1:{port}/v1/{endpoint}",
                "model": "m",
                "tokenizer_backend": None,
                "max_gen_toks": spec["max_tokens"],
                "num_concurrent": 1,
            },
            tasks=["gsm8k_local"],
            task_manager=TaskManager(include_path=tasks_dir),
            limit=spec["limit"],
            apply_chat_template=chat,
            fewshot_as_multiturn=chat,
            log_samples=True,
            torch_random_seed=None,
        )
    server.shutdown()
    out: dict[int, dict[str, Any]] = {}
    for sample in results["samples"]["gsm8k_local"]:
        entry = out.setdefault(
            sample["doc_id"], {"request": Recorder.requests[sample["doc_id"]], "filters": {}}
        )
        entry["filters"][sample["filter"]] = {
            "filtered": sample["filtered_resps"][0],
            "exact_match": sample["exact_match"],
        }
    json.dump({str(k): v for k, v in sorted(out.items())}, RESULT_OUT)


if __name__ == "__main__":
    main()
