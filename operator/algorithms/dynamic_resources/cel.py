"""The DRA device selector CEL environment (k8s.io/dynamic-resource-allocation/cel), on cel-python.

A selector sees one variable, ``device``, with ``driver``, ``allowMultipleAllocations``,
``attributes[domain][id]`` and ``capacity[domain][id]``. Attribute and capacity names
without a domain live under the driver's name; looking up a domain that the device does
not have gives an empty map, so ``device.attributes["other.example.com"].x`` is a "no such
key" runtime error while ``has(...)`` and ``.?`` style guards work as in Go.

Expressions compile once per expression string (``compile_selector`` caches); a compile
error or a runtime error is reported as ``CelError`` with Go's message shape, and the
allocator turns it into a fatal error of the whole attempt (kube-scheduler does the same:
the pod is not marked unschedulable, the cycle errors). ``device_matches`` remembers the
outcome per expression and device JSON object (by identity), so an unchanged watched
slice is evaluated once, not once per scheduling cycle; evaluating one selector takes
about 0.5-1 ms in cel-python. ``device.driver == "name"`` is answered without the
interpreter (after the device's attributes were checked, as Go converts them first).

What the environment offers (the apiserver's stored-expressions environment of v1.37):
the CEL standard library as cel-python implements it; ``cel.bind``; quantities
(``quantity``, ``isQuantity``, ``sign``, ``isInteger``, ``asInteger``,
``asApproximateFloat``, ``add``, ``sub``, ``isLessThan``, ``isGreaterThan``, ``compareTo``,
``==``); semantic versions (``semver``, ``isSemver`` with the optional normalize flag,
``major``, ``minor``, ``patch``, ``isLessThan``, ``isGreaterThan``, ``compareTo``, ``==``);
the strings extension (``charAt``, ``indexOf``, ``lastIndexOf``, ``lowerAscii``,
``upperAscii``, ``replace``, ``split``, ``substring``, ``trim``, ``join``, ``reverse``,
``strings.quote``); the Kubernetes lists library (``isSorted``, ``sum``, ``min``, ``max``,
``indexOf``, ``lastIndexOf``); the lists extension (``distinct``, ``flatten``,
``slice``, ``sort``, ``lists.range``); the sets extension (``sets.contains``,
``sets.equivalent``, ``sets.intersects``); ``find``/``findAll`` regular expressions.

Known differences from Go:

- No static type checking: Go rejects at compile time an expression that is not boolean
  or that is ill-typed (``device.driver + 1``); here such an expression compiles and fails
  when evaluated (still a fatal error, with a different message), or, where cel-python is
  lenient, evaluates. Syntax errors fail at compile time in both.
- No cost limit: Go aborts an evaluation whose runtime cost exceeds 1,000,000
  (``CELSelectorExpressionMaxCost``); cel-python has no cost tracking, so such an
  expression runs to completion here.
- Error messages are cel-python's, not cel-go's; only the "no such key" hint that Go
  appends is reproduced.
- Not provided: optional types (``?.``, ``.orValue()``), two-variable comprehensions,
  the IP/CIDR/URL/format libraries and ``string.format``. Using them is a runtime error.
- cel-python's ``all``/``exists`` propagate an error from any element instead of CEL's
  commutative error absorption (``[1, 'a'].exists(x, x == 1)`` errs here, is true in Go).
- Regular expressions (``matches``, ``find``, ``findAll``) use Python's ``re``, not RE2;
  they agree on the common syntax.
- Macro and ``cel.bind`` variables are treated as declared everywhere in the expression by
  the compile-time identifier check (Go scopes them), so a misplaced variable is a runtime
  error here instead of a compile error.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from podium.kube.quantity import QuantityError, parse_quantity

if TYPE_CHECKING:  # bound at runtime by _runtime(), on first use
    import celpy
    import lark
    from celpy import celtypes
    from celpy.evaluation import CELEvalError, Evaluator

__all__ = [
    "CelError",
    "CompiledSelector",
    "Quantity",
    "Semver",
    "compile_selector",
    "device_matches",
    "device_variables",
    "load_runtime",
]


class CelError(Exception):
    """A selector that does not compile or fails at runtime."""


# -- Kubernetes value types ----------------------------------------------------------------
@functools.total_ordering
@dataclass(frozen=True, slots=True, eq=False)
class Quantity:
    """apiservercel.Quantity: compared by value, as resource.Quantity.Cmp does."""

    value: Decimal

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.value == other.value

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            raise TypeError("no such overload")
        return self.value < other.value

    def __hash__(self) -> int:
        return hash(self.value)


_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)


@functools.total_ordering
@dataclass(frozen=True, slots=True, eq=False)
class Semver:
    """A semantic version (blang/semver v4): precedence ignores build metadata."""

    major: int
    minor: int
    patch: int
    pre: tuple[str, ...] = ()
    build: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> Semver:
        match = _SEMVER.match(text)
        if match is None:
            raise ValueError(f"invalid semantic version {text!r}")
        pre = tuple(match[4].split(".")) if match[4] else ()
        build = tuple(match[5].split(".")) if match[5] else ()
        return cls(int(match[1]), int(match[2]), int(match[3]), pre, build)

    def compare(self, other: Semver) -> int:
        mine, theirs = (self.major, self.minor, self.patch), (other.major, other.minor, other.patch)
        if mine != theirs:
            return -1 if mine < theirs else 1
        if self.pre == other.pre:
            return 0
        if not self.pre:
            return 1
        if not other.pre:
            return -1
        for a, b in zip(self.pre, other.pre, strict=False):
            if a == b:
                continue
            a_num, b_num = a.isdigit(), b.isdigit()
            if a_num and b_num:
                return -1 if int(a) < int(b) else 1
            if a_num != b_num:
                return -1 if a_num else 1
            return -1 if a < b else 1
        return (
            -1 if len(self.pre) < len(other.pre) else (1 if len(self.pre) > len(other.pre) else 0)
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and self.compare(other) == 0

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Semver):
            raise TypeError("no such overload")
        return self.compare(other) < 0

    def __hash__(self) -> int:
        return hash((self.major, self.minor, self.patch, self.pre))


def _normalize_semver(text: str) -> str:
    """library.SemverLib's normalize: drop a leading v, fill missing minor/patch, strip zeros."""
    text = text.removeprefix("v")
    core, sep, rest = text.partition("-")
    if not sep:
        core, sep, rest = text.partition("+")
    parts = core.split(".")
    while len(parts) < 3:
        parts.append("0")
    parts = [p.lstrip("0") or "0" if p.isdigit() else p for p in parts]
    return ".".join(parts) + (sep + rest if sep else "")


