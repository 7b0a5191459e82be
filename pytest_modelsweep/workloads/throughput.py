"""The throughput workload: exact-length unique prompts, N in flight, checked numbers.

A run sends ``/v1/completions`` requests (for every model, so that no chat
template adds to the prompt) whose prompts have exactly the asked number of
tokens in the model's own tokenizer, as the server's ``/tokenize`` counts them,
and start with pairwise different first tokens, so that no two prompts share
any prefix and the prefix cache has nothing to reuse. Every request asks for
``max_tokens`` = ``min_tokens`` tokens with ``ignore_eos``, so that each one
generates exactly that many.

The numbers follow vLLM's benchmark (``vllm bench serve``): output tokens/s is
the generated tokens over the timed window (first start to last end); TTFT is
first text chunk minus start; TPOT per request is (E2E − TTFT) / (output
tokens − 1); ITL are the gaps between consecutive text chunks; E2E runs from
start to ``[DONE]``. Percentiles are numpy's (linear interpolation).

The run then checks itself against the server's own counters (see
:class:`ThroughputResult` for the rules) and :meth:`ThroughputResult.check`
raises :class:`MeasurementError` listing what broke.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import zlib
from collections.abc import Callable, Iterator, Sequence, Set
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
import numpy as np

from ..client import Guard, InFlight, StreamOutcome, stream_requests_detailed
from ..client.breaker import DEFAULT_IDLE_TIMEOUT_S
from ..client.counters import CounterKind, fetch_metrics, find_counter
from ..client.tls import tls_context
from ..core.errors import EndpointError, MeasurementError
from ..core.measurements import (
    Contention,
    InterleavedWindow,
    Latency,
    ServerMetricsWindow,
    ThroughputWindow,
)
from ..core.options import default_timed_requests
from ..core.records import ApiRequest, RequestRecord
from ..core.secrets import Credentials, auth_headers
from ..core.slo import Goodput, Slo, window_goodput
from ..serving.endpoint import Endpoint
from ..serving.server_metrics import DEFAULT_INTERVAL_S, MetricsSampler

if TYPE_CHECKING:
    from ..core.settings import BenchSettings

SHORT_PROMPT_TOKENS = 24
"""Prompt length of the short-prompt settings (no long prompt asked for)."""

FIDELITY_RANGE = (0.99, 1.01)
"""Our completion tokens ÷ the server's generated-tokens counter delta must be in here."""

MAX_LISTED = 20
"""Violations listed by :meth:`ThroughputResult.check` before "... and N more"."""

