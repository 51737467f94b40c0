"""The witness runner: run by the *host's* interpreter (a managed environment), never by
driftcheck's own process, and never with the client on its path.

It reads a batch of witness programs (JSON: the host's paths, the ``roots`` of its packages, a
per-witness timeout, and one entry per witness), performs each use exactly as the client's code
would meet it at run time (import, attribute chain, argument binding, class lookups, defaults),
and writes one JSON line per witness to the output file as soon as it is done, so that a crash
or a timeout loses only the witness it happened in. Only the standard library is used: this file
runs on every Python a host supports.

Each result has an ``outcome``:

* ``ok``: the use works here (``data`` says what was found: the bound parameter names, a
  default, the warnings raised, ...);
* ``fail``: the use fails as code, here: the exception a client would see (``detail``);
* ``env``: this environment cannot tell (a dependency of the host is missing, a module fails to
  import for another reason, no runtime signature, a timeout).

Usage: ``python runner.py BATCH.json OUT.jsonl`` (or ``--warns SPEC.json`` for one import in a
fresh interpreter, run by the runner itself).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import os
import signal
import subprocess
import sys
import warnings
from collections.abc import Callable
from typing import Any, cast

ROOTS: list[str] = []


class Env(Exception):
    """This environment cannot tell."""


class Fail(Exception):
    """The use fails, as the client's code would."""


class Timeout(BaseException):
    """The witness ran past its time."""


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:300]


def _in_host(name: str | None) -> bool:
    if not name:
        return False
    return any(name == r or name.startswith(r + ".") for r in ROOTS)


def _raised_by(exc: BaseException, module: str) -> bool:
    """True when the innermost frame of ``exc`` is the top level of ``module`` itself (a
    tombstone module that raises on import), not code it imports."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return False
    parts = module.split(".")
    tail = os.sep.join(parts)
    file = tb.tb_frame.f_code.co_filename
    return tb.tb_frame.f_code.co_name == "<module>" and (
        file.endswith(tail + ".py") or file.endswith(os.path.join(tail, "__init__.py"))
    )


def resolve(path: str, *, module_only: bool = False, reads: int = 0) -> object:
    """What ``path`` names, the way the client reaches it: the name it imports (``path``
    without its last ``reads`` parts) as ``import``/``from ... import`` find it (the longest
    importable module prefix, then attributes), then the client's attribute reads."""
    parts = path.split(".")
    if 0 < reads < len(parts):
        imported = resolve(".".join(parts[:-reads]))
        return _read(imported, parts[-reads:])
    obj: object = None
    i = len(parts)
    while i > 0:
        name = ".".join(parts[:i])
        try:
            obj = importlib.import_module(name)
            break
        except ModuleNotFoundError as exc:
            if exc.name and (name == exc.name or name.startswith(exc.name + ".")):
                if i == 1:
                    raise Env(f"the host's package does not import: {_short(exc)}") from None
                i -= 1
                continue
            if _in_host(exc.name):
                raise Fail(_short(exc)) from None
            raise Env(f"importing {name}: a dependency is missing: {_short(exc)}") from None
        except ImportError as exc:
            if _raised_by(exc, name):
                raise Fail(_short(exc)) from None
            raise Env(f"importing {name} fails here: {_short(exc)}") from None
        except Exception as exc:  # noqa: BLE001 - any import failure is the environment's
            if _raised_by(exc, name):
                raise Fail(_short(exc)) from None
            raise Env(f"importing {name} fails here: {_short(exc)}") from None
    if module_only and i < len(parts):
        raise Fail(f"ModuleNotFoundError: No module named {path!r}")
    return _read(obj, parts[i:])


def _read(obj: object, parts: list[str]) -> object:
    for part in parts:
        try:
            obj = getattr(obj, part)
        except ModuleNotFoundError as exc:
            if _in_host(exc.name):
                raise Fail(_short(exc)) from None
            raise Env(f"reading {part}: a dependency is missing: {_short(exc)}") from None
        except Exception as exc:  # noqa: BLE001 - what the client's attribute read raises
            raise Fail(_short(exc)) from None
    return obj


def _static(cls: type, member: str) -> object:
    try:
        return inspect.getattr_static(cls, member)
    except AttributeError:
        msg = f"AttributeError: type object {cls.__name__!r} has no attribute {member!r}"
        raise Fail(msg) from None


def _callable(spec: dict) -> tuple[object, bool]:
    """What the call calls, and whether an instance is bound as its first argument."""
    receiver, member = spec.get("receiver"), spec.get("member")
    if receiver and member:
        cls = resolve(receiver)
        if not isinstance(cls, type):
            raise Env(f"{receiver} is not a class here")
        static = _static(cls, member)
        if isinstance(static, staticmethod):
            return static.__func__, False
        if isinstance(static, classmethod):
            return getattr(cls, member), False
        if isinstance(static, property):
            raise Env(f"{member} is a property")
        if inspect.isfunction(static):
            return static, True
        return getattr(cls, member), False
    return resolve(spec["path"], reads=int(spec.get("reads", 0))), False


