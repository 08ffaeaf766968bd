"""Kiln's Python SDK against the Kubeflow SDK (kubeflow.trainer 0.5), as recorded in
kubeflow_trainer_0.5.0_api.json: every public name is in kiln (or kiln.options) with the same
parameters, in the same order, of the same kind and with the same defaults. Kiln may add
keyword-only parameters and parameters with defaults after Kubeflow's, give a default where
Kubeflow has none, and take keywords positionally too; nothing else.

It also renders docs/sdk-kubeflow-parity.md from the record and kiln, and fails when the committed
page differs: KILN_UPDATE_GOLDEN=1 rewrites it.
"""

import dataclasses
import enum
import importlib
import inspect
import json
import os
import unittest
from typing import Any, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
RECORD = os.path.join(HERE, "kubeflow_trainer_0.5.0_api.json")
PAGE = os.path.join(HERE, "..", "..", "..", "docs", "sdk-kubeflow-parity.md")

PK, KO = inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY

# What Kiln does differently with a name, for the page (the test holds the signatures).
NOTES = {
    "BuiltinTrainer": "accepted as a type; `train()` refuses it: Kiln has no built-in trainer yet",
    "DataCacheInitializer": "accepted as a type; `train()` refuses it: Kiln has no data cache",
    "ContainerBackendConfig": "accepted as a type; `TrainerClient()` refuses it: no Docker/Podman backend",
    "CustomTrainer": "the function is shipped to the runtime's image (python, torchrun or mpirun)",
    "CustomTrainerContainer": "`image` may be left unset for the runtime's",
    "KubernetesBackendConfig": "reaches Kiln's API server: its URL from the cluster's kube-public/kiln-info ConfigMap (`KILN_API_SERVER` or a Kiln configuration override it), the token of the kubeconfig context or the pod",
    "LocalProcessBackendConfig": "runs jobs as processes on this machine",
    "Runtime": "equal to its name; `trainer` and `kind` filled from Kiln's fields when not given",
    "TrainerClient.list_jobs": "`status=` takes every status, Kiln's Queued and Suspended too; a str runtime is its name",
    "TrainerClient.get_job_logs": "steps in Kubeflow's names (`node-0`, `dataset-initializer`; an MPI launcher is `node-0`) or the server's",
    "TrainerClient.wait_for_job_status": "no polling: it follows the server's watch",
    "TrainerClient.get_runtime": "the namespace's TrainingRuntime, else the ClusterTrainingRuntime",
    "TrainerClient.train": "options needing more than a NewTrainJob go as a TrainJob manifest",
    "update_trainjob_status": "`kiln.progress` reports in the background",
    "TrainerEnvFrom": "`value_from` is a dict (an EnvVarSource) or has `to_dict()`",
}


def load() -> Dict[str, Any]:
    with open(RECORD, encoding="utf-8") as f:
        return json.load(f)


def default_value(obj: Any, name: str, param: inspect.Parameter) -> Any:
    """A parameter's default; a dataclass field's default_factory is called."""
    if param.default is inspect.Parameter.empty:
        return inspect.Parameter.empty
    if repr(param.default) == "<factory>" and dataclasses.is_dataclass(obj):
        f = {x.name: x for x in dataclasses.fields(obj)}[name]
        value = f.default_factory()  # type: ignore[misc]
        return dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value
    return param.default


def params_of(obj: Any) -> List[inspect.Parameter]:
    return [p for p in inspect.signature(obj).parameters.values() if p.name != "self"]


