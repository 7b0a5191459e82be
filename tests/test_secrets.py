"""Keys and secrets: OPENAI_API_KEY, api_key_env and URL credentials are sent, and never written."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import pytest
from support.paths import PAIR, write_sweep
from support.postgres_server import ADMIN_PASSWORD
from support.sse_server import SseServer
from support.stores import all_text

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
    assert (
        redact(f"--endpoint m=http://alice:{URL_SECRET}@h:1 and {URL_SECRET}")
        == "--endpoint m=http://***@h:1 and ***"
    )
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
        post = asyncio.run(
            post_requests(
                server.v1,
                "m",
                [ApiRequest("a", "/v1/completions", {"prompt": "x"})],
                1,
                timeout_s=10,
            )
        )
        stream = asyncio.run(
            stream_requests(
                server.v1,
                "m",
                [ApiRequest("a", "/v1/completions", {"prompt": "x"})],
                1,
                timeout_s=10,
            )
        )
    wanted = "the server wants an API key: set OPENAI_API_KEY or api_key_env for m1"
    assert str(error.value).endswith(wanted) and "\n" not in str(error.value)
    assert (
        post[0].error == "HTTP 401: the server wants an API key: set OPENAI_API_KEY or "
        "api_key_env for m"
    )
    assert stream[0].error == post[0].error


def test_with_a_key_every_path_sends_it() -> None:
    creds = Credentials("Bearer", ENV_SECRET)
    guard = Guard(credentials=creds)
    with SseServer(served_names=("m",), api_key=ENV_SECRET) as server:
        probe_server(server.base_url, "m", credentials=creds)
        post = asyncio.run(
            post_requests(
                server.v1,
                "m",
                [ApiRequest("a", "/v1/completions", {"prompt": "x"})],
                1,
                timeout_s=10,
                guard=guard,
            )
        )
        stream = asyncio.run(
            stream_requests(
                server.v1,
                "m",
                [ApiRequest("a", "/v1/completions", {"prompt": "x"})],
                1,
                timeout_s=10,
                guard=guard,
            )
        )
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
        url = (
            server.base_url.replace("http://", f"http://:{ENV_SECRET}@")
            if how == "url"
            else server.base_url
        )
        pool = EndpointPool(
            load_sweep(str(sweep)),
            attach={"m1": url},
            run_dir=tmp_path,
            worker_id="main",
            progress=print,
        )
        endpoint = pool.get("m1")
    assert endpoint.base_url == server.base_url
    assert ENV_SECRET not in repr(endpoint)
    assert server.stats.authorizations[-1] == f"Bearer {ENV_SECRET}"


def test_run_args_are_redacted(tmp_path: Path) -> None:
    run = run_provenance(
        tmp_path,
        str(tmp_path / "none.toml"),
        [
            "--endpoint",
            f"m=http://u:{URL_SECRET}@h:1",
            "--tx",
            f"2*popen//env:PGPASSWORD={URL_SECRET}//env:MODELSWEEP_CHIP=1",
            f"--tx=ssh=h//env:hf_token=a/{URL_SECRET}//python=python3",
            f"--endpoint=m=http://h:1/v1?x=1&api_key={URL_SECRET}#f",
        ],
    )
    assert run["args"] == [
        "--endpoint",
        "m=http://***@h:1",
        "--tx",
        "2*popen//env:PGPASSWORD=***//env:MODELSWEEP_CHIP=1",
        "--tx=ssh=h//env:hf_token=***//python=python3",
        "--endpoint=m=http://h:1/v1?x=1&api_key=***#f",
    ]


FAILING = """
def test_boom(endpoint, modelsweep_run, model_name):
    assert endpoint.base_url == "this fails, showing the fixtures' reprs"