# -- functions -------------------------------------------------------------------------------
def _err(message: str) -> CELEvalError:
    return CELEvalError(message)


def _fn_quantity(text: Any) -> Any:
    if not isinstance(text, str):
        raise TypeError("no such overload")
    try:
        return Quantity(parse_quantity(str(text)))
    except QuantityError as exc:
        return _err(f"quantities must match the regular expression: {exc}")


def _fn_is_quantity(text: Any) -> celtypes.BoolType:
    if not isinstance(text, str):
        raise TypeError("no such overload")
    try:
        parse_quantity(str(text))
    except QuantityError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _fn_semver(text: Any, normalize: Any = False) -> Any:
    if not isinstance(text, str):
        raise TypeError("no such overload")
    raw = _normalize_semver(str(text)) if normalize else str(text)
    try:
        return Semver.parse(raw)
    except ValueError as exc:
        return _err(f"could not parse semver: {exc}")


def _fn_is_semver(text: Any, normalize: Any = False) -> celtypes.BoolType:
    if not isinstance(text, str):
        raise TypeError("no such overload")
    raw = _normalize_semver(str(text)) if normalize else str(text)
    return celtypes.BoolType(_SEMVER.match(raw) is not None)


def _compare(a: Any, b: Any) -> int:
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        return (a.value > b.value) - (a.value < b.value)
    if isinstance(a, Semver) and isinstance(b, Semver):
        return a.compare(b)
    raise TypeError("no such overload")


