"""JSON builders for DRA objects, named after the helpers of Go's allocatortesting package."""

from __future__ import annotations

from typing import Any

Json = dict[str, Any]

REGION_KEY, PLANET_KEY = "region", "planet"
NODE_SELECTION_ALL, NODE_SELECTION_PER_DEVICE = "nodeSelectionAll", "nodeSelectionPerDevice"
FROM_COUNTERS = "fromCounters"


def node(name: str, region: str) -> Json:
    return {"metadata": {"name": name, "labels": {REGION_KEY: region, PLANET_KEY: "earth"}}}


def cel(expression: str) -> Json:
    return {"cel": {"expression": expression}}


def class_(name: str, driver: str, *, multi_alloc: bool | None = None) -> Json:
    expression = f'device.driver == "{driver}"'
    if multi_alloc is not None:
        expression += f" && device.allowMultipleAllocations == {str(multi_alloc).lower()}"
    return {"metadata": {"name": name}, "spec": {"selectors": [cel(expression)]}}


def device_configuration(driver: str, attribute: str) -> Json:
    return {"opaque": {"driver": driver, "parameters": {attribute: attribute + "Value"}}}


def class_with_config(name: str, driver: str, attribute: str) -> Json:
    out = class_(name, driver)
    out["spec"]["config"] = [device_configuration(driver, attribute)]
    return out


def request(
    name: str,
    class_name: str,
    count: int = 1,
    *selectors: Json,
    admin_access: bool | None = None,
    tolerations: list[Json] | None = None,
    capacity: str | None = None,
    mode: str = "ExactCount",
) -> Json:
    exactly: Json = {"deviceClassName": class_name, "allocationMode": mode}
    if mode == "ExactCount":
        exactly["count"] = count
    if selectors:
        exactly["selectors"] = list(selectors)
    if admin_access is not None:
        exactly["adminAccess"] = admin_access
    if tolerations:
        exactly["tolerations"] = tolerations
    if capacity is not None:
        exactly["capacity"] = {"requests": {"capacity-0": capacity}}
    return {"name": name, "exactly": exactly}


def all_request(
    name: str, class_name: str, *, selectors: list[Json] | None = None, **kwargs: Any
) -> Json:
    return request(name, class_name, 0, *(selectors or []), mode="All", **kwargs)


def sub_request(
    name: str,
    class_name: str,
    count: int = 1,
    *selectors: Json,
    tolerations: list[Json] | None = None,
    mode: str = "ExactCount",
    capacity: str | None = None,
) -> Json:
    out: Json = {"name": name, "deviceClassName": class_name, "allocationMode": mode}
    if mode == "ExactCount":
        out["count"] = count
    if selectors:
        out["selectors"] = list(selectors)
    if tolerations:
        out["tolerations"] = tolerations
    if capacity is not None:
        out["capacity"] = {"requests": {"capacity-0": capacity}}
    return out


def prioritized(name: str, *subs: Json) -> Json:
    return {"name": name, "firstAvailable": list(subs)}


def claim(
    name: str,
    *requests: Json,
    constraints: list[Json] | None = None,
    config: list[Json] | None = None,
) -> Json:
    devices: Json = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    if config:
        devices["config"] = config
    return {"metadata": {"name": name}, "spec": {"devices": devices}}


def claim_config(requests: list[str] | None, configuration: Json) -> Json:
    out = dict(configuration)
    if requests:
        out["requests"] = requests
    return out