"""


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_no_secret_reaches_any_file_or_the_terminal(
    store: str,
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
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
    pytester.makepyfile(
        test_accuracy=(ROOT / "benches" / "test_accuracy.py").read_text(), test_failing=FAILING
    )
    data = pytester.path / "gsm8k"
    data.mkdir()
    for name in ("test.jsonl", "train.jsonl"):
        (data / name).write_text('{"question": "2+2?", "answer": "#### 4"}\n' * 6)
    with (
        SseServer(served_names=MODELS, api_key=URL_SECRET) as url_server,
        SseServer(served_names=MODELS, api_key=ENV_SECRET) as env_server,
    ):
        netloc = url_server.base_url.removeprefix("http://")
        result = pytester.runpytest(
            "-k",
            "gsm8k or boom",
            "--limit",
            "2",
            "--gsm8k-path",
            str(data / "test.jsonl"),
            "--modelsweep-dir",
            "work",
            "--results",
            "r.json",
            "--md",
            "r.md",
            "-l",
            "-vv",
            "--html",
            "r.html",
            "--self-contained-html",
            "-p",
            "no:cacheprovider",
            "--gsm8k-max-tokens",
            "4",
            *PAIR,
            f"--endpoint=gemma3-270m=http://user:{URL_SECRET}@{netloc}",
            f"--endpoint=smollm2-135m={env_server.base_url}",
            "--junitxml",
            "junit.xml",
            *store_args,
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


# --------------------------------------------------------------------------- a hostile user's cases

USER_SWEEP = """
[sweep]
name = "mine"
reference = "ref"
[serving]
backend = "llamacpp"
[models.ref]
source = "embedded:x"
license = "mit"
prompting = "completion"
[models.cand]
source = "embedded:x"
license = "mit"
prompting = "completion"
"""

# A user's benchmark whose scorer has a bug on one item: the exception rises through the
# request path (post_requests' on_result), so -l shows the locals of its every frame.
USER_BENCH = """
import pytest
from pytest_modelsweep import EvalItem

ITEMS = [EvalItem(f"q{i:02d}", prompt=f"say w0 {i}", answer="w0", max_tokens=4,
                  extra_body=FAULT) for i in range(6)]

def says_w0(completion, item):
    if BUGGY and item.id == "q03":
        raise KeyError("a bug in the scorer")
    return (completion.text or "").strip().startswith("w0")

@pytest.mark.modelsweep_benchmark("my_eval")
def test_my_eval(evaluate):
    evaluate("my_eval", ITEMS, says_w0, concurrency=2)
"""


def user_project(pytester: pytest.Pytester, *, buggy: bool, fault: str = "") -> None:
    (pytester.path / "mine.toml").write_text(USER_SWEEP)
    extra = {"test_fault": fault} if fault else {}
    pytester.makepyfile(test_mine=f"BUGGY = {buggy}\nFAULT = {extra!r}\n" + USER_BENCH)


def leaks(root: Path, out: str, secret: str, store: Path) -> list[str]:
    """Where ``secret`` is: the output, any file or folder name under ``root``, the store."""
    found = (
        [f"output: {out[max(0, out.find(secret) - 80) : out.find(secret) + 40]!r}"]
        if secret in out
        else []
    )
    found += [str(p) for p in root.rglob("*") if secret in str(p.relative_to(root))]
    found += [str(p) for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
    if store.is_file() and secret in all_text(str(store)):
        found.append("store rows")
    return found


def test_pytest_l_with_an_exception_in_the_request_path_shows_no_key(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``-l`` prints the locals of every frame from the test down to the scorer that raised,
    post_requests' (its request headers) among them: the key is in none of the outputs."""
    monkeypatch.setenv("OPENAI_API_KEY", ENV_SECRET)
    user_project(pytester, buggy=True)
    with SseServer(served_names=("ref", "cand"), api_key=ENV_SECRET) as server:
        result = pytester.runpytest(
            "--sweep=mine.toml",
            f"--endpoint=ref={server.base_url}",
            "--model=ref",
            "-k",
            "not verdict",
            "--modelsweep-dir=work",
            "-l",
            "--tb=long",
            "--junitxml=junit.xml",
            "--html=r.html",
            "--self-contained-html",
            "--results=r.json",
            "--md=r.md",
            "-p",
            "no:cacheprovider",
        )
    out = result.stdout.str() + result.stderr.str()
    result.assert_outcomes(failed=1)
    assert "KeyError: 'a bug in the scorer'" in out
    # the frame that sends (and holds the headers) was shown, its key hidden
    assert "headers    = {'Content-Type': 'application/json', 'Authorization': '***'}" in out
    assert "Credentials(Bearer, ***)" in out
    assert set(server.stats.authorizations) == {f"Bearer {ENV_SECRET}"}
    assert "'Authorization': '***'" in (pytester.path / "junit.xml").read_text()
    assert "Authorization" in (pytester.path / "r.html").read_text()
    assert leaks(pytester.path, out, ENV_SECRET, pytester.path / "work/store.sqlite") == []