# Common English words, lower case; the prompts' seeded word pool and the source
# of lead words (a first word in four spellings: word, Word, " word", " Word").
WORDS = """
able about above accept across act add afraid after again age ago agree air all allow
almost alone along already also always among amount and angle animal answer any appear
apple area arm army around arrive art as ask at atom baby back bad bag ball band bank bar
base basic bat bear beat beauty bed been before began begin behind being bell below best
better between big bird bit black block blood blow blue board boat body bone book born
both bottom bought box boy branch bread break bright bring broad broke brother brought
brown build burn busy but buy by call came camp can capital captain car card care carry
case cat catch caught cause cell cent center century chair chance change character charge
chart check chick chief child children choose chord circle city claim class clean clear
climb clock close cloth cloud coast coat cold collect colony color column come common
company compare complete condition connect consider consonant contain continue control
cook cool copy corn corner correct cost cotton could count country course cover cow crease
create crop cross crowd cry current cut dad dance danger dark day dead deal dear death
decide decimal deep degree depend describe desert design determine develop dictionary did
die differ difficult direct discuss distant divide doctor does dog dollar done door double
down draw dream dress drink drive drop dry duck during each ear early earth ease east eat
edge effect egg eight either electric element else end enemy energy engine enough enter
equal equate especially even evening event ever every exact example except excite exercise
expect experience experiment eye face fact fair fall family famous far farm fast fat
father favor fear feed feel feet fell felt few field fig fight figure fill final find fine
finger finish fire first fish fit five flat floor flow flower fly follow food foot for
force forest form forward found four fraction free fresh friend from front fruit full fun
game garden gas gather gave general gentle get girl give glad glass go gold gone good got
govern grand grass gray great green grew ground group grow guess guide gun had hair half
hand happen happy hard has hat have head hear heard heart heat heavy held help her here
high hill him his history hit hold hole home hope horse hot hotel hour house how huge human
hundred hunt hurry ice idea if imagine in inch include indicate industry insect instant
instrument interest invent iron island job join joy jump just keep kept key kill kind king
knew know lady lake land language large last late laugh law lay lead learn least leave led
left leg length less let letter level lie life lift light like line liquid list listen
little live locate log lone long look lost lot loud love low machine made magnet main major
make man many map mark market mass master match material matter may me mean meant measure
meat meet melody men metal method middle might mile milk million mind mine minute miss
mix modern molecule moment money month moon more morning most mother motion mount mountain
mouth move much multiply music must my name nation natural nature near necessary neck need
neighbor never new next night nine noise noon nor north nose note nothing notice noun now
number numeral object observe occur ocean off offer office often oil old once one only
open operate opposite or order organ original other our out over own oxygen page paint pair
paper paragraph parent part particular party pass past path pattern pay people perhaps
period person phrase pick picture piece pitch place plain plan plane planet plant play
please plural poem point poor populate port pose position possible post pound power
practice prepare present press pretty print probable problem process produce product
proper property protect prove provide pull push put quart question quick quiet quite
quotient race radio rail rain raise ran range rather reach read ready real reason receive
record red region remember repeat reply represent require rest result rich ride right ring
rise river road rock roll room root rope rose round row rub rule run safe said sail salt
same sand sat save saw say scale school science score sea search season seat second
section see seed seem segment select self sell send sense sent sentence separate serve set
settle seven several shall shape share sharp she sheet shell shine ship shoe shop shore
short should shoulder shout show side sight sign silent silver similar simple since sing
single sister sit six size skill skin sky slave sleep slip slow small smell smile snow so
soft soil soldier solution solve some son song soon sound south space speak special speech
speed spell spend spoke spot spread spring square stand star start state station stay
steam steel step stick still stone stood stop store story straight strange stream street
stretch string strong student study subject substance subtract success such sudden suffix
sugar suggest suit summer sun supply support sure surface surprise swim syllable symbol
system table tail take talk tall teach team teeth tell temperature ten term test than thank
that the their them then there these they thick thin thing think third this those though
thought thousand three through throw thus tie time tiny tire to together told tone too took
tool top total touch toward town track trade train travel tree triangle trip trouble truck
true try tube turn twenty two type under unit until up upon us use usual valley value vary
verb very view village visit voice vowel wait walk wall want war warm was wash watch water
wave way we wear weather week weight well went were west what wheel when where whether
which while white who whole whose why wide wife wild will win wind window wing winter wire
wish with woman women wonder wood word work world would write written wrong wrote yard year
yellow yes yet you young your zero zoo amber anchor arrow autumn badge bamboo banner barrel
basket beacon beetle berry blanket blossom bonnet bottle bracket breeze brick bridge bubble
bucket buffalo butter button cabin cactus camera candle canoe canvas carpet carrot castle
cedar chalk cherry chimney cinnamon clover cobalt cocoa comet compass copper coral cotton
crayon cricket crystal cupboard curtain cushion daisy dolphin dragon drum eagle ember engine
falcon feather fiddle flame flute fossil fountain galaxy garlic giant ginger glacier goblet
granite harbor harvest hazel helmet honey horizon iceberg igloo ink ivory jacket jasmine
jelly jewel jungle kettle kitten ladder lantern lemon lettuce lilac lion lizard lobster
marble meadow melon mirror mitten monkey mosaic muffin mustard napkin nectar needle nickel
noodle nutmeg oasis olive onion orbit orchid otter owl paddle palace panther parrot peach
pearl pebble pencil pepper pillow pilot pine pirate pizza planet plum pocket pony poppy
potato puzzle quilt rabbit radish raven ribbon riddle robot rocket saddle salmon sapphire
scarf shadow sparrow spider sponge squirrel statue sunset swan tablet teapot thimble thistle
thunder tiger timber tomato tulip turtle umbrella velvet violin volcano walnut walrus
whistle willow wizard wolf yogurt zebra zipper
""".split()

_FILLERS = ("the", "and", "of", "a", "to", "in", "is", "it")
_WORD_POOL = tuple(dict.fromkeys(WORDS))


# --------------------------------------------------------------------------- tokenizer


class ServerTokenizer:
    """The model's own tokenizer, through the server's ``/tokenize`` (no special tokens).

    llama.cpp gets ``{"content": text, "add_special": false}``, vLLM
    ``{"model": name, "prompt": text, "add_special_tokens": false}``, so that
    the ids are the text's alone. A completion request, though, gets the BOS
    the model's tokenizer adds (Gemma: one ``<bos>``; SmolLM2: none):
    :attr:`added_special_tokens` measures it as the difference between the two.
    """

    def __init__(self, url: str, server_kind: str, served_name: str, *, timeout_s: float = 30.0,
                 credentials: Credentials | None = None):
        self.url = url
        self.server_kind = server_kind
        self.served_name = served_name
        self._client = httpx.Client(timeout=timeout_s, headers=auth_headers(credentials),
                                    verify=tls_context())
        self._style = {"llamacpp": "llamacpp", "vllm": "vllm"}.get(server_kind, "")
        self._added: int | None = None

    def _body(self, style: str, text: str, add_special: bool) -> dict[str, Any]:
        if style == "llamacpp":
            return {"content": text, "add_special": add_special}
        return {"model": self.served_name, "prompt": text, "add_special_tokens": add_special}

    def tokenize(self, text: str, *, add_special: bool = False) -> list[int]:
        """Token ids of ``text``; EndpointError if the server cannot tokenize."""
        styles = [self._style] if self._style else ["vllm", "llamacpp"]
        last = ""
        for style in styles:
            try:
                response = self._client.post(self.url, json=self._body(style, text, add_special))
            except httpx.HTTPError as exc:
                raise EndpointError(
                    f"cannot tokenize through {self.url}: {type(exc).__name__}: {exc}"
                ) from None
            if response.status_code == 200:
                tokens = response.json().get("tokens")
                if isinstance(tokens, list) and all(isinstance(t, int) for t in tokens):
                    self._style = style
                    return tokens
                last = f"no integer 'tokens' list in {response.text[:120]!r}"
            else:
                last = f"HTTP {response.status_code}: {' '.join(response.text.split())[:120]}"
        raise EndpointError(
            f"cannot tokenize through {self.url} ({last}); exact-length prompts need the "
            "server's /tokenize (llama.cpp and vLLM serve it)"
        )

    def __call__(self, text: str) -> list[int]:
        return self.tokenize(text)

    @property
    def added_special_tokens(self) -> int:
        """Tokens the server adds to a prompt of its own accord (BOS), measured once."""
        if self._added is None:
            probe = "The quick brown fox"
            self._added = len(self.tokenize(probe, add_special=True)) - len(self.tokenize(probe))
        return self._added

    def close(self) -> None:
        self._client.close()


