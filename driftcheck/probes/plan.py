"""Static model check for ``--plan``: does the target vLLM have the model's architecture, and
does that class offer what the client's workload reaches for?

Nothing is imported. The architecture named in the model's ``config.json`` is looked up in the
text of vLLM's model registry (``vllm/model_executor/models/registry.py``: architecture name ->
(module, class)), and the class is resolved through the host API (:class:`HostAPI.resolve`).
The client's needs are read from the client's own worker-extension source: whether it checks
``supports_eagle3(model)``, reaches ``model.model`` (or ``get_language_model()``), and which
embedding method its patched forward calls on the inner model.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import griffe

from driftcheck.host import served_model
from driftcheck.host.api import Found, HostAPI
from driftcheck.models.configs import find_config

REGISTRY_MODULE = "vllm.model_executor.models.registry"
MODELS_PACKAGE = "vllm.model_executor.models"
EAGLE3 = "vllm.model_executor.models.interfaces.SupportsEagle3"
WRAPPER_ATTRS = ("language_model", "text_model", "llm")
SPEC = served_model.ServedSpec(holder="", registry=REGISTRY_MODULE, package=MODELS_PACKAGE)


@dataclass
class ClientNeeds:
    """What the client's worker extension does with the model (from its source)."""

    file: str | None = None
    eagle3_line: int | None = None  # ``supports_eagle3(model)`` check
    base_line: int | None = None  # ``model.model``
    language_model_line: int | None = None  # ``get_language_model()`` (handles wrappers)
    embed_method: str | None = None  # called on the inner model in the patched forward
    embed_line: int | None = None
    inner_attrs: tuple[str, ...] = ("layers", "norm", "start_layer", "end_layer")


def client_needs(file: str | None, text: str | None) -> ClientNeeds:
    """Read the needs from the worker extension's source text."""
    needs = ClientNeeds(file=file)
    if not text:
        return needs
    for no, line in enumerate(text.splitlines(), start=1):
        code = line.split("#", 1)[0]
        if needs.eagle3_line is None and re.search(r"\bsupports_eagle3\s*\(", code):
            if "import" not in code:
                needs.eagle3_line = no
        if needs.base_line is None and re.search(r"\bmodel\.model\b", code):
            needs.base_line = no
        if needs.language_model_line is None and "get_language_model(" in code:
            needs.language_model_line = no
        m = re.search(r"\bself\.(get_input_embeddings|embed_input_ids)\s*\(", code)
        if m and needs.embed_method is None:
            needs.embed_method, needs.embed_line = m.group(1), no
    return needs


@dataclass
class ModelCheck:
    """The result of the static model check."""

    model: str
    config_file: str | None = None
    architecture: str | None = None
    class_path: str | None = None
    lines: list[tuple[str, str]] = field(default_factory=list)  # (ok|fail|warn|info, text)
    predicted: str | None = None  # the first failure the client will hit, if any

    @property
    def ok(self) -> bool:
        return not any(kind == "fail" for kind, _ in self.lines)

    def add(self, kind: str, text: str) -> None:
        self.lines.append((kind, text))

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "config_file": self.config_file,
            "architecture": self.architecture,
            "class": self.class_path,
            "ok": self.ok,
            "predicted_failure": self.predicted,
            "lines": [{"kind": k, "text": t} for k, t in self.lines],
        }


def registry(api: HostAPI) -> dict[str, tuple[str, str]]:
    """Architecture name -> (module, class) from vLLM's model registry."""
    return served_model.registry(api, REGISTRY_MODULE)


def check_model(
    api: HostAPI, model: str, needs: ClientNeeds, *, config: dict | None = None
) -> ModelCheck:
    """Check statically that the target vLLM has the model's architecture and what the client
    needs from it."""
    result = ModelCheck(model=model)
    host = f"vLLM {api.version}"
    if config is None:
        cfg_path = find_config(model)
        if cfg_path is None:
            result.add(
                "warn",
                f"no config.json for {model} on this machine (not a local folder, not in the "
                "Hugging Face cache): the architecture cannot be checked statically",
            )
            return result
        result.config_file = str(cfg_path)
        try:
            config = json.loads(cfg_path.read_text())
        except (OSError, ValueError) as exc:
            result.add("fail", f"cannot read {cfg_path}: {exc}")
            return result
    archs = config.get("architectures") or []
    if not archs:
        result.add("fail", "config.json names no architecture")
        return result
    arch = archs[0]
    result.architecture = arch
    reg = registry(api)
    if not reg:
        result.add("warn", f"cannot read {host}'s model registry ({REGISTRY_MODULE})")
        return result
    if arch not in reg:
        result.add("fail", f"{host} has no architecture {arch!r} in its model registry")
        result.predicted = f"vLLM rejects the model: architecture {arch} is not supported"
        return result
    module, cls_name = reg[arch]
    path = f"{MODELS_PACKAGE}.{module}.{cls_name}"
    found = api.resolve(path)
    if not (isinstance(found, Found) and isinstance(found.obj, griffe.Class)):
        result.add("fail", f"registry maps {arch} to {path}, which does not exist in {host}")
        result.predicted = f"vLLM cannot load {path}"
        return result
    result.class_path = path
    result.add("ok", f"{arch} -> {path} ({found.file}:{found.line})")
    text_cfg = config.get("text_config")
    if isinstance(text_cfg, dict):
        inner_arch = (text_cfg.get("architectures") or [None])[0]
        result.add(
            "info",
            f"multimodal config: the text model ({inner_arch or text_cfg.get('model_type')}) "
            "is configured under text_config",
        )
    _check_needs(api, found, needs, result)
    return result


