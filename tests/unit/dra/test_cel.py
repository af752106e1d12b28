"""The DRA CEL environment: variables, Kubernetes libraries, errors (as cel-go evaluates them)."""

from __future__ import annotations

import pytest

from podium.algorithms.dynamic_resources.cel import CelError, compile_selector, device_matches

DRIVER = "gpu.example.com"
DEVICE = {
    "name": "gpu-0",
    "attributes": {
        "model": {"string": "A100-SXM"},
        "index": {"int": 3},
        "mig": {"bool": True},
        "driverVersion": {"version": "1.2.3-rc.1"},
        "numa.example.com/node": {"int": 1},
    },
    "capacity": {"memory": {"value": "40Gi"}, "numa.example.com/cores": {"value": "500m"}},
    "allowMultipleAllocations": True,
}

A = f'device.attributes["{DRIVER}"]'
C = f'device.capacity["{DRIVER}"]'

TRUE_EXPRESSIONS = [
    f'device.driver == "{DRIVER}"',
    "device.allowMultipleAllocations",
    f'{A}.model == "A100-SXM" && {A}.index == 3 && {A}.mig',
    'device.attributes["numa.example.com"].node == 1',
    f'!has({A}.missing) && !has(device.attributes["other.example.com"].x)',
    'device.attributes["other.example.com"].size() == 0',
    f'{C}.memory.compareTo(quantity("40Gi")) == 0',
    f'{C}.memory == quantity("40960Mi")',
    f'{C}.memory.isGreaterThan(quantity("39Gi")) && {C}.memory.isLessThan(quantity("41Gi"))',
    'device.capacity["numa.example.com"].cores.asApproximateFloat() == 0.5',
    'quantity("1.5").isInteger() == false && quantity("2k").asInteger() == 2000',
    'quantity("1").add(quantity("500m")) == quantity("1.5") && quantity("1").sub(1).sign() == 0',
    'isQuantity("10Mi") && !isQuantity("ten")',
    f'{A}.driverVersion.isLessThan(semver("1.2.3"))',
    f"{A}.driverVersion.major() == 1 && {A}.driverVersion.minor() == 2",
    'semver("1.10.0").compareTo(semver("1.9.0")) == 1',
    'semver("v1.2", true) == semver("1.2.0") && isSemver("v1", true) && !isSemver("v1")',
    'semver("1.0.0+build") == semver("1.0.0")',
    'semver("1.0.0-alpha").isLessThan(semver("1.0.0-alpha.1"))',
    f'cel.bind(gpu, {A}, gpu.model.startsWith("A100") && gpu.index > 2)',
    "cel.bind(x, 2, cel.bind(y, x * 3, y == 6))",
    f'{A}.model.lowerAscii() == "a100-sxm" && {A}.model.upperAscii() == "A100-SXM"',
    f'{A}.model.split("-") == ["A100", "SXM"] && {A}.model.indexOf("-") == 4',
    '"a,b".replace(",", ";") == "a;b" && "  x ".trim() == "x" && "abc".substring(1) == "bc"',
    '["a", "b"].join("-") == "a-b" && "abc".charAt(1) == "b" && "abc".reverse() == "cba"',
    '"hello".matches("^h.*o$") && "abc".find("b.") == "bc"',
    "[1, 2, 3].isSorted() && [1, 2, 3].sum() == 6 && [3, 1, 2].min() == 1 && [3, 1].max() == 3",
    "[1, 2, 2].distinct() == [1, 2] && [[1], [2, 3]].flatten() == [1, 2, 3]",
    "sets.contains([1, 2, 3], [2]) && sets.intersects([1], [1, 4])",
    "sets.equivalent([1, 2], [2, 1]) && !sets.equivalent([1], [1, 2])",
    "lists.range(3) == [0, 1, 2] && [3, 1, 2].sort() == [1, 2, 3]",
    f'{A}.exists(k, k == "mig") && [1, 2].all(x, x > 0) && [1, 2].exists_one(x, x > 1)',
]

FALSE_EXPRESSIONS = [
    'device.driver == "other.example.com"',
    f'{C}.memory.isGreaterThan(quantity("40Gi"))',
    f'{A}.driverVersion == semver("1.2.3")',
]


@pytest.mark.parametrize("expression", TRUE_EXPRESSIONS)
def test_true(expression: str) -> None:
    assert device_matches(expression, DRIVER, DEVICE) is True


@pytest.mark.parametrize("expression", FALSE_EXPRESSIONS)
def test_false(expression: str) -> None:
    assert device_matches(expression, DRIVER, DEVICE) is False


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("device.driver ==", "CEL compile error: compilation failed"),
        ("noSuchVar", "CEL compile error: compilation failed: undeclared reference to 'noSuchVar'"),
        ("[1].all(x, y)", "undeclared reference to 'y'"),
        (f"{A}.missing", "CEL runtime error: no such key: missing. consider"),
        (f'{A}["missing"]', "CEL runtime error: no such key: missing. consider"),
        (f"{A}.missing", "guarding the check with has()"),
        ("device.driver", "could not be converted to bool"),
        ('quantity("ten") == quantity("1")', "CEL runtime error"),
        ("1 / 0 == 1", "CEL runtime error"),
    ],
)
def test_errors(expression: str, message: str) -> None:
    with pytest.raises(CelError) as info:
        device_matches(expression, DRIVER, DEVICE)
    assert message in str(info.value)


def test_unparsable_version_is_a_runtime_error() -> None:
    device = {"attributes": {"v": {"version": "01.2"}}}
    with pytest.raises(CelError, match="CEL runtime error: attribute v: parse semantic version"):
        device_matches(f'device.driver == "{DRIVER}"', DRIVER, device)


def test_compiled_once_per_expression() -> None:
    assert compile_selector("device.allowMultipleAllocations") is compile_selector(
        "device.allowMultipleAllocations"
    )


def test_outcome_cached_only_for_the_same_object() -> None:
    expression = f"{A}.index == 3"
    first = {"attributes": {"index": {"int": 3}}}
    second = {"attributes": {"index": {"int": 4}}}
    assert device_matches(expression, DRIVER, first) is True
    assert device_matches(expression, DRIVER, second) is False