def compare(obj: Any, want: List[Dict[str, Any]]) -> List[str]:
    """How obj's signature differs from the recorded one in a way a Kubeflow caller would notice."""
    problems = []
    got = params_of(obj)
    by_name = {p.name: p for p in got}
    positional = [p.name for p in got if p.kind in (inspect.Parameter.POSITIONAL_ONLY, PK)]
    up_positional = [w["name"] for w in want if w["kind"] == "POSITIONAL_OR_KEYWORD"]
    for w in want:
        p = by_name.get(w["name"])
        if p is None:
            problems.append(f"no parameter {w['name']}")
            continue
        if w["kind"] == "POSITIONAL_OR_KEYWORD":
            i = up_positional.index(w["name"])
            if p.kind != PK or i >= len(positional) or positional[i] != w["name"]:
                problems.append(f"{w['name']}: want positional #{i} (positional: {positional})")
        elif p.kind not in (PK, KO):
            problems.append(f"{w['name']}: want a keyword parameter, got {p.kind.name}")
        if "default" in w:
            value = default_value(obj, w["name"], p)
            if value is inspect.Parameter.empty:
                problems.append(f"{w['name']}: want default {w['default']}, got none")
            elif w["default"] == "<factory>":
                if value != w["factory_value"]:
                    problems.append(f"{w['name']}: want default {w['factory_value']!r}, got {value!r}")
            elif repr(value) != w["default"]:
                problems.append(f"{w['name']}: want default {w['default']}, got {value!r}")
    known = {w["name"] for w in want}
    for p in got:
        if p.name in known or p.kind in (KO, inspect.Parameter.VAR_KEYWORD):
            continue
        if p.default is inspect.Parameter.empty and p.kind != inspect.Parameter.VAR_POSITIONAL:
            problems.append(f"{p.name}: Kiln's own parameter must be keyword-only or have a default")
    return problems


def extras(obj: Any, want: List[Dict[str, Any]]) -> List[str]:
    known = {w["name"] for w in want}
    return [p.name for p in params_of(obj) if p.name not in known]


def attribute_names(obj: Any) -> set:
    names = set(dir(obj))
    if dataclasses.is_dataclass(obj):
        names |= {f.name for f in dataclasses.fields(obj)}
    return names


def check(module: Any, name: str, spec: Dict[str, Any]) -> List[str]:
    """The problems of one recorded name in a kiln module."""
    if not hasattr(module, name):
        return [f"{name}: missing from {module.__name__}"]
    obj = getattr(module, name)
    kind = spec["kind"]
    out: List[str] = []
    if kind == "constant":
        if obj != spec["value"]:
            out.append(f"{name}: want {spec['value']!r}, got {obj!r}")
    elif kind == "enum":
        if not (isinstance(obj, type) and issubclass(obj, enum.Enum)):
            return [f"{name}: want an Enum"]
        for member, value in spec["members"].items():
            if getattr(obj, member, None) is None or getattr(obj, member).value != value:
                out.append(f"{name}.{member}: want value {value!r}")
    elif kind == "attributes":
        missing = sorted(set(spec["attributes"]) - attribute_names(obj))
        if missing:
            out.append(f"{name}: no {', '.join(missing)}")
    else:
        out += [f"{name}: {p}" for p in compare(obj, spec["params"])]
        for method, params in {**spec.get("methods", {}), **spec.get("classmethods", {})}.items():
            if not callable(getattr(obj, method, None)):
                out.append(f"{name}.{method}: missing")
                continue
            out += [f"{name}.{method}: {p}" for p in compare(getattr(obj, method), params)]
        missing = sorted(set(spec.get("attributes", [])) - attribute_names(obj))
        if missing:
            out.append(f"{name}: no {', '.join(missing)}")
    return out


class ParityTest(unittest.TestCase):
    def setUp(self) -> None:
        self.record = load()

    def test_every_public_name_with_kubeflows_signature(self) -> None:
        for upstream, m in self.record["modules"].items():
            module = importlib.import_module(m["kiln"])
            for name in m["all"]:
                with self.subTest(f"{upstream}.{name}"):
                    self.assertEqual(check(module, name, m["names"][name]), [])
                    self.assertIn(name, module.__all__, f"{name} is not in {m['kiln']}.__all__")

    def test_returned_types_have_kubeflows_attributes(self) -> None:
        r = self.record["returned"]
        module = importlib.import_module(r["kiln"])
        for name, spec in r["names"].items():
            with self.subTest(name):
                self.assertEqual(check(module, name, spec), [])

    def test_documented_names(self) -> None:
        d = self.record["documented_not_read"]
        module = importlib.import_module(d["kiln"])
        for name in d["names"]:
            self.assertTrue(hasattr(module, name), f"{d['kiln']} has no {name}")

    def test_the_checker_catches_what_breaks_a_caller(self) -> None:
        want = [{"name": "a", "kind": "POSITIONAL_OR_KEYWORD"}, {"name": "b", "kind": "POSITIONAL_OR_KEYWORD", "default": "None"}]

        def same(a, b=None, c=1, *, d): ...  # noqa: E704 - extras after, with a default or keyword-only
        def swapped(b=None, a=None): ...  # noqa: E704
        def other_default(a, b=2): ...  # noqa: E704
        def extra_required(a, b=None, c=...): ...  # noqa: E704
        def inserted(a, x, b=None): ...  # noqa: E704

        self.assertEqual(compare(same, want), [])
        self.assertEqual(compare(extra_required, want), [])
        self.assertTrue(compare(swapped, want))
        self.assertEqual(compare(other_default, want), ["b: want default None, got 2"])
        self.assertTrue(compare(inserted, want))

    def test_the_parity_page_is_current(self) -> None:
        if not os.path.isdir(os.path.dirname(PAGE)):
            self.skipTest("no docs/ beside this checkout")
        page = render(self.record)
        if os.environ.get("KILN_UPDATE_GOLDEN") == "1":
            with open(PAGE, "w", encoding="utf-8") as f:
                f.write(page)
        try:
            with open(PAGE, encoding="utf-8") as f:
                committed = f.read()
        except FileNotFoundError:
            committed = ""
        self.assertEqual(committed, page, "docs/sdk-kubeflow-parity.md is stale: run KILN_UPDATE_GOLDEN=1 python3 -m unittest tests.test_parity")