def make_tokenizer(endpoint: Endpoint) -> ServerTokenizer:
    """A callable ``text -> token ids`` over the endpoint's ``/tokenize`` (no BOS added)."""
    return ServerTokenizer(endpoint.tokenize_url, endpoint.server_kind, endpoint.served_name,
                           credentials=endpoint.credentials)


# --------------------------------------------------------------------------- prompts


def _leads(rng: random.Random) -> Iterator[str]:
    """Lead-word candidates, seeded order: word, Word, " word", " Word" of each pool word."""
    words = list(_WORD_POOL)
    rng.shuffle(words)
    for spelling in (str, str.capitalize, lambda w: " " + w, lambda w: " " + w.capitalize()):
        for word in words:
            yield spelling(word)


def _fit(
    tokenize: Callable[[str], list[int]], lead: str, words: Sequence[str], length: int
) -> tuple[str, list[int]] | None:
    """``lead`` plus a prefix of ``words`` (and filler words) of exactly ``length`` tokens."""
    counts: dict[int, int] = {}

    def count(k: int) -> int:
        if k not in counts:
            counts[k] = len(tokenize(lead + "".join(" " + w for w in words[:k])))
        return counts[k]

    lo, hi = 0, len(words)
    if count(lo) > length or count(hi) <= length:
        return None
    # largest k with count(k) <= length: interpolation probes first, then bisection
    probes = 0
    while hi - lo > 1:
        c_lo, c_hi = count(lo), count(hi)
        if probes < 3 and c_hi > c_lo:
            mid = lo + round((length - c_lo) * (hi - lo) / (c_hi - c_lo))
            mid = min(max(mid, lo + 1), hi - 1)
        else:
            mid = (lo + hi) // 2
        probes += 1
        if count(mid) <= length:
            lo = mid
        else:
            hi = mid
    base = lead + "".join(" " + w for w in words[:lo])
    gap = length - count(lo)
    if gap == 0:
        return base, tokenize(base)
    for filler in _FILLERS:
        text = base + (" " + filler) * gap
        ids = tokenize(text)
        if len(ids) == length:
            return text, ids
    return None


def exact_length_prompt_ids(
    tokenize: Callable[[str], list[int]],
    count: int,
    length: int,
    *,
    seed: int,
    exclude_first_tokens: Set[int] = frozenset(),
) -> list[tuple[str, list[int]]]:
    """:func:`exact_length_prompts` with each prompt's token ids (as the server gave them)."""
    if length < 4:
        raise ValueError(f"prompt length must be at least 4 tokens, got {length}")
    rng = random.Random(seed)
    leads = _leads(rng)
    used = set(exclude_first_tokens)
    prompts: list[tuple[str, list[int]]] = []
    tried = 0
    for _ in range(count):
        while True:
            lead = next(leads, None)
            if lead is None:
                raise MeasurementError(
                    f"ran out of lead words after {len(prompts)} of {count} prompts with distinct "
                    f"first tokens ({len(used)} first tokens in use, {tried} leads tried); "
                    "ask for fewer requests per run"
                )
            tried += 1
            lead_ids = tokenize(lead)
            if not lead_ids or lead_ids[0] in used or len(lead_ids) > length // 2:
                continue
            words = [rng.choice(_WORD_POOL) for _ in range(length)]
            fitted = _fit(tokenize, lead, words, length)
            if fitted is None:
                continue
            text, ids = fitted
            # the count and the first token are verified on the final text itself
            if len(ids) != length or ids[0] in used:
                continue
            used.add(ids[0])
            prompts.append((text, ids))
            break
    return prompts


def exact_length_prompts(
    tokenize: Callable[[str], list[int]],
    count: int,
    length: int,
    *,
    seed: int,
    exclude_first_tokens: Set[int] = frozenset(),
) -> list[str]:
    """``count`` prompts of exactly ``length`` tokens whose first tokens all differ.

    Each prompt is a lead word then seeded words from :data:`WORDS`. The lead
    word's spelling (``word``, ``Word``, `` word``, `` Word``) is drawn in a
    seeded order and kept only if its first token id is new to this call and
    not in ``exclude_first_tokens``, so that no two prompts share even their
    first token. The word count is found by interpolation/bisection over the
    server's token counts, a gap of one or two tokens is closed with single-token
    filler words, and the final text is tokenized once more: only a text whose
    own count is exactly ``length`` and whose first id is unused is kept (the
    text is never rebuilt from detokenized ids). ``tokenize`` must not add BOS.
    """
    return [text for text, _ in exact_length_prompt_ids(
        tokenize, count, length, seed=seed, exclude_first_tokens=exclude_first_tokens
    )]


