"""Keys and secrets: OPENAI_API_KEY, api_key_env and URL credentials are sent, and never written."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import pytest
from paths import PAIR, write_sweep
from postgres_server import ADMIN_PASSWORD
from sse_server import SseServer
from stores import all_text

from pytest_modelsweep.client import Guard, post_requests, stream_requests
from pytest_modelsweep.core.errors import EndpointError
from pytest_modelsweep.core.records import ApiRequest
from pytest_modelsweep.core.runinfo import run_provenance
from pytest_modelsweep.core.secrets import (
    Credentials,
    key_from_env,
    redact,
    split_credentials,
)
from pytest_modelsweep.core.sweep import load_sweep
from pytest_modelsweep.serving.pool import EndpointPool
from pytest_modelsweep.serving.probe import probe_server

pytest_plugins = ("pytester",)

ROOT = Path(__file__).resolve().parents[1]
URL_SECRET = "urlpw-4821-sekrit"
ENV_SECRET = "envkey-9377-sekrit"
MODELS = ("gemma3-270m", "smollm2-135m")


@pytest.fixture(autouse=True)
def this_checkout_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def test_url_credentials_are_split_off_and_redacted() -> None:
    url, creds = split_credentials(f"http://:{URL_SECRET}@127.0.0.1:8000/x")
    assert url == "http://127.0.0.1:8000/x"
    assert creds is not None and creds.header() == f"Bearer {URL_SECRET}"
    url, creds = split_credentials(f"http://alice:{URL_SECRET}@h:1")
    assert url == "http://h:1" and creds is not None
    assert creds.header() == "Basic " + base64.b64encode(f"alice:{URL_SECRET}".encode()).decode()
    assert URL_SECRET not in repr(creds)
    assert redact(f"--endpoint m=http://alice:{URL_SECRET}@h:1 and {URL_SECRET}") == \
        "--endpoint m=http://***@h:1 and ***"
    assert split_credentials("http://h:1") == ("http://h:1", None)


def test_api_key_env_wins_over_openai_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "general-key")
    monkeypatch.setenv("MY_KEY", "model-key")
    assert key_from_env("MY_KEY").header() == "Bearer model-key"  # type: ignore[union-attr]
    assert key_from_env("UNSET_KEY").header() == "Bearer general-key"  # type: ignore[union-attr]
    monkeypatch.delenv("OPENAI_API_KEY")
    assert key_from_env(None) is None


def test_api_key_env_must_be_a_string(tmp_path: Path) -> None:
    sweep = write_sweep(tmp_path / "s.toml", ["m1"])
    sweep.write_text(sweep.read_text() + "api_key_env = 3\n")
    with pytest.raises(Exception, match="api_key_env"):
        load_sweep(str(sweep))


def test_without_a_key_the_probe_and_requests_say_so_in_one_line() -> None:
    with SseServer(served_names=("m",), api_key=ENV_SECRET) as server:
        with pytest.raises(EndpointError) as error:
            probe_server(server.base_url, "m", model="m1")
        post = asyncio.run(post_requests(server.v1, "m", [ApiRequest("a", "/v1/completions",
                                                                     {"prompt": "x"})],
                                         1, timeout_s=10))
        stream = asyncio.run(stream_requests(server.v1, "m", [ApiRequest("a", "/v1/completions",
                                                                         {"prompt": "x"})],
                                             1, timeout_s=10))
    wanted = "the server wants an API key: set OPENAI_API_KEY or api_key_env for m1"
    assert str(error.value).endswith(wanted) and "\n" not in str(error.value)
    assert post[0].error == "HTTP 401: the server wants an API key: set OPENAI_API_KEY or " \
                            "api_key_env for m"
    assert stream[0].error == post[0].error


def test_with_a_key_every_path_sends_it() -> None:
    creds = Credentials("Bearer", ENV_SECRET)
    guard = Guard(credentials=creds)
    with SseServer(served_names=("m",), api_key=ENV_SECRET) as server:
        probe_server(server.base_url, "m", credentials=creds)
        post = asyncio.run(post_requests(server.v1, "m", [ApiRequest("a", "/v1/completions",
                                                                     {"prompt": "x"})],
                                         1, timeout_s=10, guard=guard))
        stream = asyncio.run(stream_requests(server.v1, "m", [ApiRequest("a", "/v1/completions",
                                                                         {"prompt": "x"})],
                                             1, timeout_s=10, guard=guard))
    assert post[0].error is None and stream[0].error is None
    assert set(server.stats.authorizations) == {f"Bearer {ENV_SECRET}"}


@pytest.mark.parametrize("how", ["OPENAI_API_KEY", "api_key_env", "url"])
def test_the_pool_attaches_with_each_kind_of_key(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sweep = write_sweep(tmp_path / "s.toml", ["m1"])
    if how == "api_key_env":
        sweep.write_text(sweep.read_text() + 'api_key_env = "M1_KEY"\n')
        monkeypatch.setenv("M1_KEY", ENV_SECRET)
        monkeypatch.setenv("OPENAI_API_KEY", "not-this-one")
    elif how == "OPENAI_API_KEY":
        monkeypatch.setenv("OPENAI_API_KEY", ENV_SECRET)
    with SseServer(served_names=("m1",), api_key=ENV_SECRET) as server:
        url = server.base_url.replace("http://", f"http://:{ENV_SECRET}@") if how == "url" \
            else server.base_url
        pool = EndpointPool(load_sweep(str(sweep)), attach={"m1": url}, run_dir=tmp_path,
                            worker_id="main", progress=print)
        endpoint = pool.get("m1")
    assert endpoint.base_url == server.base_url
    assert ENV_SECRET not in repr(endpoint)
    assert server.stats.authorizations[-1] == f"Bearer {ENV_SECRET}"


def test_run_args_are_redacted(tmp_path: Path) -> None:
    run = run_provenance(tmp_path, str(tmp_path / "none.toml"),
                         ["--endpoint", f"m=http://u:{URL_SECRET}@h:1"])
    assert run["args"] == ["--endpoint", "m=http://***@h:1"]


FAILING = """
def test_boom(endpoint, modelsweep_run, model_name):
    assert endpoint.base_url == "this fails, showing the fixtures' reprs"