def _signature(obj: object) -> inspect.Signature:
    try:
        # Whatever the host holds there: what is not callable raises TypeError below.
        return inspect.signature(cast(Callable[..., Any], obj))
    except (TypeError, ValueError) as exc:
        raise Env(f"no runtime signature: {_short(exc)}") from None


class _Arg:
    """A placeholder argument (never used: binding does not call)."""


def _signatures(func: object, self_bound: bool) -> list[tuple[inspect.Signature, bool]]:
    """The signatures a call must bind to: a function's own; for a class, those of the
    ``__new__`` and ``__init__`` it runs (both get the call's arguments), unless the class
    states its signature (``__signature__``, as pydantic does) or its metaclass takes the
    call over."""
    if not isinstance(func, type) or self_bound:
        return [(_signature(func), self_bound)]
    cls = func
    stated = any("__signature__" in vars(k) for k in cls.__mro__)
    meta_call = inspect.getattr_static(type(cls), "__call__", None)
    if stated or meta_call is not type.__call__:
        return [(_signature(cls), False)]
    out = []
    for name, base in (("__new__", object.__new__), ("__init__", object.__init__)):
        got = inspect.getattr_static(cls, name, None)
        if isinstance(got, staticmethod):
            got = got.__func__
        if got is None or got is base or not inspect.isfunction(got):
            continue
        out.append((_signature(got), True))
    return out or [(_signature(cls), False)]


def bind(spec: dict) -> dict:
    """Bind the call's shape; the parameter each positional argument lands on."""
    func, self_bound = _callable(spec)
    n = int(spec.get("positional", 0))
    kwargs = {k: _Arg() for k in spec.get("keywords", ())}
    names: list[str] = []
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    for sig, first in _signatures(func, self_bound):
        args = [_Arg()] * (n + (1 if first else 0))
        try:
            sig.bind(*args, **kwargs)
        except TypeError as exc:
            raise Fail(_short(exc)) from None
        params = list(sig.parameters.values())
        slots = [p.name for p in params if p.kind in kinds][1 if first else 0 :]
        star = next((p.name for p in params if p.kind == inspect.Parameter.VAR_POSITIONAL), "")
        if slots or not names:
            names = [slots[i] if i < len(slots) else f"*{star}" for i in range(n)]
    return {"names": names}


def marker(spec: dict) -> dict:
    """The ``__deprecated__`` mark (PEP 702) of what the call calls; nothing is called."""
    func, _ = _callable(spec)
    mark = getattr(func, "__deprecated__", None)
    return {"marker": str(mark)[:300] if mark else ""}


def _declared(cls: type) -> dict[str, str]:
    """Names a class declares beyond its attributes: fields, annotations, slots."""
    out: dict[str, str] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dataclasses.is_dataclass(cls):
            out.update((f.name, "dataclass field") for f in dataclasses.fields(cls))
        for attr in ("model_fields", "__fields__", "__struct_fields__"):
            try:
                got = getattr(cls, attr, None)
            except Exception:  # noqa: BLE001 - a deprecated property may raise
                got = None
            if isinstance(got, dict) or isinstance(got, tuple):
                out.update((str(k), f"{attr} entry") for k in got)
        for a in getattr(cls, "__attrs_attrs__", ()) or ():
            out[getattr(a, "name", "")] = "attrs field"
        for k in cls.__mro__:
            for name in vars(k).get("__annotations__", {}) or {}:
                out.setdefault(name, f"annotated on {k.__qualname__}")
            slots = vars(k).get("__slots__", ())
            for name in [slots] if isinstance(slots, str) else slots or ():
                out.setdefault(name, f"slot of {k.__qualname__}")
    return out


def member(spec: dict) -> dict:
    """Whether the receiver's class has the member (an attribute of its MRO, or declared)."""
    cls = resolve(spec["receiver"])
    if not isinstance(cls, type):
        raise Env(f"{spec['receiver']} is not a class here")
    name = spec["member"]
    for k in cls.__mro__:
        if name in vars(k):
            return {"where": f"{k.__module__}.{k.__qualname__}"}
    declared = _declared(cls)
    if name in declared:
        return {"where": declared[name]}
    raise Fail(f"{cls.__qualname__} has no {name!r}: not in its MRO, fields, annotations or slots")