def user_prompt_ids(
    tokenize: Callable[[str], list[int]],
    texts: Sequence[str],
    count: int,
    *,
    seed: int,
    unique_prefixes: bool,
    exclude_first_tokens: Set[int] = frozenset(),
) -> list[tuple[str, list[int]]]:
    """``count`` prompts from a user's ``texts`` (in turn, round and round), with their ids.

    With ``unique_prefixes`` each prompt starts with a lead word (drawn as for
    :func:`exact_length_prompts`) whose first token no other prompt of this call,
    nor ``exclude_first_tokens``, starts with: no two requests share a prefix, so
    the prefix cache has nothing to reuse even when ``texts`` repeat. Every final
    text is tokenized by the server; its count is what each request must send.
    """
    if not texts:
        raise MeasurementError("no prompts to send; give at least one prompt text")
    rng = random.Random(seed)
    leads = _leads(rng)
    used = set(exclude_first_tokens)
    prompts: list[tuple[str, list[int]]] = []
    as_given: dict[str, list[int]] = {}  # each text tokenized once, however often it is sent
    for i in range(count):
        body = texts[i % len(texts)]
        if not unique_prefixes:
            if body not in as_given:
                as_given[body] = tokenize(body)
            prompts.append((body, as_given[body]))
            continue
        while True:
            lead = next(leads, None)
            if lead is None:
                raise MeasurementError(
                    f"ran out of lead words after {len(prompts)} of {count} prompts with "
                    "distinct first tokens; ask for fewer requests per run"
                )
            text = f"{lead.strip()}: {body}"
            ids = tokenize(text)
            if ids and ids[0] not in used:
                used.add(ids[0])
                prompts.append((text, ids))
                break
    return prompts


def throughput_requests(
    prompts: Sequence[str], *, output_tokens: int = 256, id_prefix: str = "throughput"
) -> list[ApiRequest]:
    """Completions requests that each generate exactly ``output_tokens`` tokens."""
    return [
        ApiRequest(
            item_id=f"{id_prefix}-{i}",
            path="/v1/completions",
            payload={
                "prompt": prompt,
                "max_tokens": output_tokens,
                "min_tokens": output_tokens,
                "ignore_eos": True,
                "temperature": 0,
            },
        )
        for i, prompt in enumerate(prompts)
    ]


WARMUP_OUTPUT_TOKENS = 16
"""Tokens a warm-up request generates: its prompt's whole prefill and 16 decode steps at the
window's concurrency take the first-request costs (connections, first batches, lazy
allocations) out of the timed window; a full-length warm-up measured nothing and doubled a
capacity step's time (``vllm bench serve`` and AIPerf send none by default)."""


def warmup_requests_of(prompts: Sequence[str], *, output_tokens: int, label: str,
                       ) -> list[ApiRequest]:
    """The warm-up requests of a window: :data:`WARMUP_OUTPUT_TOKENS` tokens each (fewer when
    the window's own requests are shorter)."""
    return throughput_requests(prompts, output_tokens=min(output_tokens, WARMUP_OUTPUT_TOKENS),
                               id_prefix=f"warmup-{label}")


# --------------------------------------------------------------------------- statistics


@dataclass(frozen=True)
class LatencyStats:
    """Mean and percentiles of one latency, in seconds (NaN when there are no values)."""

    mean: float
    p50: float
    p90: float
    p99: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> LatencyStats:
        if not values:
            nan = float("nan")
            return cls(nan, nan, nan, nan, 0)
        arr = np.asarray(values, dtype=float)
        p50, p90, p99 = (float(v) for v in np.percentile(arr, [50, 90, 99]))
        return cls(float(arr.mean()), p50, p90, p99, len(values))

    def in_ms(self) -> Latency:
        """The record of this latency, in milliseconds."""
        return Latency(self.mean * 1e3, self.p50 * 1e3, self.p90 * 1e3, self.p99 * 1e3, self.n)


def tpot(record: RequestRecord) -> float | None:
    """vLLM's time per output token: (E2E − TTFT) / (output tokens − 1)."""
    ttft = record.ttft
    tokens = record.completion_tokens
    if ttft is None or tokens is None or tokens < 2:
        return None
    return (record.latency - ttft) / (tokens - 1)


def itls(record: RequestRecord) -> list[float]:
    """Gaps between consecutive text chunks (the first chunk's wait is TTFT, not ITL)."""
    times = record.token_times
    return [b - a for a, b in zip(times, times[1:])]


# --------------------------------------------------------------------------- result