def _fn_is_less_than(a: Any, b: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_compare(a, b) < 0)


def _fn_is_greater_than(a: Any, b: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_compare(a, b) > 0)


def _fn_compare_to(a: Any, b: Any) -> celtypes.IntType:
    return celtypes.IntType(_compare(a, b))


def _as_quantity(value: Any) -> Decimal:
    if isinstance(value, Quantity):
        return value.value
    if isinstance(value, celtypes.IntType) and not isinstance(value, celtypes.BoolType):
        return Decimal(int(value))
    raise TypeError("no such overload")


def _fn_add(a: Any, b: Any) -> Any:
    if isinstance(a, Quantity):
        return Quantity(a.value + _as_quantity(b))
    raise TypeError("no such overload")


def _fn_sub(a: Any, b: Any) -> Any:
    if isinstance(a, Quantity):
        return Quantity(a.value - _as_quantity(b))
    raise TypeError("no such overload")


def _fn_sign(a: Any) -> celtypes.IntType:
    if not isinstance(a, Quantity):
        raise TypeError("no such overload")
    return celtypes.IntType((a.value > 0) - (a.value < 0))


def _fn_is_integer(a: Any) -> celtypes.BoolType:
    if not isinstance(a, Quantity):
        raise TypeError("no such overload")
    return celtypes.BoolType(a.value == a.value.to_integral_value() and abs(a.value) < 2**63)


def _fn_as_integer(a: Any) -> Any:
    if not isinstance(a, Quantity):
        raise TypeError("no such overload")
    if a.value != a.value.to_integral_value() or abs(a.value) >= 2**63:
        return _err("cannot convert value to integer")
    return celtypes.IntType(int(a.value))


def _fn_as_approximate_float(a: Any) -> celtypes.DoubleType:
    if not isinstance(a, Quantity):
        raise TypeError("no such overload")
    return celtypes.DoubleType(float(a.value))


def _version_part(index: int) -> Callable[[Any], celtypes.IntType]:
    def part(v: Any) -> celtypes.IntType:
        if not isinstance(v, Semver):
            raise TypeError("no such overload")
        return celtypes.IntType((v.major, v.minor, v.patch)[index])

    return part


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("no such overload")
    return str(value)


def _fn_char_at(s: Any, i: Any) -> Any:
    text = _string(s)
    if not 0 <= int(i) <= len(text):
        return _err(f"index out of range: {int(i)}")
    return celtypes.StringType(text[int(i) : int(i) + 1])


def _fn_index_of(s: Any, sub: Any, start: Any = None) -> Any:
    if isinstance(s, celtypes.ListType):
        for n, item in enumerate(s):
            if item == sub:
                return celtypes.IntType(n)
        return celtypes.IntType(-1)
    text, needle = _string(s), _string(sub)
    begin = 0 if start is None else int(start)
    if not 0 <= begin <= len(text):
        return _err(f"index out of range: {begin}")
    return celtypes.IntType(text.find(needle, begin))


def _fn_last_index_of(s: Any, sub: Any, end: Any = None) -> Any:
    if isinstance(s, celtypes.ListType):
        for n in range(len(s) - 1, -1, -1):
            if s[n] == sub:
                return celtypes.IntType(n)
        return celtypes.IntType(-1)
    text, needle = _string(s), _string(sub)
    if end is None:
        return celtypes.IntType(text.rfind(needle))
    stop = int(end)
    if not 0 <= stop <= len(text):
        return _err(f"index out of range: {stop}")
    return celtypes.IntType(text.rfind(needle, 0, stop + len(needle)))


