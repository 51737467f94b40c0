"""The model a host serves, read from its source: which class a model's ``config.json`` selects
through the host's model registry, and the classes of that class's submodules.

A serving host (vLLM) builds the model from the config's ``architectures``: a registry module
maps each architecture name to ``(module, class)`` in a models package, and a wrapper builds its
inner models through a registry helper called with ``architectures=[...]`` or with a sub-config
(``hf_config=config.text_config``), whose own ``architectures`` pick the class. Where the registry
lives is host knowledge, stated by a binding rule (``[binding.served_model]``, see
:class:`ServedSpec`); everything else is read here from the host's code. Nothing is imported.

:func:`serve` gives a :class:`ServedModel`: the class path of every attribute on the way down
(``GPUModelRunner.model`` -> ``KimiK25ForConditionalGeneration``, its ``language_model`` ->
``DeepseekV2ForCausalLM``, that one's ``model`` -> ``DeepseekV2Model``), which receiver inference
takes as attribute bindings.
"""

from __future__ import annotations

import ast
import hashlib
import json
from dataclasses import dataclass, field

import griffe

from driftcheck.host.api import Found, HostAPI

#: How deep submodule classes are followed below the served class.
MAX_DEPTH = 3
#: The layout of a served model kept in a host snapshot.
FORMAT = 1


@dataclass(frozen=True)
class ServedSpec:
    """Where a serving host keeps its models (a binding rule's ``[binding.served_model]``).

    Attributes:
        holder: The host attribute that holds the served model at run time
            (``vllm.v1.worker.gpu_model_runner.GPUModelRunner.model``).
        registry: The module whose dict literals map architecture -> (module, class).
        package: The package those modules are in.
        helper_keyword: The keyword of the registry helper that names inner architectures.
        default_model: The model a scan assumes without ``--model`` (None: no served model
            is assumed).
        rule: The binding rule's id.
    """

    holder: str
    registry: str
    package: str
    helper_keyword: str = "architectures"
    default_model: str | None = None
    rule: str = ""

    @classmethod
    def from_table(cls, table: dict, rule: str) -> ServedSpec:
        """Read ``[binding.served_model]``."""
        return cls(
            holder=str(table["holder"]),
            registry=str(table["registry"]),
            package=str(table["package"]),
            helper_keyword=str(table.get("helper_keyword", "architectures")),
            default_model=table.get("default_model"),
            rule=rule,
        )


@dataclass
class ServedModel:
    """The classes the host builds for one model config."""

    model: str
    architecture: str | None = None
    config_file: str | None = None
    #: The served class (None: the host has no class for the architecture).
    top: str | None = None
    #: Host attribute path -> the class it holds (the holder and every submodule found).
    attributes: dict[str, str] = field(default_factory=dict)
    #: Why a class could not be found, when it could not.
    problem: str | None = None

    @property
    def classes(self) -> set[str]:
        """Every class bound on the way down."""
        return set(self.attributes.values())

    def describe(self, cls: str) -> str:
        """``the served model (architecture X, CONFIG)`` for a message."""
        short = cls.rsplit(".", 1)[-1]
        arch = "" if self.architecture == short else f", architecture {self.architecture}"
        if cls == self.top:
            return f"{short} (the served model's class: {self.model}{arch})"
        return f"{short} (inside the served model {self.model}{arch})"

    def digest(self) -> str:
        """Identifies the bindings (for cache keys)."""
        text = json.dumps([self.model, self.top, sorted(self.attributes.items())])
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "architecture": self.architecture,
            "config_file": self.config_file,
            "class": self.top,
            "attributes": dict(sorted(self.attributes.items())),
            "problem": self.problem,
        }