@dataclass
class ThroughputResult:
    """One timed window at a fixed concurrency, its statistics and its violations.

    Rules (each breach is one line in :attr:`violations`): every request
    succeeds; each produces exactly ``output_tokens`` completion tokens; each
    prompt is exactly ``prompt_tokens`` + the special tokens the server adds
    (:attr:`bos_tokens`); our completion tokens ÷ the server's generated-tokens
    counter delta lies in :data:`FIDELITY_RANGE`; no prompt token comes from the
    prefix cache (the counter delta and the per-request ``cache_n`` are both 0:
    completions add no template, and the prompts share no prefix).
    """

    concurrency: int
    prompt_tokens: int
    output_tokens: int
    server_kind: str
    duration_s: float
    completed: int
    output_tokens_per_s: float
    requests_per_s: float
    ttft: LatencyStats
    tpot: LatencyStats
    itl: LatencyStats
    e2e: LatencyStats
    total_prompt_tokens: int
    total_completion_tokens: int
    server_generated_tokens: float
    generated_counter: str
    fidelity: float
    server_cached_tokens: float
    reported_cached_tokens: int
    server_prompt_tokens: float
    bos_tokens: int
    tokens_in_shared_chunks: int
    records: list[RequestRecord] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    server: ServerMetricsWindow | None = None
    """What the server's ``/metrics`` showed during the timed requests (None: not sampled)."""

    def check(self) -> None:
        """Raise MeasurementError listing every violation ("; " between them)."""
        if not self.violations:
            return
        listed = self.violations[:MAX_LISTED]
        more = len(self.violations) - len(listed)
        tail = [f"... and {more} more"] if more else []
        raise MeasurementError(
            f"throughput run at concurrency {self.concurrency} broke its rules: "
            + "; ".join(listed + tail)
        )

    def goodput(self, slo: Slo) -> Goodput:
        """This window's goodput under ``slo``: its own request records (failed ones
        included, never good) over :attr:`duration_s`, the span output tokens/s uses."""
        return window_goodput((record.to_dict() for record in self.records), slo,
                              self.duration_s)

    def window(self, contention: Contention | None = None) -> ThroughputWindow:
        """The window as a throughput measurement records it (one repeat), with ``contention``
        (unknown when not given)."""
        return ThroughputWindow(
            concurrency=self.concurrency, prompt_tokens=self.prompt_tokens,
            output_tokens=self.output_tokens, duration_s=self.duration_s,
            completed=self.completed, output_tokens_per_s=self.output_tokens_per_s,
            requests_per_s=self.requests_per_s, ttft=self.ttft.in_ms(), tpot=self.tpot.in_ms(),
            itl=self.itl.in_ms(), e2e=self.e2e.in_ms(),
            total_prompt_tokens=self.total_prompt_tokens,
            total_completion_tokens=self.total_completion_tokens,
            server_generated_tokens=self.server_generated_tokens,
            generated_counter=self.generated_counter, fidelity=self.fidelity,
            server_cached_tokens=self.server_cached_tokens,
            reported_cached_tokens=self.reported_cached_tokens,
            server_prompt_tokens=self.server_prompt_tokens, bos_tokens=self.bos_tokens,
            tokens_in_shared_chunks=self.tokens_in_shared_chunks,
            violations=tuple(self.violations), contention=contention or Contention(),
            server_metrics=self.server,
        )