def _where(needs: ClientNeeds, line: int | None) -> str:
    name = (needs.file or "client").rsplit("/", 1)[-1]
    return f"{name}:{line}" if line else name


def _check_needs(api: HostAPI, top: Found, needs: ClientNeeds, result: ModelCheck) -> None:
    host = f"vLLM {api.version}"
    cls = top.path.rsplit(".", 1)[-1]
    chain, _ = api.mro(top)
    if needs.eagle3_line is not None:
        if any(c.path == EAGLE3 for c in chain):
            result.add("ok", f"{cls} implements SupportsEagle3 (the client checks supports_eagle3)")
        else:
            result.add(
                "fail",
                f"{cls} does not implement SupportsEagle3 in {host}: the client's "
                f"supports_eagle3(model) check at {_where(needs, needs.eagle3_line)} raises "
                "ValueError",
            )
            result.predicted = result.predicted or (
                f"ValueError at {_where(needs, needs.eagle3_line)}: "
                f"Model {cls} does not support hidden state extraction"
            )
    inner_holder = top
    if needs.base_line is not None or needs.language_model_line is not None:
        base = api.defined_in_host_mro(top, "model")
        wrapper = next(
            (a for a in WRAPPER_ATTRS if api.defined_in_host_mro(top, a) is not None), None
        )
        if needs.language_model_line is not None and wrapper is not None:
            result.add(
                "ok",
                f"{cls} wraps its text model in .{wrapper}; the client unwraps it with "
                f"get_language_model() ({_where(needs, needs.language_model_line)})",
            )
            inner_holder = _attr_class(api, top, wrapper) or top
            base = (
                api.defined_in_host_mro(inner_holder, "model") if inner_holder is not top else None
            )
        if base is None and needs.base_line is not None and inner_holder is top:
            where = _where(needs, needs.base_line)
            text = f"{cls} has no attribute 'model' in {host}: the client's model.model at {where} raises AttributeError"
            if wrapper is not None:
                holder = _attr_class(api, top, wrapper)
                under = f" ({holder.path.rsplit('.', 1)[-1]})" if holder else ""
                text += (
                    f"; the text model sits under the multimodal wrapper's .{wrapper}{under}, "
                    f"so the client would need model.{wrapper}.model"
                )
            result.add("fail", text)
            result.predicted = result.predicted or (
                f"AttributeError at {where}: '{cls}' object has no attribute 'model'"
            )
            return
        if base is not None:
            inner = _attr_class(api, inner_holder, "model")
            if inner is None:
                result.add("warn", f"{cls}.model exists; its class cannot be determined statically")
                return
            inner_name = inner.path.rsplit(".", 1)[-1]
            result.add("ok", f"{inner_holder.path.rsplit('.', 1)[-1]}.model is {inner.path}")
            _check_inner(api, inner, inner_name, needs, result)


def _check_inner(
    api: HostAPI, inner: Found, name: str, needs: ClientNeeds, result: ModelCheck
) -> None:
    host = f"vLLM {api.version}"
    missing = [a for a in needs.inner_attrs if not _has_attr(api, inner, a)]
    if missing:
        result.add(
            "warn", f"{name} defines no {', '.join(missing)} (the patched forward reads them)"
        )
    else:
        result.add("ok", f"{name} has {', '.join(needs.inner_attrs)}")
    if needs.embed_method:
        where = _where(needs, needs.embed_line)
        if api.defined_in_host_mro(inner, needs.embed_method) is not None:
            result.add("ok", f"{name}.{needs.embed_method} exists (called at {where})")
        else:
            other = (
                "embed_input_ids"
                if needs.embed_method == "get_input_embeddings"
                else "get_input_embeddings"
            )
            has_other = api.defined_in_host_mro(inner, other) is not None
            hint = f" (it has {other})" if has_other else ""
            result.add(
                "fail",
                f"{name} has no {needs.embed_method} in {host}{hint}: the client's patched "
                f"forward calls self.{needs.embed_method}(...) at {where} -> AttributeError "
                "on the first forward pass (in the worker)",
            )
            result.predicted = result.predicted or (
                f"AttributeError in the worker at {where}: '{name}' object has no attribute "
                f"'{needs.embed_method}'"
            )


def _attr_class(api: HostAPI, owner: Found, attr: str) -> Found | None:
    """The class of ``owner.attr`` (see :func:`driftcheck.host.served_model.attr_class`)."""
    return served_model.attr_class(api, SPEC, owner, attr)


_has_attr = served_model.has_attribute