def registry(api: HostAPI, module: str) -> dict[str, tuple[str, str]]:
    """Architecture name -> (module, class) from the registry module's text (every
    module-level dict literal whose values are pairs of strings)."""
    text = api.module_text(module)
    if not text:
        return {}
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return {}
    out: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if not isinstance(value, ast.Dict):
            continue
        for k, v in zip(value.keys, value.values, strict=False):
            if (
                isinstance(k, ast.Constant)
                and isinstance(k.value, str)
                and isinstance(v, ast.Tuple)
                and len(v.elts) == 2
                and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in v.elts)
            ):
                # Both are str constants (checked just above).
                first, second = (e.value for e in v.elts if isinstance(e, ast.Constant))
                out.setdefault(k.value, (str(first), str(second)))
    return out


class _Reader:
    """Resolves architecture names and submodule classes in one host release."""

    def __init__(self, api: HostAPI, spec: ServedSpec, config: dict) -> None:
        self.api, self.spec, self.config = api, spec, config
        self.reg = registry(api, spec.registry)

    def arch_class(self, arch: str) -> Found | None:
        entry = self.reg.get(arch)
        if entry is None:
            return None
        found = self.api.resolve(f"{self.spec.package}.{entry[0]}.{entry[1]}")
        return found if isinstance(found, Found) and isinstance(found.obj, griffe.Class) else None

    def attr_class(self, owner: Found, attr: str, sub: dict) -> Found | None:
        """The class of ``owner.attr`` (an instance attribute set in a method), when it can be
        read: an annotation, ``self.attr = Cls(...)``, ``self.attr = self.method(...)``
        returning ``Cls(...)``, ``self.attr = self.model_cls(...)`` with ``model_cls = Cls``, or
        the registry helper (``architectures=[...]``, or a sub-config's own architectures)."""
        api = self.api
        found = api.defined_in_host_mro(owner, attr)
        if found is None or not isinstance(found.obj, griffe.Attribute):
            return None
        cls = api.annotation_class(found.obj.annotation, found.obj)
        if cls is not None and not _is_module_base(cls):
            return cls
        klass = api.resolve(found.path.rsplit(".", 1)[0])
        if not isinstance(klass, Found):
            return None
        node = api.class_node(klass)
        for stmt in ast.walk(node) if node is not None else []:
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Attribute)
                and stmt.targets[0].attr == attr
                and isinstance(stmt.value, ast.Call)
            ):
                got = self.call_class(klass, klass.obj.module.path, stmt.value, sub)
                if got is not None:
                    return got
        return None

    def call_class(self, klass: Found, module: str, call: ast.Call, sub: dict) -> Found | None:
        api, func = self.api, call.func
        if isinstance(func, ast.Name):
            target = api.resolve(f"{module}.{func.id}")
            if isinstance(target, Found) and isinstance(target.obj, griffe.Class):
                return target
            return self._helper_class(call, sub)
        if not (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == "self"
        ):
            return None
        member = api.defined_in_host_mro(klass, func.attr)
        if member is None:
            return None
        if isinstance(member.obj, griffe.Function):
            ret = api.return_class(member)
            if ret is not None and not _is_module_base(ret):
                return ret
            node = api.def_node(member)
            owner = api.resolve(member.path.rsplit(".", 1)[0])
            for stmt in ast.walk(node) if node is not None else []:
                if isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Call):
                    if isinstance(owner, Found):
                        return self.call_class(owner, member.obj.module.path, stmt.value, sub)
            return None
        if isinstance(member.obj, griffe.Attribute) and member.obj.value is not None:
            target = api.resolve(f"{member.obj.module.path}.{member.obj.value}")
            if isinstance(target, Found) and isinstance(target.obj, griffe.Class):
                return target
        return None

    def _helper_class(self, call: ast.Call, sub: dict) -> Found | None:
        """A registry helper: ``architectures=["X"]``, else the architectures of the
        sub-config passed as ``hf_config=config.<name>``."""
        for kw in call.keywords:
            if kw.arg == self.spec.helper_keyword and isinstance(kw.value, ast.List):
                first = kw.value.elts[0] if kw.value.elts else None
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    return self.arch_class(first.value)
        for kw in call.keywords:
            value = kw.value
            if isinstance(value, ast.Attribute) and isinstance(sub.get(value.attr), dict):
                archs = sub[value.attr].get("architectures") or []
                if archs and isinstance(archs[0], str):
                    return self.arch_class(archs[0])
        return None