def device(
    name: str,
    capacity: dict[str, Any] | str | None = None,
    attributes: dict[str, Json] | None = None,
    *,
    taints: list[Json] | None = None,
    consumes: list[Json] | None = None,
    node_selection: Any = None,
    binding_conditions: list[str] | None = None,
    binding_failure_conditions: list[str] | None = None,
    binds_to_node: bool | None = None,
    allow_multiple: bool | None = None,
) -> Json:
    out: Json = {"name": name}
    if attributes:
        out["attributes"] = attributes
    if isinstance(capacity, dict):
        out["capacity"] = {
            k: (v if isinstance(v, dict) else {"value": v}) for k, v in capacity.items()
        }
    if consumes:
        out["consumesCounters"] = consumes
        if capacity == FROM_COUNTERS:
            out["capacity"] = {
                name: {"value": value}
                for c in consumes
                for name, value in ((n, cv["value"]) for n, cv in c["counters"].items())
            }
    if taints:
        out["taints"] = taints
    if node_selection is not None:
        if isinstance(node_selection, dict):
            out["nodeSelector"] = node_selection
        elif node_selection == NODE_SELECTION_ALL:
            out["allNodes"] = True
        else:
            out["nodeName"] = node_selection
    if binding_conditions is not None:
        out["bindingConditions"] = binding_conditions
    if binding_failure_conditions is not None:
        out["bindingFailureConditions"] = binding_failure_conditions
    if binds_to_node is not None:
        out["bindsToNode"] = binds_to_node
    if allow_multiple:
        out["allowMultipleAllocations"] = True
    return out


def counters(values: dict[str, str]) -> Json:
    return {name: {"value": value} for name, value in values.items()}


def consumption(counter_set: str, values: dict[str, str]) -> Json:
    return {"counterSet": counter_set, "counters": counters(values)}


def counter_set(name: str, values: dict[str, str]) -> Json:
    return {"name": name, "counters": counters(values)}


def pool(name: str, count: int = 1, generation: int = 1) -> Json:
    return {"name": name, "resourceSliceCount": count, "generation": generation}


def slice_(
    name: str,
    node_selection: Any,
    pool_: Json | str,
    driver: str,
    *devices: Json,
    shared_counters: list[Json] | None = None,
) -> Json:
    spec: Json = {"driver": driver, "pool": pool(pool_) if isinstance(pool_, str) else pool_}
    if isinstance(node_selection, dict):
        spec["nodeSelector"] = node_selection
    elif node_selection == NODE_SELECTION_ALL:
        spec["allNodes"] = True
    elif node_selection == NODE_SELECTION_PER_DEVICE:
        spec["perDeviceNodeSelection"] = True
    else:
        spec["nodeName"] = node_selection
    if devices:
        spec["devices"] = list(devices)
    if shared_counters:
        spec["sharedCounters"] = shared_counters
    return {"metadata": {"name": name}, "spec": spec}


def slice_with_one_device(name: str, node_selection: Any, pool_: Json | str, driver: str) -> Json:
    return slice_(name, node_selection, pool_, driver, device("device-1"))


def slice_with_multiple_devices(
    name: str, node_selection: Any, pool_: Json | str, driver: str, count: int
) -> Json:
    return slice_(
        name, node_selection, pool_, driver, *(device(f"device-{i}") for i in range(count))
    )


def node_label_selector(key: str, *values: str) -> Json:
    return {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}
        ]
    }


def local_node_selector(node_name: str) -> Json:
    return {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
        ]
    }


def result(
    request: str,
    driver: str,
    pool_: str,
    device_: str,
    admin_access: bool = False,
    *tolerations: Json,
    **extra: Any,
) -> Json:
    out: Json = {"request": request, "driver": driver, "pool": pool_, "device": device_}
    if admin_access:
        out["adminAccess"] = True
    if tolerations:
        out["tolerations"] = list(tolerations)
    out.update(extra)
    return out


def allocation(selector: Json | None, *results: Json, config: list[Json] | None = None) -> Json:
    out: Json = {"devices": {"results": list(results)}}
    if config:
        out["devices"]["config"] = config
    if selector is not None:
        out["nodeSelector"] = selector
    return out


def multiple_results(request: str, driver: str, pool_: str, count: int, start: int) -> list[Json]:
    return [result(request, driver, pool_, f"device-{i}") for i in range(start, start + count)]