def _fn_lower_ascii(s: Any) -> celtypes.StringType:
    return celtypes.StringType("".join(c.lower() if "A" <= c <= "Z" else c for c in _string(s)))


def _fn_upper_ascii(s: Any) -> celtypes.StringType:
    return celtypes.StringType("".join(c.upper() if "a" <= c <= "z" else c for c in _string(s)))


def _fn_replace(s: Any, old: Any, new: Any, n: Any = -1) -> celtypes.StringType:
    count = int(n)
    return celtypes.StringType(_string(s).replace(_string(old), _string(new), count))


def _fn_split(s: Any, sep: Any, n: Any = -1) -> celtypes.ListType:
    text, separator, limit = _string(s), _string(sep), int(n)
    if limit == 0:
        return celtypes.ListType([])
    if separator == "":
        parts = list(text)
        if limit > 0 and len(parts) > limit:
            parts = [*parts[: limit - 1], "".join(parts[limit - 1 :])]
    else:
        parts = text.split(separator, limit - 1 if limit > 0 else -1)
    return celtypes.ListType([celtypes.StringType(p) for p in parts])


def _fn_substring(s: Any, start: Any, end: Any = None) -> Any:
    text = _string(s)
    begin = int(start)
    stop = len(text) if end is None else int(end)
    if not 0 <= begin <= stop <= len(text):
        return _err(f"index out of range: {begin}")
    return celtypes.StringType(text[begin:stop])


def _fn_trim(s: Any) -> celtypes.StringType:
    return celtypes.StringType(_string(s).strip())


def _fn_join(items: Any, sep: Any = "") -> celtypes.StringType:
    if not isinstance(items, celtypes.ListType):
        raise TypeError("no such overload")
    return celtypes.StringType(_string(sep).join(_string(i) for i in items))


def _fn_reverse(s: Any) -> celtypes.StringType:
    return celtypes.StringType(_string(s)[::-1])


def _list(value: Any) -> list[Any]:
    if not isinstance(value, celtypes.ListType):
        raise TypeError("no such overload")
    return cast(list[Any], value)


def _fn_is_sorted(items: Any) -> celtypes.BoolType:
    seq = list(_list(items))
    return celtypes.BoolType(all(not (b < a) for a, b in itertools.pairwise(seq)))


def _fn_sum(items: Any) -> Any:
    seq = list(_list(items))
    if not seq:
        return celtypes.IntType(0)
    total = seq[0]
    for item in seq[1:]:
        total = total + item
    return total


def _fn_min(items: Any) -> Any:
    seq = list(_list(items))
    if not seq:
        return _err("min(list) called on empty list")
    return min(seq)


def _fn_max(items: Any) -> Any:
    seq = list(_list(items))
    if not seq:
        return _err("max(list) called on empty list")
    return max(seq)


def _fn_distinct(items: Any) -> celtypes.ListType:
    out: list[Any] = []
    for item in _list(items):
        if item not in out:
            out.append(item)
    return celtypes.ListType(out)


def _fn_flatten(items: Any, depth: Any = 1) -> celtypes.ListType:
    def flat(seq: Iterable[Any], level: int) -> list[Any]:
        out: list[Any] = []
        for item in seq:
            if isinstance(item, celtypes.ListType) and level > 0:
                out.extend(flat(item, level - 1))
            else:
                out.append(item)
        return out

    return celtypes.ListType(flat(_list(items), int(depth)))


def _fn_slice(items: Any, start: Any, end: Any) -> Any:
    seq = _list(items)
    begin, stop = int(start), int(end)
    if not 0 <= begin <= stop <= len(seq):
        return _err(f"cannot slice({begin}, {stop}), list is length {len(seq)}")
    return celtypes.ListType(seq[begin:stop])


def _fn_sort(items: Any) -> celtypes.ListType:
    return celtypes.ListType(sorted(_list(items)))


def _fn_find(s: Any, pattern: Any) -> celtypes.StringType:
    match = re.search(_string(pattern), _string(s))
    return celtypes.StringType(match.group(0) if match else "")


