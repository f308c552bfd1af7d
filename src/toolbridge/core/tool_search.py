"""Tool search: which definitions a request sends, and a local search for the rest.

A large tool set costs tokens on every request and makes models pick worse. Under a
`DeferralPolicy`, a registry's tools split in two: those always sent, and deferred ones
the model finds with the ``tool_search`` tool (BM25 over names, descriptions and
parameters; a regular expression when the query is one). What a search found is then
sent at the END of the tools of the following requests, so the cached prompt prefix
stays the same. The split is computed once per registry change (keyed on its
definitions hash), so the definitions sent, and their hash, stay stable between turns.
Where the provider searches itself (Anthropic, OpenAI Responses: ``native``), every
definition is sent, the deferred ones marked, and the adapter adds the provider's
search tool.
"""

from __future__ import annotations

import asyncio
import bisect
import hashlib
import heapq
import importlib
import json
import math
import re
from collections import Counter
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from toolbridge.core.errors import ToolDefinitionError
from toolbridge.core.frozen import thaw
from toolbridge.core.registry import ToolRegistry
from toolbridge.core.results import estimate_tokens
from toolbridge.core.tool import Tool, ToolResult, tool_parameters

__all__ = [
    "FOUND_TOOLS_KEY",
    "SEARCH_TOOL_NAME",
    "DeferralPolicy",
    "ToolDeferral",
    "ToolIndex",
    "ToolSearchTool",
    "ToolSelection",
    "found_tools",
    "native_search_supported",
]

SearchMode = Literal["auto", "native", "local"]
NativeSearch = Literal["bm25", "regex"]
SEARCH_TOOL_NAME = "tool_search"
FOUND_TOOLS_KEY = "toolbridge.core.tool_search"
"""Result metadata of a ``tool_search`` call: the names it found (what the loop activates)."""

MAX_LIMIT = 50
_REGEX_CHARS = frozenset(".*+?[](){}|\\^$")
# re's own parser (private, so not typed): a pattern is checked for backtracking before it
# runs, because `re` holds the GIL while it matches: the tool's timeout could never fire.
_RE_PARSER: Any = importlib.import_module("re._parser")
_REPEATS = frozenset({"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"})
# A match attempt tries every split of the text among the pattern's variable repeats: the
# product of their spans. One long repeat costs a tool's text length squared at worst ('.*!'
# over 10,000 tools: about 0.2 s); each more multiplies that ('.*e.*!': 2 s; '\\w*\\w*\\w*!'
# over 200 tools: 21 s), and so does a short one ('\\w{0,60}' five times then '[!?]': 115 s
# over 50 tools).
_LONG_REPEAT = 256  # a repeat's span counts as at most this (a tool's text is about as long)
_MAX_SPLITS = 1 << 14  # one long repeat and a short one ('.*\\d{1,60}'), or three of 20


@dataclass(frozen=True, slots=True)
class DeferralPolicy:
    """When definitions are deferred: once the tools that could be sent pass `max_tools`
    tools or `max_tokens` estimated tokens (4 characters a token), every tool whose
    `defer_loading` is None and whose name is not in `always_loaded` waits to be found.
    A tool with ``defer_loading=True`` is always deferred, one with False always sent.

    `mode` says who searches: ``"native"`` the provider (Anthropic's tool-search server
    tool, OpenAI Responses' ``tool_search``: every definition is sent, the deferred ones
    with ``defer_loading: true``), ``"local"`` toolbridge's own ``tool_search`` tool,
    ``"auto"`` (the default) native where the model has it and local elsewhere.
    `native_search` picks Anthropic's variant: ``"bm25"`` (natural-language queries) or
    ``"regex"``.
    """

    max_tools: int = 30
    max_tokens: int = 10_000
    always_loaded: frozenset[str] = field(default_factory=frozenset)
    mode: SearchMode = "auto"
    native_search: NativeSearch = "bm25"

    def __post_init__(self) -> None:
        for name in ("max_tools", "max_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"DeferralPolicy.{name} must be an integer >= 0, got {value!r}")
        names = self.always_loaded
        if isinstance(names, str) or not all(isinstance(n, str) for n in names):
            raise ValueError(
                f"DeferralPolicy.always_loaded must be a collection of tool names, got {names!r}"
            )
        object.__setattr__(self, "always_loaded", frozenset(names))
        if self.mode not in ("auto", "native", "local"):
            raise ValueError(
                f"DeferralPolicy.mode must be 'auto', 'native' or 'local', got {self.mode!r}"
            )
        if self.native_search not in ("bm25", "regex"):
            raise ValueError(
                "DeferralPolicy.native_search must be 'bm25' or 'regex', got "
                f"{self.native_search!r}"
            )


@dataclass(frozen=True, slots=True)
class ToolSelection:
    """The tools one request sends, in order, and the hash that keys their rendering
    (it changes exactly when the list does). Iterates like a registry.

    Under the provider's own search, `deferred` names the tools to send with
    ``defer_loading: true`` next to its search tool (`native_search` says which
    variant, where the provider has two); with the local search it is empty."""

    tools: tuple[Tool, ...]
    definitions_hash: str
    deferred: frozenset[str] = frozenset()
    native_search: NativeSearch = "bm25"

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools)

    def __len__(self) -> int:
        return len(self.tools)

    @property
    def names(self) -> list[str]:
        return [tool.name for tool in self.tools]