def test_the_streamed_request_on_the_wire_never_shows_its_key() -> None:
    """The streaming client holds its request bytes (head with the key) as SecretBytes."""
    from pytest_modelsweep.client.stream import _StreamRunner
    from pytest_modelsweep.core.secrets import SecretBytes, auth_headers

    runner = _StreamRunner(
        "http://127.0.0.1:9/v1",
        "m",
        [],
        10.0,
        None,
        Guard(credentials=Credentials("Bearer", ENV_SECRET)),
    )
    _, raw = runner._request_bytes(ApiRequest("a", "/v1/completions", {"prompt": "x"}))
    assert isinstance(raw, SecretBytes) and f"Bearer {ENV_SECRET}".encode() in raw
    assert ENV_SECRET not in repr(raw) and ENV_SECRET not in repr([raw])
    headers = auth_headers(Credentials("Bearer", ENV_SECRET), {"Accept": "x"})
    assert headers["Authorization"] == f"Bearer {ENV_SECRET}"
    assert ENV_SECRET not in repr(headers) and ENV_SECRET not in str({"h": headers})


def test_a_server_that_echoes_the_key_in_its_error_bodies_gets_it_written_nowhere(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Some proxies echo the request's Authorization header in a 500 body: the items' errors,
    the failure lines, the results, store, Markdown, step summary, HTML and junit keep the
    error with the key redacted."""
    monkeypatch.setenv("OPENAI_API_KEY", ENV_SECRET)
    summary = pytester.path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    user_project(pytester, buggy=False, fault="echokey")
    with SseServer(served_names=("ref", "cand"), api_key=ENV_SECRET) as server:
        result = pytester.runpytest(
            "--sweep=mine.toml",
            f"--endpoint=ref={server.base_url}",
            f"--endpoint=cand={server.base_url}",
            "--modelsweep-dir=work",
            "-l",
            "-rA",
            "--junitxml=junit.xml",
            "--html=r.html",
            "--self-contained-html",
            "--results=r.json",
            "--md=r.md",
            "-p",
            "no:cacheprovider",
        )
    out = result.stdout.str() + result.stderr.str()
    result.assert_outcomes(failed=3)  # both models' items failed, so the verdict cannot judge
    echoed = "upstream refused: header was 'Bearer ***'"
    result.stdout.fnmatch_lines(
        [
            (
                f"*6 of 6 my_eval requests got no answer (first: HTTP 500 "
                f"from /v1/completions: *{echoed}*"
            )
        ]
    )
    items = json.loads((pytester.path / "r.json").read_text())["measurements"][0]["items"]
    assert all(echoed in item["error"] for item in items)
    stored = all_text(str(pytester.path / "work/store.sqlite"))
    assert "upstream refused: header was" in stored and "Bearer ***" in stored
    for written in ("r.md", "step-summary.md", "junit.xml", "r.html"):
        assert (pytester.path / written).is_file(), written
    assert leaks(pytester.path, out, ENV_SECRET, pytester.path / "work/store.sqlite") == []


def test_a_key_with_a_slash_in_an_endpoint_url_is_refused_in_one_line(
    pytester: pytest.Pytester,
) -> None:
    """``http://:sk-ab/cd@host`` reads as host ``""`` and path ``/cd@host``: refused before
    anything is sent or written, naming the fix, the key shown nowhere."""
    user_project(pytester, buggy=False)
    key = "sk-ab/cd-4821-sekrit"
    with SseServer(served_names=("ref", "cand"), api_key=key) as server:
        netloc = server.base_url.removeprefix("http://")
        result = pytester.runpytest(
            "--sweep=mine.toml",
            f"--endpoint=ref=http://:{key}@{netloc}",
            "--modelsweep-dir=work",
            "--results=r.json",
            "-p",
            "no:cacheprovider",
        )
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert (
        f"ERROR: --endpoint ref=http://***@{netloc}: its credentials hold a '/', '?' or '#', "
        "which a URL reads as the end of the host: percent-encode them in the key (/ as %2F, "
        "? as %3F, # as %23), or give the key in OPENAI_API_KEY or the model's api_key_env "
        "variable instead" in out
    )
    assert "Traceback" not in out and server.stats.authorizations == []
    assert not (pytester.path / "r.json").exists() and not (pytester.path / "work").exists()
    for part in (key, "sk-ab", "cd-4821-sekrit"):
        assert part not in out


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://:sk-ab/cd@127.0.0.1:8000", "its credentials hold a '/', '?' or '#'"),
        ("http://:sk?ab@127.0.0.1:8000", "its credentials hold a '/', '?' or '#'"),
        ("http://:sk#ab@127.0.0.1:8000", "its credentials hold a '/', '?' or '#'"),
        ("http://127.0.0.1:80x0", "its port is not a number"),
        ("http://:key@:8000", "it names no host"),
        ("http://127.0.0.1 :8000", "the URL holds a space"),
        ("ftp://127.0.0.1:8000", "the URL must start with http:// or https://"),
        ("http://127.0.0.1:8000/v1?api_key=sk-ab", "a query (?…) or fragment (#…) is not sent"),
        ("http://127.0.0.1:8000/v1#top", "a query (?…) or fragment (#…) is not sent"),
    ],
)
def test_every_url_form_is_refused_or_handled_before_use(url: str, problem: str) -> None:
    from pytest_modelsweep.core.errors import SweepError
    from pytest_modelsweep.core.sweep import parse_endpoint_option

    with pytest.raises(SweepError) as error:
        parse_endpoint_option([f"m={url}"])
    assert problem in str(error.value) and "\n" not in str(error.value)
    for secret in ("sk-ab", "sk?ab", "sk#ab", "key@"):
        assert secret not in str(error.value)
    # the forms that are fine: encoded keys, Basic, IPv6, a path prefix
    assert parse_endpoint_option(["m=http://:sk-ab%2Fcd@127.0.0.1:8000/v1"]) == {
        "m": "http://:sk-ab%2Fcd@127.0.0.1:8000"
    }
    assert split_credentials("http://:sk-ab%2Fcd@h:1")[1].header() == "Bearer sk-ab/cd"  # type: ignore[union-attr]
    assert parse_endpoint_option(["m=http://[::1]:8000/proxy"]) == {"m": "http://[::1]:8000/proxy"}
    assert redact("m=http://:sk-ab/cd@127.0.0.1:8000 next") == "m=http://***@127.0.0.1:8000 next"
    assert redact("postgresql://u:sk@ab@h/db next") == "postgresql://***@h/db next"
    assert (
        redact("postgres://u@h/db?password=sk@ab&sslmode=require")
        == "postgres://***&sslmode=require"
    )  # the two finds overlap: hidden together