def signature(name: str, params: List[Dict[str, Any]]) -> str:
    parts, star = [], False
    for p in params:
        if p["kind"] == "KEYWORD_ONLY" and not star:
            parts.append("*")
            star = True
        d = p.get("default")
        parts.append(p["name"] if d is None else f"{p['name']}={d if d != '<factory>' else json.dumps(p['factory_value'])}")
    return f"{name}({', '.join(parts)})"


def row(module: Any, name: str, spec: Dict[str, Any], qualified: str, params: Optional[List[Dict[str, Any]]] = None, obj: Any = None) -> Tuple[str, str, str]:
    kind = spec["kind"]
    if kind == "constant":
        return f"`{name}`", f"`{spec['value']}`", "same" + note(qualified)
    if kind == "enum":
        return f"`{name}`", "enum: " + ", ".join(f"`{m}`" for m in spec["members"]), "same" + note(qualified)
    more = extras(obj if obj is not None else getattr(module, name), params if params is not None else spec["params"])
    added = f"; also {', '.join(f'`{x}`' for x in more)}" if more else ""
    return f"`{name}`", f"`{signature(name, params if params is not None else spec['params'])}`", "same" + added + note(qualified)


def note(qualified: str) -> str:
    return f"; {NOTES[qualified]}" if qualified in NOTES else ""


def render(record: Dict[str, Any]) -> str:
    """docs/sdk-kubeflow-parity.md: each name of the record, its Kubeflow signature and Kiln's side."""
    src = record["recorded_from"]
    out = [
        "# The Kubeflow SDK in Kiln, name by name",
        "",
        f"Generated by `sdk-gen/python/tests/test_parity.py` from `tests/kubeflow_trainer_{record['version']}_api.json` (the public API of",
        f"`kubeflow` {record['version']}, read from {src['repository']}) and `kiln`: do not edit; `KILN_UPDATE_GOLDEN=1` rewrites it. \"same\" means",
        "the same parameters, order and defaults; \"also\" lists the parameters Kiln adds (keyword-only, or with defaults, after",
        "Kubeflow's). [Coming from Kubeflow](sdk.md#coming-from-kubeflow) says how to switch.",
        "",
    ]
    for upstream, m in record["modules"].items():
        module = importlib.import_module(m["kiln"])
        out += [f"## `{upstream}` → `{m['kiln']}`", "", "| name | Kubeflow | Kiln |", "|---|---|---|"]
        for name in m["all"]:
            spec = m["names"][name]
            out.append("| %s | %s | %s |" % row(module, name, spec, name))
            obj = getattr(module, name)
            for method, params in {**spec.get("methods", {}), **spec.get("classmethods", {})}.items():
                out.append("| %s | %s | %s |" % row(module, f"{name}.{method}", spec, f"{name}.{method}", params, getattr(obj, method)))
        out.append("")
    d = record["documented_not_read"]
    out += [f"Also in `{d['kiln']}`: " + ", ".join(f"`{n}`" for n in d["names"]) + " (in Kubeflow's 0.5 documentation; its signature was not in the sources read).", ""]
    r = record["returned"]
    out += ["Returned, not exported: " + "; ".join(f"`{n}` ({', '.join(f'`{a}`' for a in s['attributes'])})" for n, s in r["names"].items()) + ".", ""]
    return "\n".join(out)


if __name__ == "__main__":
    unittest.main()