def _stem(word: str) -> str:
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_WORD = re.compile(r"[a-z0-9]+")
_RAW_WORD = re.compile(r"[^\W_]+")  # letters and digits: '_' splits words, as in names


def _words(text: str) -> list[str]:
    """Lower-case words of `text`; snake_case, kebab-case and camelCase split apart."""
    return _WORD.findall(_CAMEL.sub(r"\1 \2", text).lower())


def _tokens(text: str) -> list[str]:
    """The words of `text` as the index keeps them (a plural's 's' dropped)."""
    return [_stem(word) for word in _words(text)]


def _parameter_text(parameters: Mapping[str, Any]) -> str:
    properties = parameters.get("properties")
    if not isinstance(properties, Mapping):
        return ""
    parts = []
    for name, schema in properties.items():
        parts.append(str(name))
        if isinstance(schema, Mapping) and isinstance(schema.get("description"), str):
            parts.append(schema["description"])
    return " ".join(parts)


class ToolIndex:
    """A search index over tools: BM25 (k1 1.2, b 0.75; a name's words count three
    times) and, for a query that is a regular expression, a case-insensitive
    ``re.search`` over names first, then the whole text.

    Built once; every term's weight per tool is computed at build time, so a search
    only adds the weights of the query's terms. A common term (in more than
    `common` tools: ``the``, ``get``, ``list`` in a big catalog) only adds its weight to
    tools a rarer term found; when every term is common, the candidates are the
    `common` tools where the rarest of them weighs most. That keeps a search over
    10,000 tools to a few hundred additions whatever the query.
    """

    _K1 = 1.2
    _B = 0.75

    def __init__(self, tools: Sequence[Tool]) -> None:
        self.names = [tool.name for tool in tools]
        texts: list[str] = []
        counts: list[dict[str, int]] = []
        stems: dict[str, str] = {}  # each distinct word stemmed once
        for tool in tools:
            params = _parameter_text(tool.parameters)
            text = " ".join((tool.name, tool.description, params))
            texts.append(text.replace("\n", " ").replace("\r", " ").lower())
            raw = Counter(_words(f"{tool.description} {params}"))
            for word in _words(tool.name):
                raw[word] += 3
            count: dict[str, int] = {}
            for word, tf in raw.items():
                stem = stems.get(word)
                if stem is None:
                    stem = stems[word] = _stem(word)
                count[stem] = count.get(stem, 0) + tf
            counts.append(count)
        # One text per tool, one tool per line, lower-cased: a regex scans them all in one
        # C loop, and a lower-case pattern needs no IGNORECASE (about 10x faster).
        lowered = [name.lower() for name in self.names]
        self._names_text = "\n".join(lowered)
        self._name_starts = _starts(lowered)
        self._text = "\n".join(texts)
        self._text_starts = _starts(texts)
        # Every run of letters and digits of the lower-cased texts, and the tools it is in:
        # a regex's literal narrows the tools to try (`_candidates`) without a text scan.
        containing: dict[str, list[int]] = {}
        for doc, text in enumerate(texts):
            for word in set(_RAW_WORD.findall(text)):
                containing.setdefault(word, []).append(doc)
        self._vocabulary = list(containing)
        self._vocabulary_text = "\n".join(self._vocabulary)
        self._vocabulary_starts = _starts(self._vocabulary)
        self._containing = list(containing.values())
        total = len(tools)
        average = sum(sum(c.values()) for c in counts) / total if total else 1.0
        frequency: Counter[str] = Counter()
        for count in counts:
            frequency.update(count.keys())
        self.common = max(64, total // 50)
        idf = {t: math.log(1 + (total - df + 0.5) / (df + 0.5)) for t, df in frequency.items()}
        self._postings: dict[str, dict[int, float]] = {term: {} for term in frequency}
        postings_of, k1, b, plus = self._postings, self._K1, self._B, self._K1 + 1
        for doc, count in enumerate(counts):
            norm = k1 * (1 - b + b * sum(count.values()) / (average or 1.0))
            for term, tf in count.items():
                postings_of[term][doc] = idf[term] * tf * plus / (tf + norm)
        self._top: dict[str, list[int]] = {  # stable: ties keep catalog order
            term: sorted(postings, key=postings.__getitem__, reverse=True)[: self.common]
            for term, postings in self._postings.items()
            if len(postings) > self.common
        }

    def __len__(self) -> int:
        return len(self.names)

    @staticmethod
    def regex_of(query: str) -> re.Pattern[str] | None:
        """The query as a case-insensitive regular expression over the lower-cased tool
        texts, when it has regex syntax and compiles; ``^`` and ``$`` anchor at each tool.

        Lower-cased itself unless an escape could change meaning with case (``\\S``).
        A pattern that could backtrack for minutes (`_backtracks`) is read as words."""
        if not _REGEX_CHARS.intersection(query) or _backtracks(query):
            return None
        lowered = query.lower()
        try:
            if "\\" not in query or lowered == query:
                return re.compile(lowered, re.MULTILINE)
            return re.compile(query, re.IGNORECASE | re.MULTILINE)
        except (re.error, OverflowError, RecursionError):  # 'a{99999999999}', '((((...'
            return None

    def search(self, query: str, limit: int = 8) -> list[str]:
        """Names of the best `limit` tools for `query`, best first.

        A regular expression that matches nothing (prose with a '?', say) is searched
        again as words.
        """
        if limit < 1:
            return []
        pattern = self.regex_of(query)
        if pattern is not None:
            found = self.search_regex(pattern, limit)
            if found:
                return found
        return self.search_words(query, limit)

    def _candidates(self, literal: str) -> list[int] | None:
        """The tools whose text has a word containing the longest run of letters and
        digits of `literal`, in catalog order (None: `literal` has no such run)."""
        runs = _RAW_WORD.findall(literal)
        if not runs:
            return None
        run = max(runs, key=len)
        text, starts = self._vocabulary_text, self._vocabulary_starts
        docs: set[int] = set()
        position = 0
        while True:
            hit = text.find(run, position)
            if hit < 0:
                break
            word = bisect.bisect_right(starts, hit) - 1
            docs.update(self._containing[word])
            position = starts[word + 1] if word + 1 < len(starts) else len(text)
        return sorted(docs)

    def search_words(self, query: str, limit: int = 8) -> list[str]:
        """BM25: the tools with the highest summed weight of the query's words."""
        terms = [t for t in dict.fromkeys(_tokens(query)) if t in self._postings]
        terms.sort(key=lambda t: len(self._postings[t]))  # rarest first
        scores: dict[int, float] = {}
        for term in terms:
            postings = self._postings[term]
            if len(postings) <= self.common:  # a rare term: every tool it is in
                get = scores.get
                for doc, weight in postings.items():
                    scores[doc] = get(doc, 0.0) + weight
                continue
            if not scores:  # only common terms: the rarest one's best tools are candidates
                scores = dict.fromkeys(self._top[term], 0.0)
            get_weight = postings.get
            for doc in scores:
                scores[doc] += get_weight(doc, 0.0)
        best = heapq.nlargest(limit, scores, key=scores.__getitem__)
        return [self.names[doc] for doc in best]

    def search_regex(self, pattern: re.Pattern[str], limit: int = 8) -> list[str]:
        """Tools whose name matches, then those whose text matches, in catalog order.

        A pattern with a literal every match contains (``github_`` in ``^github_.*issue``)
        is tried only on the tools that have a word containing its letters (``github``),
        found in the index's vocabulary: a rare pattern costs a few match attempts, not
        a scan of every tool's text."""
        found: dict[int, None] = {}
        literal = _required_literal(pattern)
        if literal:
            candidates = self._candidates(literal)
            for text, starts in (
                (self._names_text, self._name_starts),
                (self._text, self._text_starts),
            ):
                if candidates is None:
                    _scan_literal(pattern, literal, text, starts, found=found, limit=limit)
                else:
                    _try(pattern, candidates, text, starts, found=found, limit=limit)
            return [self.names[doc] for doc in found]
        # `re` tries a leading '^' at every position of a search: a match at each tool's
        # start is far faster (without a '|', the '^' anchors the whole pattern).
        anchored = pattern.pattern.startswith("^") and "|" not in pattern.pattern
        for text, starts in (
            (self._names_text, self._name_starts),
            (self._text, self._text_starts),
        ):
            if anchored:
                match_at = pattern.match
                for doc, start in enumerate(starts):
                    if match_at(text, start) is not None:
                        found.setdefault(doc)
                        if len(found) >= limit:
                            break
                continue
            position = 0
            while len(found) < limit:
                match = pattern.search(text, position)
                if match is None:
                    break
                doc = bisect.bisect_right(starts, match.start()) - 1
                last = doc + 1 >= len(starts)
                end = len(text) if last else starts[doc + 1] - 1
                # a match that runs into the next tool ('\s' takes the line break) counts
                # only if the pattern also matches within this tool's line
                if match.end() <= end or pattern.search(text, match.start(), end) is not None:
                    found.setdefault(doc)
                if last:
                    break
                position = starts[doc + 1]
        return [self.names[doc] for doc in found]


def _required_literal(pattern: re.Pattern[str]) -> str:
    """The longest run of plain characters at the top level of `pattern` (so in every
    match of it), or "" when it has none or matches regardless of case."""
    if pattern.flags & re.IGNORECASE:
        return ""
    try:
        tree = _RE_PARSER.parse(pattern.pattern)
    except (re.error, OverflowError, RecursionError):
        return ""
    best, run = "", []
    for op, value in tree:
        if str(op) == "LITERAL":
            run.append(chr(value))
            continue
        best = max(best, "".join(run), key=len)
        run = []
    return max(best, "".join(run), key=len)


def _try(
    pattern: re.Pattern[str],
    candidates: Sequence[int],
    text: str,
    starts: Sequence[int],
    *,
    found: dict[int, None],
    limit: int,
) -> None:
    """Add to `found` (in order, up to `limit`) the `candidates` whose line of `text`
    matches `pattern`."""
    last = len(starts) - 1
    for doc in candidates:
        if len(found) >= limit:
            return
        if doc in found:
            continue
        end = starts[doc + 1] - 1 if doc < last else len(text)
        if pattern.search(text, starts[doc], end) is not None:
            found.setdefault(doc)


def _scan_literal(
    pattern: re.Pattern[str],
    literal: str,
    text: str,
    starts: Sequence[int],
    *,
    found: dict[int, None],
    limit: int,
) -> None:
    """Add to `found` (in order, up to `limit`) the tools whose line of `text` holds
    `literal` and matches `pattern` within the line."""
    position, last = 0, len(starts) - 1
    while len(found) < limit:
        hit = text.find(literal, position)
        if hit < 0:
            return
        doc = bisect.bisect_right(starts, hit) - 1
        end = starts[doc + 1] - 1 if doc < last else len(text)
        if doc not in found and pattern.search(text, starts[doc], end) is not None:
            found.setdefault(doc)
        position = end + 1


def _backtracks(pattern: str) -> bool:
    """Whether `pattern` may backtrack for exponential (or high polynomial) time: a repeat
    inside a repeat (``(\\w+\\s?)*``), an alternation inside a repeat (``(a|aa)+``), or
    variable repeats whose spans multiply past `_MAX_SPLITS` (``.*a.*b``, or many short
    ones: ``\\w{0,60}\\w{0,60}\\w{0,60}[!?]``)."""
    try:
        tree = _RE_PARSER.parse(pattern)
    except re.error:  # the caller's re.compile says what is wrong
        return False
    except (OverflowError, RecursionError):  # too deep or too large to check: words
        return True
    splits = 1

    def walk(items: Any, in_repeat: bool) -> bool:
        nonlocal splits
        for op, value in items:
            name = str(op)
            inner: Any = ()  # the sub-patterns of this item, searched the same way
            if name in _REPEATS:
                least, most, inner = value
                if most > 1:
                    if in_repeat:
                        return True
                    splits *= min(most - least, _LONG_REPEAT) + 1
                    if splits > _MAX_SPLITS or walk(inner, True):
                        return True
                    continue
            elif name == "BRANCH":
                if in_repeat:
                    return True
                if any(walk(branch, False) for branch in value[1]):
                    return True
                continue
            elif name == "SUBPATTERN":
                inner = value[-1]
            elif name == "ATOMIC_GROUP":
                inner = value
            elif name in {"ASSERT", "ASSERT_NOT"}:
                inner = value[1]
            if inner and walk(inner, in_repeat):
                return True
        return False

    try:
        return walk(tree, False)
    except RecursionError:
        return True


def _starts(texts: Sequence[str]) -> list[int]:
    starts, offset = [], 0
    for text in texts:
        starts.append(offset)
        offset += len(text) + 1
    return starts


@dataclass(frozen=True, slots=True)
class _Plan:
    key: str
    loaded: tuple[Tool, ...]
    deferred: dict[str, Tool]
    hash: str
    tokens: int
    native: ToolSelection | None = None  # what every request sends under native search


class ToolDeferral:
    """A registry under a `DeferralPolicy`: `registry` is it plus the ``tool_search``
    tool; `select` gives what a request sends; `search` finds deferred tools.

    `keep` names tools that are always sent whatever the policy (the run's
    ``final_result`` tool, say). With `native` the provider searches: `registry` is
    the registry itself, and `select` sends every tool, the deferred ones marked.
    Everything is recomputed only when the registry's definitions hash changes.
    """

    def __init__(
        self,
        registry: ToolRegistry,
        policy: DeferralPolicy | None = None,
        *,
        keep: Collection[str] = (),
        native: bool = False,
    ) -> None:
        self.native = native
        self.policy = policy or DeferralPolicy()
        self._keep = frozenset(keep) | self.policy.always_loaded | {SEARCH_TOOL_NAME}
        self._plan: _Plan | None = None
        self._index: tuple[str, ToolIndex] | None = None
        if native:
            self.registry = registry
            return
        if SEARCH_TOOL_NAME in registry:
            raise ToolDefinitionError(
                f"a tool named {SEARCH_TOOL_NAME!r} is already registered, and tool search "
                "adds its own: rename that tool or turn tool search off"
            )
        self.registry = ToolRegistry([*registry, ToolSearchTool(self)], context=registry.context)

    def plan(self) -> _Plan:
        key = self.registry.definitions_hash
        if self._plan is None or self._plan.key != key:
            self._plan = self._build_plan(key)
        return self._plan

    def _build_plan(self, key: str) -> _Plan:
        tools = [tool for tool in self.registry if tool.name != SEARCH_TOOL_NAME]
        candidates = [tool for tool in tools if tool.defer_loading is not True]
        tokens = sum(estimate_tokens(json.dumps(thaw(t.to_schema()))) for t in candidates)
        over = len(candidates) > self.policy.max_tools or tokens > self.policy.max_tokens
        deferred = {
            tool.name: tool
            for tool in tools
            if tool.defer_loading is True
            or (over and tool.defer_loading is None and tool.name not in self._keep)
        }
        if self.native:  # every definition goes out; the provider hides the deferred ones
            names = ",".join(sorted(deferred))
            digest = hashlib.sha256(
                f"{key}\nnative:{self.policy.native_search}\n{names}".encode()
            ).hexdigest()
            every = tuple(self.registry)
            selection = ToolSelection(every, digest, frozenset(deferred), self.policy.native_search)
            return _Plan(key, every, deferred, digest, tokens, selection)
        loaded = [tool for tool in self.registry if tool.name not in deferred]
        if not deferred:  # nothing to find: the search tool would only cost tokens
            loaded = [tool for tool in loaded if tool.name != SEARCH_TOOL_NAME]
        names = ",".join(tool.name for tool in loaded)
        digest = hashlib.sha256(f"{key}\n{names}".encode()).hexdigest()
        return _Plan(key, tuple(loaded), deferred, digest, tokens)

    @property
    def deferred(self) -> frozenset[str]:
        """Names of the tools that wait to be found."""
        return frozenset(self.plan().deferred)

    def select(self, active: Sequence[str] = ()) -> ToolSelection:
        """What a request sends: the loaded tools, then the `active` deferred ones (those
        found so far, in the order found; other names are ignored)."""
        plan = self.plan()
        if plan.native is not None:
            return plan.native
        extra = [name for name in dict.fromkeys(active) if name in plan.deferred]
        if not extra:
            return ToolSelection(plan.loaded, plan.hash)
        digest = hashlib.sha256(f"{plan.hash}\n{','.join(extra)}".encode()).hexdigest()
        return ToolSelection(plan.loaded + tuple(plan.deferred[n] for n in extra), digest)

    def index(self) -> ToolIndex:
        """The search index over the deferred tools, built once per registry change."""
        plan = self.plan()
        if self._index is None or self._index[0] != plan.key:
            self._index = (plan.key, ToolIndex(list(plan.deferred.values())))
        return self._index[1]

    def search(self, query: str, limit: int = 8) -> list[Tool]:
        """The deferred tools that best match `query`, best first."""
        deferred = self.plan().deferred
        return [deferred[name] for name in self.index().search(query, limit)]


SEARCH_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "minLength": 1,
            "description": "Words describing the tool you need, or a regular expression "
            "(Python syntax, case-insensitive) matched against tool names, descriptions "
            "and parameters.",
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_LIMIT,
            "default": 8,
            "description": "How many tools to return at most.",
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}
"""The parameters of a search for tools: the local `tool_search` tool's, and those of
``search_tools`` that ``toolbridge mcp serve --tool-search`` offers."""


