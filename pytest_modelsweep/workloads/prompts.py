"""The prompts of a throughput window: exactly the asked number of tokens as the server's
``/tokenize`` counts them (:class:`ServerTokenizer`), and pairwise different first tokens, so
that the prefix cache has nothing to reuse: a lead word (of :data:`WORDS`, in a seeded order)
then seeded words fitted to the length, or a lead word then a user's text. No prompt shares a
first token with an earlier window on the same server (:func:`first_tokens_sent`).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Iterator, Sequence, Set
from dataclasses import dataclass
from typing import Any

import httpx

from ..client.tls import DeadlineClient
from ..core.errors import EndpointError, MeasurementError
from ..core.secrets import Credentials, auth_headers
from ..serving.endpoint import Endpoint

SHORT_PROMPT_TOKENS = 24
"""Prompt length of the short-prompt settings (no long prompt asked for)."""

Prompt = tuple[str, list[int]]
"""A prompt's text and its token ids, as the server gave them."""

# Common English words, lower case: the prompts' word pool and their lead words.
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
    """The model's own tokenizer, through the server's ``/tokenize`` without special tokens
    (llama.cpp's ``add_special``, vLLM's ``add_special_tokens``); a completion request gets
    the BOS the tokenizer adds (Gemma: one; SmolLM2: none): :attr:`added_special_tokens`."""

    def __init__(self, url: str, server_kind: str, served_name: str, *, timeout_s: float = 30.0,
                 credentials: Credentials | None = None):
        self.url = url
        self.server_kind = server_kind
        self.served_name = served_name
        self._client = DeadlineClient(timeout_s, auth_headers(credentials))
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
                raise EndpointError(f"cannot tokenize through {self.url}: "
                                    f"{type(exc).__name__}: {exc}") from None
            if response.status_code == 200:
                tokens = response.json().get("tokens")
                if isinstance(tokens, list) and all(isinstance(t, int) for t in tokens):
                    self._style = style
                    return tokens
                last = f"no integer 'tokens' list in {response.text[:120]!r}"
            else:
                last = f"HTTP {response.status_code}: {' '.join(response.text.split())[:120]}"
        raise EndpointError(f"cannot tokenize through {self.url} ({last}); exact-length prompts "
                            "need the server's /tokenize (llama.cpp and vLLM serve it)")

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


def _fit(tokenize: Callable[[str], list[int]], lead: str, words: Sequence[str], length: int,
         ) -> Prompt | None:
    """``lead`` plus a prefix of ``words`` (and filler words) of exactly ``length`` tokens."""
    @functools.cache
    def count(k: int) -> int:
        return len(tokenize(lead + "".join(" " + w for w in words[:k])))

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
    gap = length - count(lo)  # (none: the first filler's text is ``base`` itself)
    for filler in _FILLERS:
        text = base + (" " + filler) * gap
        ids = tokenize(text)
        if len(ids) == length:
            return text, ids
    return None


def _first_unused(leads: Iterator[str], used: set[int],
                  prompt: Callable[[str], Prompt | None]) -> Prompt | None:
    """The first ``prompt(lead)`` over ``leads`` whose first token is not in ``used`` (then
    added to it); None when the leads run out."""
    for lead in leads:
        made = prompt(lead)
        if made is not None and made[1] and made[1][0] not in used:
            used.add(made[1][0])
            return made
    return None


def exact_length_prompt_ids(
    tokenize: Callable[[str], list[int]], count: int, length: int, *, seed: int,
    exclude_first_tokens: Set[int] = frozenset(),
) -> list[Prompt]:
    """``count`` prompts of exactly ``length`` tokens (``tokenize`` adds no BOS) with their ids,
    whose first tokens all differ and are not in ``exclude_first_tokens``; only a final text
    whose own count is ``length`` is kept (never one rebuilt from detokenized ids)."""
    if length < 4:
        raise ValueError(f"prompt length must be at least 4 tokens, got {length}")
    rng = random.Random(seed)
    leads = _leads(rng)
    used = set(exclude_first_tokens)
    tried = 0

    def fitted(lead: str) -> Prompt | None:
        nonlocal tried
        tried += 1
        lead_ids = tokenize(lead)
        if not lead_ids or lead_ids[0] in used or len(lead_ids) > length // 2:
            return None
        made = _fit(tokenize, lead, [rng.choice(_WORD_POOL) for _ in range(length)], length)
        # the count and the first token are verified on the final text itself
        return made if made is not None and len(made[1]) == length else None

    prompts: list[Prompt] = []
    for _ in range(count):
        made = _first_unused(leads, used, fitted)
        if made is None:
            raise MeasurementError(
                f"ran out of lead words after {len(prompts)} of {count} prompts with distinct "
                f"first tokens ({len(used)} first tokens in use, {tried} leads tried); "
                "ask for fewer requests per run")
        prompts.append(made)
    return prompts


def user_prompt_ids(
    tokenize: Callable[[str], list[int]], texts: Sequence[str], count: int, *, seed: int,
    unique_prefixes: bool, exclude_first_tokens: Set[int] = frozenset(),
) -> list[Prompt]:
    """``count`` prompts from a user's ``texts`` (round and round), with their ids; with
    ``unique_prefixes`` each starts with a lead word of its own first token."""
    if not texts:
        raise MeasurementError("no prompts to send; give at least one prompt text")
    leads = _leads(random.Random(seed))
    used = set(exclude_first_tokens)
    prompts: list[Prompt] = []
    as_given = functools.cache(tokenize)  # each text tokenized once, however often it is sent
    for i in range(count):
        body = texts[i % len(texts)]
        if not unique_prefixes:
            prompts.append((body, as_given(body)))
            continue
        made = _first_unused(leads, used, lambda lead: (
            text := f"{lead.strip()}: {body}", tokenize(text)))
        if made is None:
            raise MeasurementError(
                f"ran out of lead words after {len(prompts)} of {count} prompts with "
                "distinct first tokens; ask for fewer requests per run")
        prompts.append(made)
    return prompts


_FIRST_TOKENS_SENT: dict[str, set[int]] = {}


def first_tokens_sent(base_url: str) -> set[int]:
    """The first token ids this process has sent to the server at ``base_url`` (mutable): new
    prompts are drawn around them, so that no later run shares a prefix with an earlier one."""
    return _FIRST_TOKENS_SENT.setdefault(base_url.rstrip("/"), set())


@dataclass(frozen=True)
class WindowPrompts:
    """The prompts of one window: warm-up and timed texts; ``length``, every timed prompt's
    token count (the mean for user prompts, whose own are in ``each``); ``bos``, the special
    tokens the server adds; ``no_cache``, whether a prefix-cache hit breaks the rules."""

    warmup: list[str]
    timed: list[str]
    length: int
    each: list[int] | None
    bos: int
    no_cache: bool


def draw_window_prompts(
    endpoint: Endpoint, *, warmup: int, timed: int, prompt_tokens: int | None, seed: int,
    tokenizer: ServerTokenizer | None = None, user_prompts: Sequence[str] | None = None,
    unique_prefixes: bool = True,
) -> WindowPrompts:
    """Draw a window's prompts: none shares a first token with another, nor with any earlier
    run on this server from this process."""
    length = prompt_tokens if prompt_tokens is not None else SHORT_PROMPT_TOKENS
    tok = tokenizer if tokenizer is not None else make_tokenizer(endpoint)
    try:
        sent = first_tokens_sent(endpoint.base_url)
        if user_prompts is None:
            prompts = exact_length_prompt_ids(tok, warmup + timed, length, seed=seed,
                                              exclude_first_tokens=sent)
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