def _fn_find_all(s: Any, pattern: Any, limit: Any = -1) -> celtypes.ListType:
    found = [m.group(0) for m in re.finditer(_string(pattern), _string(s))]
    if int(limit) >= 0:
        found = found[: int(limit)]
    return celtypes.ListType([celtypes.StringType(f) for f in found])


def _fn_sets_contains(a: Any, b: Any) -> celtypes.BoolType:
    return celtypes.BoolType(all(item in _list(a) for item in _list(b)))


def _fn_sets_equivalent(a: Any, b: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_fn_sets_contains(a, b) and _fn_sets_contains(b, a))


def _fn_sets_intersects(a: Any, b: Any) -> celtypes.BoolType:
    return celtypes.BoolType(any(item in _list(a) for item in _list(b)))


def _fn_lists_range(n: Any) -> celtypes.ListType:
    return celtypes.ListType([celtypes.IntType(i) for i in range(int(n))])


def _fn_quote(s: Any) -> celtypes.StringType:
    text = _string(s).replace("\\", "\\\\").replace('"', '\\"')
    return celtypes.StringType(f'"{text}"')


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": _fn_quantity,
    "isQuantity": _fn_is_quantity,
    "semver": _fn_semver,
    "isSemver": _fn_is_semver,
    "isLessThan": _fn_is_less_than,
    "isGreaterThan": _fn_is_greater_than,
    "compareTo": _fn_compare_to,
    "add": _fn_add,
    "sub": _fn_sub,
    "sign": _fn_sign,
    "isInteger": _fn_is_integer,
    "asInteger": _fn_as_integer,
    "asApproximateFloat": _fn_as_approximate_float,
    "major": _version_part(0),
    "minor": _version_part(1),
    "patch": _version_part(2),
    "charAt": _fn_char_at,
    "indexOf": _fn_index_of,
    "lastIndexOf": _fn_last_index_of,
    "lowerAscii": _fn_lower_ascii,
    "upperAscii": _fn_upper_ascii,
    "replace": _fn_replace,
    "split": _fn_split,
    "substring": _fn_substring,
    "trim": _fn_trim,
    "join": _fn_join,
    "reverse": _fn_reverse,
    "isSorted": _fn_is_sorted,
    "sum": _fn_sum,
    "max": _fn_max,
    "distinct": _fn_distinct,
    "flatten": _fn_flatten,
    "slice": _fn_slice,
    "sort": _fn_sort,
    "find": _fn_find,
    "findAll": _fn_find_all,
}

# Namespaced functions (``sets.contains(a, b)``): the receiver is the namespace identifier.
_NAMESPACED: dict[tuple[str, str], Callable[..., Any]] = {
    ("sets", "contains"): _fn_sets_contains,
    ("sets", "equivalent"): _fn_sets_equivalent,
    ("sets", "intersects"): _fn_sets_intersects,
    ("lists", "range"): _fn_lists_range,
    ("strings", "quote"): _fn_quote,
}


# -- the evaluator ---------------------------------------------------------------------------
# The single-child rule chain from an expression down to a bare identifier.
_CHAIN = frozenset(
    {"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication"}
    | {"unary", "member", "primary", "ident"}
)


def _ident_name(tree: Any) -> str | None:
    """The identifier a member subtree names, when it is a bare identifier."""
    if not isinstance(tree, lark.Tree):
        return None
    idents = list(tree.find_data("ident"))
    if len(idents) != 1 or any(t.data not in _CHAIN for t in tree.iter_subtrees()):
        return None
    token = idents[0].children[0]
    return str(token.value) if isinstance(token, lark.Token) else None


class _Runtime(NamedTuple):
    env: celpy.Environment
    default_map: type[celtypes.MapType]


def load_runtime() -> None:
    """Load cel-python now. Its imports and parser tables take about 0.1 s of CPU, which
    the first cycle that reads a device would otherwise spend holding the event loop;
    DynamicResources' ``warm_up`` runs it in a worker thread when the first device or
    class arrives."""
    _runtime()