def _is_module_base(cls: Found) -> bool:
    """An annotation that says only "some module" (``nn.Module`` re-exported by the host)."""
    return not cls.obj.members


def serve(api: HostAPI, spec: ServedSpec, model: str, config: dict) -> ServedModel:
    """The classes ``api``'s release builds for ``config`` (a parsed ``config.json``), kept as
    a fact of the release's snapshot."""
    key = json.dumps([FORMAT, spec.holder, spec.registry, spec.package, spec.helper_keyword])
    key += json.dumps(config, sort_keys=True, default=str)
    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    data = api.fact(f"served:{digest}", lambda: _serve(api, spec, model, config).to_dict())
    assert isinstance(data, dict)
    return ServedModel(
        model=model,
        architecture=data["architecture"],
        top=data["class"],
        attributes=dict(data["attributes"]),
        problem=data["problem"],
    )


def _serve(api: HostAPI, spec: ServedSpec, model: str, config: dict) -> ServedModel:
    out = ServedModel(model=model)
    archs = config.get("architectures") or []
    if not archs or not isinstance(archs[0], str):
        out.problem = "its config.json names no architecture"
        return out
    out.architecture = archs[0]
    reader = _Reader(api, spec, config)
    if not reader.reg:
        out.problem = f"cannot read {api.name} {api.version}'s model registry ({spec.registry})"
        return out
    top = reader.arch_class(archs[0])
    if top is None:
        where = "in its model registry" if archs[0] not in reader.reg else "where its registry says"
        out.problem = f"{api.name} {api.version} has no class for {archs[0]} {where}"
        return out
    out.top = top.path
    out.attributes[spec.holder] = top.path
    todo, seen = [(top, 0)], {top.path}
    while todo:
        cls, depth = todo.pop(0)
        if depth >= MAX_DEPTH:
            continue
        for name in sorted(_instance_attributes(api, cls)):
            got = reader.attr_class(cls, name, config)
            if got is None or not got.path.startswith(spec.package + "."):
                continue  # only the models' own classes: layers hold no submodels
            out.attributes[f"{cls.path}.{name}"] = got.path
            if got.path not in seen:
                seen.add(got.path)
                todo.append((got, depth + 1))
    return out


def attr_class(
    api: HostAPI, spec: ServedSpec, owner: Found, attr: str, config: dict | None = None
) -> Found | None:
    """The class of ``owner.attr`` as :func:`serve` reads it (``config``: the model's
    ``config.json``, for inner models built from a sub-config)."""
    return _Reader(api, spec, config or {}).attr_class(owner, attr, config or {})


def _instance_attributes(api: HostAPI, cls: Found) -> list[str]:
    """Instance attributes of the class's host MRO (set on ``self`` in a method)."""
    out: list[str] = []
    for klass in api.mro(cls)[0]:
        for name, member in klass.obj.members.items():
            if name.startswith("__") or name in out:
                continue
            if isinstance(member, griffe.Attribute) and "instance-attribute" in member.labels:
                out.append(name)
    return out


def has_attribute(api: HostAPI, cls: Found, name: str) -> bool:
    """``cls`` (or a host base) defines ``name``, also through ``self.a, self.b = ...`` (kept
    in the release's snapshot: the class bodies are read once)."""
    if api.defined_in_host_mro(cls, name) is not None:
        return True
    return bool(api.fact(f"assigns:{cls.path}.{name}", lambda: _assigns(api, cls, name)))


def _assigns(api: HostAPI, cls: Found, name: str) -> bool:
    for klass in api.mro(cls)[0]:
        node = api.class_node(klass)
        for sub in ast.walk(node) if node is not None else []:
            targets = sub.targets if isinstance(sub, ast.Assign) else []
            for target in targets:
                for e in target.elts if isinstance(target, ast.Tuple) else [target]:
                    if (
                        isinstance(e, ast.Attribute)
                        and e.attr == name
                        and isinstance(e.value, ast.Name)
                        and e.value.id == "self"
                    ):
                        return True
    return False