def summarize(
    outcomes: Sequence[StreamOutcome],
    *,
    concurrency: int,
    prompt_tokens: int,
    output_tokens: int,
    server_kind: str,
    counters_before: dict[str, float],
    counters_after: dict[str, float],
    bos_tokens: int = 0,
    warmup: Sequence[StreamOutcome] = (),
    prompt_tokens_each: Sequence[int] | None = None,
    no_cache: bool = True,
    server: ServerMetricsWindow | None = None,
) -> ThroughputResult:
    """Statistics and violations of a timed window from its outcomes and counters
    (``server``: what its ``/metrics`` showed, kept with it).

    ``prompt_tokens_each``: each request's own prompt length (user prompts differ);
    None: every prompt has ``prompt_tokens``. ``no_cache`` False: prompts may share
    prefixes, so prefix-cache hits are not violations.
    """
    records = [o.record for o in outcomes]
    ok = [r for r in records if r.error is None]
    duration = (max(r.end for r in records) - min(r.start for r in records)) if records else 0.0
    ours = sum(r.completion_tokens or 0 for r in records)
    name, after = find_counter(server_kind, "generated", counters_after)
    server_generated = after - find_counter(server_kind, "generated", counters_before)[1]
    cached_delta = _delta(server_kind, "cached", counters_before, counters_after)
    prompt_delta = _delta(server_kind, "prompt", counters_before, counters_after)
    fidelity = ours / server_generated if server_generated > 0 else float("nan")
    reported_cached = sum(o.cached_tokens or 0 for o in outcomes)

    violations: list[str] = []
    for i, o in enumerate(warmup):
        if o.record.error is not None:
            violations.append(f"warm-up request {i} failed: {o.record.error}")
    bos_note = f" ({prompt_tokens} + {bos_tokens} BOS the server adds)" if bos_tokens else ""
    for i, record in enumerate(records):
        if record.error is not None:
            violations.append(f"request {i} failed: {record.error}")
            continue
        if record.completion_tokens is None:
            violations.append(
                f"request {i} reported no usage (the server ignored stream_options.include_usage)"
            )
        elif record.completion_tokens != output_tokens:
            violations.append(
                f"request {i} produced {record.completion_tokens} of {output_tokens} tokens "
                f"(finish_reason={record.finish_reason})"
            )
        want_prompt = (prompt_tokens if prompt_tokens_each is None
                       else prompt_tokens_each[i]) + bos_tokens
        if record.prompt_tokens is not None and record.prompt_tokens != want_prompt:
            violations.append(
                f"request {i} sent {record.prompt_tokens} prompt tokens, expected "
                f"{want_prompt}{bos_note}"
            )
        cached = outcomes[i].cached_tokens
        if cached and no_cache:
            violations.append(f"request {i} reused {cached} cached prompt tokens, expected 0")
    low, high = FIDELITY_RANGE
    if server_generated <= 0:
        violations.append(
            f"the server's {name} did not move (delta {server_generated:g}) while we counted "
            f"{ours} completion tokens"
        )
    elif not low <= fidelity <= high:
        violations.append(
            f"fidelity {fidelity:.4f} outside {low}-{high}: we counted {ours} completion tokens, "
            f"the server's {name} moved by {server_generated:g}"
        )
    if no_cache and cached_delta is not None and cached_delta > 0:
        violations.append(
            f"the server's prefix cache reused {cached_delta:g} prompt tokens in the window, "
            "expected 0 (unique prompts, no template)"
        )

    ttfts = [r.ttft for r in ok if r.ttft is not None]
    tpots = [t for t in (tpot(r) for r in ok) if t is not None]
    gaps = [g for r in ok for g in itls(r)]
    shared = sum(
        max(0, (r.completion_tokens or 0) - len(r.token_times)) for r in ok
    )
    return ThroughputResult(
        concurrency=concurrency,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        server_kind=server_kind,
        duration_s=duration,
        completed=len(ok),
        output_tokens_per_s=ours / duration if duration > 0 else 0.0,
        requests_per_s=len(ok) / duration if duration > 0 else 0.0,
        ttft=LatencyStats.of(ttfts),
        tpot=LatencyStats.of(tpots),
        itl=LatencyStats.of(gaps),
        e2e=LatencyStats.of([r.latency for r in ok]),
        total_prompt_tokens=sum(r.prompt_tokens or 0 for r in records),
        total_completion_tokens=ours,
        server_generated_tokens=server_generated,
        generated_counter=name,
        fidelity=fidelity,
        server_cached_tokens=cached_delta if cached_delta is not None else float("nan"),
        reported_cached_tokens=reported_cached,
        server_prompt_tokens=prompt_delta if prompt_delta is not None else float("nan"),
        bos_tokens=bos_tokens,
        tokens_in_shared_chunks=shared,
        records=records,
        violations=violations,
        server=server,
    )


def _delta(
    kind: str, which: CounterKind, before: dict[str, float], after: dict[str, float]
) -> float | None:
    try:
        return find_counter(kind, which, after)[1] - find_counter(kind, which, before)[1]
    except EndpointError:
        return None


def settled_metrics(
    base_url: str, server_kind: str, *, settle_s: float = 0.1, max_wait_s: float = 3.0,
    credentials: Credentials | None = None,
) -> dict[str, float]:
    """The server's counters once its generated-tokens counter stops moving.

    Servers may book a finished request's tokens a moment after its last
    chunk; two equal reads ``settle_s`` apart (or ``max_wait_s``) end the wait.
    """
    metrics = fetch_metrics(base_url, credentials=credentials)
    deadline = time.monotonic() + max_wait_s
    while time.monotonic() < deadline:
        time.sleep(settle_s)
        again = fetch_metrics(base_url, credentials=credentials)
        if find_counter(server_kind, "generated", again) == find_counter(
            server_kind, "generated", metrics
        ):
            return again
        metrics = again
    return metrics


class SampledWindow:
    """What :func:`sampled_window` saw: the server's metrics (None until the window ends, or
    when not sampled)."""

    window: ServerMetricsWindow | None = None


@contextlib.contextmanager
def sampled_window(
    endpoint: Endpoint, in_flight: InFlight, meter: AbstractContextManager[Any] | None = None,
    *, sample: bool = True, interval_s: float = DEFAULT_INTERVAL_S,
) -> Iterator[SampledWindow]:
    """Around a window's timed requests: ``meter`` (e.g. the contention meter) and the
    server's ``/metrics`` sampled every ``interval_s`` (:class:`~..serving.server_metrics.
    MetricsSampler`), each sample with the client's ``in_flight`` count. A server without
    ``/metrics`` (an attached one of another make) leaves the window ``unavailable`` with
    its line, not failed; ``sample`` False samples nothing."""
    sampled = SampledWindow()
    sampler = (MetricsSampler(endpoint.base_url, endpoint.server_kind, interval_s=interval_s,
                              credentials=endpoint.credentials, in_flight=lambda: in_flight.now)
               if sample else None)
    with meter if meter is not None else contextlib.nullcontext():
        with sampler if sampler is not None else contextlib.nullcontext():
            yield sampled
    sampled.window = sampler.window if sampler is not None else None


# First tokens already sent to each server (by base URL) in this process, so that
# no later run on the same server shares a prompt prefix with an earlier one.
_FIRST_TOKENS_SENT: dict[str, set[int]] = {}