@functools.cache
def _runtime() -> _Runtime:
    """cel-python's environment, made when the first selector is compiled or device is read.

    cel-python and lark cost about 16 MiB and their parser tables some more; a cluster
    without DRA objects never needs them, so ``podium run`` does not import them at start.
    """
    global celpy, lark, celtypes, CELEvalError, Evaluator
    import celpy
    import lark
    from celpy import celtypes
    from celpy.evaluation import CELEvalError, Evaluator

    class _DraEvaluator(Evaluator):
        """cel-python's evaluator plus ``cel.bind``, namespaced functions and ``min`` on lists."""

        def sub_evaluator(self, ast: lark.Tree[Any]) -> Evaluator:
            return _DraEvaluator(ast, activation=self.activation)

        def member_dot_arg(self, tree: lark.Tree[Any]) -> Any:
            member_tree, method = tree.children[0], tree.children[1]
            name = str(cast(lark.Token, method).value)
            namespace = _ident_name(member_tree)
            if namespace == "cel" and name == "bind":
                return self._bind(tree)
            if namespace is not None and (namespace, name) in _NAMESPACED:
                args = (
                    self.visit(cast(lark.Tree[Any], tree.children[2]))
                    if len(tree.children) > 2
                    else []
                )
                for arg in args:
                    if isinstance(arg, CELEvalError):
                        return arg
                try:
                    return _NAMESPACED[(namespace, name)](*args)
                except (TypeError, ValueError) as exc:
                    return CELEvalError("no such overload", type(exc), exc.args)
            if name == "min":
                value = self.visit(cast(lark.Tree[Any], member_tree))
                if isinstance(value, CELEvalError):
                    return value
                try:
                    return _fn_min(value)
                except TypeError as exc:
                    return CELEvalError("no such overload", type(exc), exc.args)
            return super().member_dot_arg(tree)

        def _bind(self, tree: lark.Tree[Any]) -> Any:
            args = cast(lark.Tree[Any], tree.children[2]) if len(tree.children) > 2 else None
            if args is None or len(args.children) != 3:
                return CELEvalError("cel.bind() requires 3 arguments")
            var_tree, init_tree, expr_tree = args.children
            variable = _ident_name(var_tree)
            if variable is None:
                return CELEvalError("cel.bind() variable name must be a simple identifier")
            value = self.visit(cast(lark.Tree[Any], init_tree))
            if isinstance(value, CELEvalError):
                return value
            nested = self.sub_evaluator(ast=cast(lark.Tree[Any], expr_tree))
            try:
                return nested.evaluate({variable: value})
            except CELEvalError as exc:
                return exc

    class _Runner(celpy.InterpretedRunner):
        def evaluate(self, context: Any) -> celtypes.Value:
            return _DraEvaluator(ast=self.ast, activation=self.new_activation()).evaluate(context)

    class _DefaultMap(celtypes.MapType):
        """``device.attributes`` / ``device.capacity``: an unknown domain is an empty map."""

        def __getitem__(self, key: Any) -> Any:
            try:
                return super().__getitem__(key)
            except KeyError:
                return celtypes.MapType({})

    return _Runtime(celpy.Environment(runner_class=_Runner), _DefaultMap)


# -- compiled selectors ----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class CompiledSelector:
    """One compiled expression; ``error`` is set when it did not compile.

    ``driver_equals`` is set for the common class selector ``device.driver == "name"``,
    which is then answered without running the interpreter.
    """

    expression: str
    program: celpy.Runner | None
    error: str = ""
    driver_equals: str | None = None

    def matches(self, variables: Mapping[str, Any]) -> bool:
        """Evaluate against ``device_variables``; CelError on a runtime error or non-bool."""
        if self.program is None:
            raise CelError(self.error)
        try:
            result = self.program.evaluate(dict(variables))
        except CELEvalError as exc:
            raise CelError(_runtime_message(exc)) from None
        except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as exc:
            raise CelError(f"evaluation error: {exc}") from None
        if isinstance(result, CELEvalError):
            raise CelError(_runtime_message(result))
        if not isinstance(result, celtypes.BoolType):
            raise CelError(
                f"CEL result of type {type(result).__name__} could not be converted to bool"
            )
        return bool(result)