"""


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_no_secret_reaches_any_file_or_the_terminal(
    store: str, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    """Keys and the store's database password: in no file, folder name, junit or traceback
    (``-l`` shows the fixtures' reprs), nor in the run's args or the store itself."""
    monkeypatch.setenv("OPENAI_API_KEY", ENV_SECRET)
    store_args: list[str] = []
    secrets = [URL_SECRET, ENV_SECRET]
    if store == "postgresql":
        url = request.getfixturevalue("postgres_url")
        store_args = ["--store", url]
        secrets.append(ADMIN_PASSWORD)
    pytester.makepyfile(test_accuracy=(ROOT / "benches" / "test_accuracy.py").read_text(),
                        test_failing=FAILING)
    data = pytester.path / "gsm8k"
    data.mkdir()
    for name in ("test.jsonl", "train.jsonl"):
        (data / name).write_text('{"question": "2+2?", "answer": "#### 4"}\n' * 6)
    with SseServer(served_names=MODELS, api_key=URL_SECRET) as url_server, \
            SseServer(served_names=MODELS, api_key=ENV_SECRET) as env_server:
        netloc = url_server.base_url.removeprefix("http://")
        result = pytester.runpytest_subprocess(
            "-k", "gsm8k or boom", "--limit", "2", "--gsm8k-path", str(data / "test.jsonl"),
            "--modelsweep-dir", "work", "--results", "r.json", "--md", "r.md", "-l", "-vv",
            "--html", "r.html", "--self-contained-html",
            "-p", "no:cacheprovider", "--gsm8k-max-tokens", "4", *PAIR,
            f"--endpoint=gemma3-270m=http://user:{URL_SECRET}@{netloc}",
            f"--endpoint=smollm2-135m={env_server.base_url}", "--junitxml", "junit.xml",
            *store_args, timeout=120,
        )
    out = result.stdout.str() + result.stderr.str()
    result.assert_outcomes(failed=2, passed=3)  # the two gsm8k tests and the candidate's verdict
    assert "RunState(" in out and "Options(" in out  # the fixtures' reprs were shown
    assert url_server.stats.authorizations and env_server.stats.authorizations
    assert all(a.startswith("Basic ") for a in url_server.stats.authorizations)
    assert set(env_server.stats.authorizations) == {f"Bearer {ENV_SECRET}"}
    files = [p for p in pytester.path.rglob("*") if p.is_file()]
    assert (pytester.path / "r.json").is_file() and (pytester.path / "r.md").is_file()
    assert "RunState(" in (pytester.path / "r.html").read_text()  # the reprs reached the HTML
    assert (pytester.path / "junit.xml").is_file()
    assert any(p.suffix == ".sqlite" for p in files) == (store == "sqlite")
    stored = all_text(store_args[1] if store_args else str(pytester.path / "work/store.sqlite"))
    assert "gsm8k" in stored  # the store holds the run
    for secret in secrets:
        assert secret not in out
        leaks = [str(p) for p in files if secret.encode() in p.read_bytes()]
        assert leaks == []
        assert not [p for p in pytester.path.rglob("*") if secret in str(p)]
        assert secret not in stored
    assert "http://***@" in (pytester.path / "r.json").read_text()
    if store == "postgresql":
        args = json.loads((pytester.path / "r.json").read_text())["run"]["args"]
        assert "postgresql://***@127.0.0.1" in " ".join(args)
        assert not [p for p in pytester.path.rglob("*") if "postgresql" in p.name]