def first_tokens_sent(base_url: str) -> set[int]:
    """The first token ids this process has sent to the server at ``base_url`` (mutable).

    :func:`run_throughput` draws new prompts around them and adds its own; other
    traffic that should not share a prefix with later runs can add its ids here.
    """
    return _FIRST_TOKENS_SENT.setdefault(base_url.rstrip("/"), set())


@dataclass(frozen=True)
class WindowPrompts:
    """The prompts of one window: warm-up and timed texts, and what the checks need.

    ``length``: every timed prompt's token count (the mean for user prompts, whose
    own counts are in ``each``); ``bos``: the special tokens the server adds;
    ``no_cache``: whether a prefix-cache hit breaks the window's rules.
    """

    warmup: list[str]
    timed: list[str]
    length: int
    each: list[int] | None
    bos: int
    no_cache: bool


def draw_window_prompts(
    endpoint: Endpoint,
    *,
    warmup: int,
    timed: int,
    prompt_tokens: int | None,
    seed: int,
    tokenizer: ServerTokenizer | None = None,
    user_prompts: Sequence[str] | None = None,
    unique_prefixes: bool = True,
) -> WindowPrompts:
    """Draw a window's prompts (see :func:`run_throughput`): none shares a first token with
    another, nor with any earlier run on this server from this process."""
    length = prompt_tokens if prompt_tokens is not None else SHORT_PROMPT_TOKENS
    tok = tokenizer if tokenizer is not None else make_tokenizer(endpoint)
    try:
        sent = first_tokens_sent(endpoint.base_url)
        if user_prompts is None:
            prompts = exact_length_prompt_ids(
                tok, warmup + timed, length, seed=seed, exclude_first_tokens=sent
            )
        else:
            prompts = user_prompt_ids(tok, user_prompts, warmup + timed, seed=seed,
                                      unique_prefixes=unique_prefixes, exclude_first_tokens=sent)
        sent.update(ids[0] for _, ids in prompts if ids)
        bos = tok.added_special_tokens
    finally:
        if tokenizer is None:
            tok.close()
    texts = [text for text, _ in prompts]
    each = [len(ids) for _, ids in prompts[warmup:]] if user_prompts is not None else None
    if each:
        length = round(sum(each) / len(each))
    return WindowPrompts(texts[:warmup], texts[warmup:], length, each, bos,
                         user_prompts is None or unique_prefixes)


def run_throughput(
    endpoint: Endpoint,
    *,
    concurrency: int,
    prompt_tokens: int | None,
    output_tokens: int = 256,
    timed_requests: int,
    warmup_requests: int,
    seed: int,
    timeout_s: float,
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
    tokenizer: ServerTokenizer | None = None,
    progress: Callable[[str], None] | None = None,
    meter: AbstractContextManager[Any] | None = None,
    user_prompts: Sequence[str] | None = None,
    unique_prefixes: bool = True,
    server_metrics: bool = True,
) -> ThroughputResult:
    """Warm up, read the counters, run the timed window with N in flight (the server's
    ``/metrics`` sampled: :func:`sampled_window`), read them again.

    ``user_prompts``: send these texts (in turn) instead of exact-length drawn ones;
    each request must then send exactly its own text's token count, and with
    ``unique_prefixes`` (the default) each gets a distinct lead word and no prompt
    token may come from the prefix cache (without it, cache hits are allowed).

    ``prompt_tokens`` None means the short-prompt setting
    (:data:`SHORT_PROMPT_TOKENS`). The warm-up sends at least ``concurrency``
    requests whose prompts share no first token with the timed ones (nor with
    any earlier run on this server from this process). Each request fails after
    ``idle_timeout_s`` without a byte or ``timeout_s`` in all; the endpoint's breaker
    fails the rest at once when the server stalls.

    ``meter`` (e.g. a :class:`~.contention.ContentionMeter`) is entered around the
    timed requests only: not the prompt drawing, the warm-up or the counter reads.
    """
    warmup = max(warmup_requests, concurrency)
    prompts = draw_window_prompts(
        endpoint, warmup=warmup, timed=timed_requests, prompt_tokens=prompt_tokens, seed=seed,
        tokenizer=tokenizer, user_prompts=user_prompts, unique_prefixes=unique_prefixes,
    )
    length, each, bos = prompts.length, prompts.each, prompts.bos
    label = (f"c{concurrency}-p{length}-o{output_tokens}" if user_prompts is None
             else f"c{concurrency}-user-o{output_tokens}")
    warm_reqs = warmup_requests_of(prompts.warmup, output_tokens=output_tokens, label=label)
    timed_reqs = throughput_requests(
        prompts.timed, output_tokens=output_tokens, id_prefix=f"timed-{label}"
    )

    def overdue(waiting: int, seconds: float) -> None:
        if progress is not None:
            progress(f"{endpoint.model.name} {label}: {waiting} request(s) waiting {seconds:.0f} s")

    guard = Guard(idle_timeout_s=idle_timeout_s, credentials=endpoint.credentials,
                  breaker=endpoint.breaker, on_wait=overdue)

    async def stream(reqs: list[ApiRequest], gauge: InFlight | None = None,
                     ) -> list[StreamOutcome]:
        return await stream_requests_detailed(
            endpoint.v1, endpoint.served_name, reqs, concurrency, timeout_s=timeout_s,
            guard=guard, in_flight=gauge,
        )

    warm = asyncio.run(stream(warm_reqs))
    creds = endpoint.credentials
    before = settled_metrics(endpoint.base_url, endpoint.server_kind, credentials=creds)
    gauge = InFlight()
    with sampled_window(endpoint, gauge, meter, sample=server_metrics) as sampled:
        timed = asyncio.run(stream(timed_reqs, gauge))
    after = settled_metrics(endpoint.base_url, endpoint.server_kind, credentials=creds)
    return summarize(
        timed,
        concurrency=concurrency,
        prompt_tokens=length,
        output_tokens=output_tokens,
        server_kind=endpoint.server_kind,
        counters_before=before,
        counters_after=after,
        bos_tokens=bos,
        warmup=warm,
        prompt_tokens_each=each,
        no_cache=prompts.no_cache,
        server=sampled.window,
    )