def _runtime_message(exc: CELEvalError) -> str:
    """cel-go's text for a missing key (``no such key: <key>`` and DRA's hint), else celpy's."""
    text = str(exc.args[0]) if exc.args else str(exc)
    key = None
    if member := _MISSING_MEMBER.fullmatch(text):  # ``a.b``: the name is only in the text
        key = member.group(1)
    elif text == "no such key" and len(exc.args) > 2 and exc.args[2]:  # ``a["b"]``
        key = str(exc.args[2][0])
    if key is None:
        return text
    return (
        f"no such key: {key}. consider using CEL optional chaining (.? followed by "
        "orValue()) or guarding the check with has() for optional fields"
    )


_MISSING_MEMBER = re.compile(r"no such member in mapping: '(.*)'")


_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
# Identifiers that resolve without a binding: the variable, namespaces and type names.
_DECLARED = frozenset(
    {"device", "cel", "sets", "lists", "strings"}
    | {"int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type"}
)


def _undeclared(ast: lark.Tree[Any]) -> str | None:
    """The first identifier that is neither declared nor bound by a macro or ``cel.bind``.

    Go's type checker rejects these at compile time; scoping is approximated by treating
    every macro and bind variable as visible everywhere in the expression.
    """
    bound: set[str] = set()
    for node in ast.iter_subtrees():
        if node.data != "member_dot_arg" or len(node.children) < 3:
            continue
        method = str(cast(lark.Token, node.children[1]).value)
        if method in _MACROS or (method == "bind" and _ident_name(node.children[0]) == "cel"):
            args = cast(lark.Tree[Any], node.children[2])
            variable = _ident_name(args.children[0]) if args.children else None
            if variable is not None:
                bound.add(variable)
    for node in ast.iter_subtrees():
        if node.data == "ident":
            name = str(cast(lark.Token, node.children[0]).value)
            if name not in _DECLARED and name not in bound:
                return name
    return None


@functools.lru_cache(maxsize=1024)
def compile_selector(expression: str) -> CompiledSelector:
    """Compile once per expression string (cel.Cache.GetOrCompile)."""
    env = _runtime().env
    try:
        ast = env.compile(expression)
    except Exception as exc:  # cel-python raises several parser exception types
        return CompiledSelector(expression, None, f"compilation failed: {exc}")
    undeclared = _undeclared(ast)
    if undeclared is not None:
        return CompiledSelector(
            expression, None, f"compilation failed: undeclared reference to '{undeclared}'"
        )
    functions = cast(dict[str, Any], dict(_FUNCTIONS))
    simple = _DRIVER_EQUALS.fullmatch(expression)
    return CompiledSelector(
        expression,
        env.program(ast, functions=functions),
        driver_equals=simple[1] if simple else None,
    )


_DRIVER_EQUALS = re.compile(r'\s*device\.driver\s*==\s*"([^"\\]*)"\s*')

# Outcomes per (expression, driver, device JSON object). The object itself is kept in the
# entry and compared by identity, so a cached outcome is only reused for the very same
# (unchanged) watched object; the cache is dropped whole when it grows too large.
_MAX_CACHED = 200_000
_RESULTS: dict[tuple[str, str, int], tuple[Mapping[str, Any], bool]] = {}
_VARIABLES: dict[tuple[str, int], tuple[Mapping[str, Any], dict[str, Any]]] = {}