@tool_parameters(SEARCH_PARAMETERS)
class ToolSearchTool(Tool):
    """Finds deferred tools; their definitions come back and they become callable."""

    name = SEARCH_TOOL_NAME
    description = (
        "Search for more tools. Only some tools are loaded; many more are available. "
        "Describe what you need (or give a regular expression); the matching tools' "
        "definitions are returned and those tools can be called from then on."
    )
    read_only = True
    defer_loading = False
    timeout = 30.0  # the first search builds the index; a regex that could backtrack is words

    def __init__(self, deferral: ToolDeferral) -> None:
        self._deferral = deferral

    async def execute(self, **kwargs: Any) -> ToolResult:
        query: str = kwargs["query"]
        limit: int = kwargs.get("limit", 8)
        # Off the event loop: the first search after a change builds the index (seconds
        # for 10,000 tools), and a model-written pattern may backtrack for long.
        found = await asyncio.to_thread(self._deferral.search, query, limit)
        names = [tool.name for tool in found]
        if not found:
            text = (
                f"No tool matches {query!r}. Try other or fewer words, or a regular "
                "expression such as 'issue|ticket'."
            )
            return ToolResult(text, metadata={FOUND_TOOLS_KEY: names})
        definitions = [
            {"name": t.name, "description": t.description, "parameters": thaw(t.parameters)}
            for t in found
        ]
        text = json.dumps(
            {
                "tools": definitions,
                "note": "These tools are loaded now: call them by name.",
            },
            ensure_ascii=False,
        )
        return ToolResult(text, metadata={FOUND_TOOLS_KEY: names})


def native_search_supported(model: object) -> bool:
    """Whether `model` (a model adapter) has its provider's own tool search: its optional
    ``supports_tool_search()`` method says so."""
    check = getattr(model, "supports_tool_search", None)
    return callable(check) and bool(check())


def found_tools(result: ToolResult) -> list[str]:
    """The names a ``tool_search`` result found (none for an error or other result)."""
    if result.is_error:
        return []
    names = result.metadata.get(FOUND_TOOLS_KEY)
    if not isinstance(names, list):
        return []
    return [name for name in names if isinstance(name, str)]