OUTPUT_TOKENS = 256
"""Tokens generated by every throughput request (the seed's setting)."""


def measure_window(
    endpoint: Endpoint,
    *,
    benchmark: str,
    concurrency: int,
    prompt_tokens: int | None,
    repeat: int | str,
    run_id: str,
    timed_requests: int | None,
    timeout_s: float,
    idle_timeout_s: float,
    tokenizer: ServerTokenizer,
    meter: AbstractContextManager[Any] | None = None,
    output_tokens: int = OUTPUT_TOKENS,
    user_prompts: Sequence[str] | None = None,
    unique_prefixes: bool = True,
) -> ThroughputResult:
    """One timed window of a throughput setting, as every bench and comparison measures it.

    ``timed_requests`` None means 2 × concurrency, at least 4; the warm-up sends
    ``concurrency`` requests; the prompts' seed comes from the run, the setting and
    ``repeat``, so that no two windows of a run share a prompt. ``user_prompts``
    and ``unique_prefixes``: see :func:`run_throughput`.
    """
    seed = zlib.crc32(f"{run_id}/{benchmark}/{concurrency}/{prompt_tokens}/{repeat}".encode())
    return run_throughput(
        endpoint, concurrency=concurrency, prompt_tokens=prompt_tokens,
        output_tokens=output_tokens, timed_requests=timed_requests or default_timed_requests(concurrency),
        warmup_requests=concurrency, seed=seed, timeout_s=timeout_s,
        idle_timeout_s=idle_timeout_s, tokenizer=tokenizer, meter=meter,
        user_prompts=user_prompts, unique_prefixes=unique_prefixes,
    )


@dataclass
class InterleavedWindows:
    """Windows of two servers measured in pairs: per model its tokens/s, in pair order."""

    values: dict[str, list[float]]
    windows: list[InterleavedWindow]
    violations: list[str]


def measure_interleaved(
    endpoints: Sequence[Endpoint],
    settings: BenchSettings,
    *,
    benchmark: str,
    concurrency: int,
    prompt_tokens: int | None,
    progress: Callable[[str], None] | None = None,
) -> InterleavedWindows:
    """Pairs of windows of two endpoints, alternating A B, B A, A B, ..., as many as the
    run's ``repeats`` policy takes (auto: of the pairs' second ÷ first ratios).

    Each pair's two windows run next to each other and the order flips every pair, so a
    drift in the machine's speed (or a warm-up effect of going second) hits both sides
    alike; :meth:`~pytest_modelsweep.core.repeats.RepeatPolicy.paired_ratio` reads the pairs.
    """
    from .contention import ContentionMeter

    first, second = endpoints
    names = [first.model.name, second.model.name]
    tokenizers = {e.model.name: make_tokenizer(e) for e in endpoints}
    measured = InterleavedWindows({name: [] for name in names}, [], [])
    repeats = settings.repeats
    try:
        for pair in range(repeats.at_most):
            for endpoint in (first, second) if pair % 2 == 0 else (second, first):
                name = endpoint.model.name
                meter = ContentionMeter.of(endpoint.server_pids(), settings)
                result = measure_window(
                    endpoint, benchmark=benchmark, concurrency=concurrency,
                    prompt_tokens=prompt_tokens, repeat=f"interleaved-{name}-{pair}",
                    run_id=settings.run_id, timed_requests=settings.timed_requests,
                    timeout_s=settings.request_timeout_s, idle_timeout_s=settings.idle_timeout_s,
                    tokenizer=tokenizers[name], meter=meter,
                )
                measured.values[name].append(result.output_tokens_per_s)
                measured.windows.append(InterleavedWindow(name, pair, result.output_tokens_per_s,
                                                          meter.result))
                measured.violations += [f"{name} pair {pair}: {v}" for v in result.violations]
            a, b = (measured.values[name] for name in names)
            ratios = [y / x if x > 0 else 0.0 for x, y in zip(a, b)]
            if progress is not None:
                progress(f"interleaved {benchmark} c{concurrency}: pair "
                         f"{repeats.progress(ratios)}, {names[1]} ÷ {names[0]} {ratios[-1]:.2f}x")
            if repeats.done(ratios) or (repeats.auto and measured.violations):
                break
    finally:
        for tokenizer in tokenizers.values():
            tokenizer.close()
    return measured