def _cached_variables(driver: str, device: Mapping[str, Any]) -> dict[str, Any]:
    key = (driver, id(device))
    hit = _VARIABLES.get(key)
    if hit is not None and hit[0] is device:
        return hit[1]
    variables = device_variables(driver, device)
    if len(_VARIABLES) >= _MAX_CACHED:
        _VARIABLES.clear()
    _VARIABLES[key] = (device, variables)
    return variables


def device_matches(expression: str, driver: str, device: Mapping[str, Any]) -> bool:
    """DeviceMatches for one selector and one Device JSON of ``driver``'s slice.

    CelError with "CEL compile error: ..." or "CEL runtime error: ..." as Go words them.
    """
    compiled = compile_selector(expression)
    if compiled.error:
        raise CelError(f"CEL compile error: {compiled.error}")
    key = (expression, driver, id(device))
    hit = _RESULTS.get(key)
    if hit is not None and hit[0] is device:
        return hit[1]
    try:
        variables = _cached_variables(driver, device)
        if compiled.driver_equals is not None:
            result = driver == compiled.driver_equals
        else:
            result = compiled.matches(variables)
    except CelError as exc:
        raise CelError(f"CEL runtime error: {exc}") from None
    if len(_RESULTS) >= _MAX_CACHED:
        _RESULTS.clear()
    _RESULTS[key] = (device, result)
    return result


# -- device input ----------------------------------------------------------------------------
def _attribute_value(attr: Mapping[str, Any]) -> Any:
    if "int" in attr:
        return celtypes.IntType(int(attr["int"]))
    if "bool" in attr:
        return celtypes.BoolType(bool(attr["bool"]))
    if "string" in attr:
        return celtypes.StringType(str(attr["string"]))
    if "version" in attr:
        try:
            return Semver.parse(str(attr["version"]))
        except ValueError as exc:
            raise CelError(f"parse semantic version: {exc}") from None
    for key, kind in (("ints", "int"), ("bools", "bool"), ("strings", "string")):
        if key in attr:
            return celtypes.ListType([_attribute_value({kind: v}) for v in attr[key] or []])
    if "versions" in attr:
        return celtypes.ListType([_attribute_value({"version": v}) for v in attr["versions"]])
    raise CelError("unsupported attribute value")


def _split_name(name: str, driver: str) -> tuple[str, str]:
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


def device_variables(driver: str, device: Mapping[str, Any]) -> dict[str, Any]:
    """The ``device`` variable for one Device JSON; CelError for an unparsable attribute."""
    default_map = _runtime().default_map
    attributes: dict[str, dict[str, Any]] = {}
    for name, attr in (device.get("attributes") or {}).items():
        try:
            value = _attribute_value(attr or {})
        except CelError as exc:
            raise CelError(f"attribute {name}: {exc}") from None
        domain, ident = _split_name(str(name), driver)
        attributes.setdefault(domain, {})[ident] = value
    capacity: dict[str, dict[str, Any]] = {}
    for name, cap in (device.get("capacity") or {}).items():
        domain, ident = _split_name(str(name), driver)
        try:
            capacity.setdefault(domain, {})[ident] = Quantity(
                parse_quantity((cap or {}).get("value", "0"))
            )
        except QuantityError as exc:
            raise CelError(f"capacity {name}: {exc}") from None
    return {
        "device": celtypes.MapType(
            {
                celtypes.StringType("driver"): celtypes.StringType(driver),
                celtypes.StringType("allowMultipleAllocations"): celtypes.BoolType(
                    bool(device.get("allowMultipleAllocations") or False)
                ),
                celtypes.StringType("attributes"): default_map(
                    {
                        celtypes.StringType(d): celtypes.MapType(
                            {celtypes.StringType(k): v for k, v in ids.items()}
                        )
                        for d, ids in attributes.items()
                    }
                ),
                celtypes.StringType("capacity"): default_map(
                    {
                        celtypes.StringType(d): celtypes.MapType(
                            {celtypes.StringType(k): v for k, v in ids.items()}
                        )
                        for d, ids in capacity.items()
                    }
                ),
            }
        )
    }