def default(spec: dict) -> dict:
    """The default of a field or parameter, as source-like text (factories are not called)."""
    cls = resolve(spec["path"], reads=int(spec.get("reads", 0)))
    name = spec["field"]
    if isinstance(cls, type) and dataclasses.is_dataclass(cls):
        for f in dataclasses.fields(cls):
            if f.name == name:
                if f.default is not dataclasses.MISSING:
                    return {"value": repr(f.default)}
                if f.default_factory is not dataclasses.MISSING:
                    factory = f.default_factory
                    return {"value": f"<factory {getattr(factory, '__qualname__', factory)}>"}
                return {"value": "<required>"}
    fields = getattr(cls, "model_fields", None)
    if isinstance(fields, dict) and name in fields:
        got = getattr(fields[name], "default", None)
        text = repr(got)
        return {"value": "<required>" if "Undefined" in text else text}
    params = _signature(cls).parameters
    if name not in params:
        raise Fail(f"{getattr(cls, '__qualname__', cls)} has no field or parameter {name!r}")
    value = params[name].default
    return {"value": "<required>" if value is inspect.Parameter.empty else repr(value)}


def params(spec: dict) -> dict:
    """The runtime parameters of the host method: (name, kind, has a default)."""
    func, self_bound = _callable(spec)
    out = [
        [p.name, p.kind.name.lower(), p.default is not inspect.Parameter.empty]
        for p in _signature(func).parameters.values()
    ]
    return {"params": out[1:] if self_bound else out}


def warns_here(spec: dict) -> dict:
    """In a fresh interpreter: perform the use with every warning recorded."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        obj = resolve(
            spec["path"], module_only=bool(spec.get("module_only")), reads=int(spec.get("reads", 0))
        )
    marker = getattr(obj, "__deprecated__", None)
    out = [
        [w.category.__name__, [c.__name__ for c in w.category.__mro__], str(w.message)[:300]]
        for w in seen
    ]
    return {"warnings": out, "marker": str(marker)[:300] if isinstance(marker, str) else ""}


def warns(spec: dict, timeout: float) -> dict:
    """Run :func:`warns_here` in a new interpreter (import-time code runs only once per
    process; a module another witness imported would warn no more)."""
    cmd = [sys.executable, *_flags(), os.path.abspath(__file__), "--warns", json.dumps(spec)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Env(f"timed out after {timeout:.0f} s") from None
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise Env(f"the fresh interpreter failed: {done.stderr.strip()[-300:]}")
    got = json.loads(lines[-1])
    if got["outcome"] == "fail":
        raise Fail(got["detail"])
    if got["outcome"] == "env":
        raise Env(got["detail"])
    return got["data"]


def _flags() -> list[str]:
    flags = []
    if sys.flags.isolated:
        flags.append("-I")
    if sys.flags.no_site:
        flags.append("-S")
    return flags


def _one(spec: dict, timeout: float) -> dict:
    check = spec["check"]
    try:
        if check == "resolve":
            obj = resolve(
                spec["path"],
                module_only=bool(spec.get("module_only")),
                reads=int(spec.get("reads", 0)),
            )
            data = {"type": type(obj).__name__}
        elif check in ("bind", "positions"):
            data = bind(spec)
        elif check == "member":
            data = member(spec)
        elif check == "marker":
            data = marker(spec)
        elif check == "default":
            data = default(spec)
        elif check == "params":
            data = params(spec)
        elif check == "warns":
            data = warns(spec, timeout)
        else:
            raise Env(f"no witness check {check!r}")
    except Fail as exc:
        return {"outcome": "fail", "detail": str(exc)}
    except Env as exc:
        return {"outcome": "env", "detail": str(exc)}
    except Timeout:
        return {"outcome": "env", "detail": f"timed out after {timeout:.0f} s"}
    except Exception as exc:  # noqa: BLE001 - the witness itself tripped: it cannot tell
        return {"outcome": "env", "detail": f"the witness could not run: {_short(exc)}"}
    return {"outcome": "ok", "data": data}


def _alarm(_signum: int, _frame: object) -> None:
    raise Timeout


def main(argv: list[str]) -> int:
    if argv[:1] == ["--warns"]:
        spec = json.loads(argv[1])
        ROOTS[:] = spec.get("roots", [])
        sys.path[:0] = spec.get("sys_path", [])
        try:
            got = {"outcome": "ok", "data": warns_here(spec)}
        except Fail as exc:
            got = {"outcome": "fail", "detail": str(exc)}
        except Env as exc:
            got = {"outcome": "env", "detail": str(exc)}
        print(json.dumps(got))
        return 0
    with open(argv[0], encoding="utf-8") as fh:
        batch = json.load(fh)
    ROOTS[:] = batch.get("roots", [])
    sys.path[:0] = batch.get("sys_path", [])
    timeout = float(batch.get("timeout", 60))
    signal.signal(signal.SIGALRM, _alarm)
    with open(argv[1], "a", encoding="utf-8") as out:
        for spec in batch["witnesses"]:
            spec = {**spec, "roots": ROOTS, "sys_path": batch.get("sys_path", [])}
            signal.alarm(max(1, int(timeout)))
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    got = _one(spec, timeout)
            except Timeout:
                got = {"outcome": "env", "detail": f"timed out after {timeout:.0f} s"}
            finally:
                signal.alarm(0)
            got["id"] = spec["id"]
            out.write(json.dumps(got) + "\n")
            out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
