"""What a route handler returns: a model, a dict literal's keys, an empty ``Response``, a stream.

Read from ``response_model=``, the return annotation and the handler's own ``return``
statements. A returned name is typed by the ``isinstance`` test around the ``return`` or by the
return annotation of the method that produced it (one call deep, through the annotated return
type of the function that produced the receiver). A status code that is not a literal 2xx, or a
model the decorator lists under an error status, makes an *error* shape.
"""

from __future__ import annotations

import ast
from typing import cast

from driftcheck.http.hostcode import Def, HostCode, dotted_name, keyword, literal_str
from driftcheck.http.models import ModelReader
from driftcheck.http.surface_model import ResponseShape

_STREAMS = ("StreamingResponse", "EventSourceResponse")
_OTHER_BODIES = ("PlainTextResponse", "HTMLResponse", "FileResponse", "RedirectResponse")


class ResponseReader:
    """Response shapes of one handler."""

    def __init__(self, code: HostCode, models: ModelReader) -> None:
        self.code = code
        self.models = models

    def shapes(self, handler: Def, decorator: ast.Call | None) -> tuple[ResponseShape, ...]:
        # A route handler is a function.
        module, func = handler.module, cast(ast.FunctionDef | ast.AsyncFunctionDef, handler.node)
        file = self.code.file(module)
        errors = self._error_models(module, decorator)
        declared = keyword(decorator, "response_model") if decorator is not None else None
        cls = self.models.model_of(module, declared) if declared is not None else None
        if cls is None:
            cls = self.models.model_of(module, getattr(func, "returns", None))
        if cls is not None:
            self.models.read(cls)
            return (ResponseShape("model", cls.qualname, (), file, func.lineno),)
        out: list[ResponseShape] = []
        state = _State(module, {}, {})
        self._walk(func.body, state, out, file, errors)
        if not out:
            out.append(ResponseShape("unknown", None, (), file, func.lineno))
        return tuple(dict.fromkeys(out))

    def _error_models(self, module: str, decorator: ast.Call | None) -> set[str]:
        """Models the decorator's ``responses={status: {"model": X}}`` lists under 4xx/5xx."""
        out: set[str] = set()
        table = keyword(decorator, "responses") if decorator is not None else None
        if not isinstance(table, ast.Dict):
            return out
        for key, value in zip(table.keys, table.values, strict=False):
            status = _status(key)
            if status is None or status < 400 or not isinstance(value, ast.Dict):
                continue
            for k, v in zip(value.keys, value.values, strict=False):
                if literal_str(k) == "model":
                    cls = self.models.model_of(module, v)
                    if cls is not None:
                        out.add(cls.qualname)
        return out

    def _walk(self, body: list[ast.stmt], state: _State, out: list, file: str, errors: set) -> None:
        for stmt in body:
            if isinstance(stmt, ast.Return):
                delegated = self._delegated(_unawait(stmt.value), state, errors)
                if delegated:
                    out.extend(delegated)
                else:
                    out.append(self._shape(stmt.value, state, file, stmt.lineno, errors))
            elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                if isinstance(stmt.targets[0], ast.Name):
                    state.assigned[stmt.targets[0].id] = stmt.value
            elif isinstance(stmt, ast.If):
                narrowed = dict(state.narrow)
                narrowed.update(_isinstance_of(stmt.test))
                narrow_state = _State(state.module, narrowed, state.assigned, state.depth)
                self._walk(stmt.body, narrow_state, out, file, errors)
                self._walk(stmt.orelse, state, out, file, errors)
            elif isinstance(stmt, ast.For | ast.AsyncFor | ast.While | ast.With | ast.AsyncWith):
                self._walk(stmt.body, state, out, file, errors)
            elif isinstance(stmt, ast.Try):
                for part in (
                    stmt.body,
                    *(h.body for h in stmt.handlers),
                    stmt.orelse,
                    stmt.finalbody,
                ):
                    self._walk(part, state, out, file, errors)

    def _shape(
        self, value: ast.AST | None, state: _State, file: str, line: int, errors: set
    ) -> ResponseShape:
        def shape(kind: str, model: str | None = None, keys: tuple = (), error: bool = False):
            return ResponseShape(kind, model, keys, file, line, error or model in errors)

        value = _unawait(value)
        if value is None or (isinstance(value, ast.Constant) and value.value is None):
            return shape("empty")
        if isinstance(value, ast.Dict):
            return shape("keys", keys=_keys(value))
        if isinstance(value, ast.Call):
            name = (dotted_name(value.func) or "").rsplit(".", 1)[-1]
            error = _error_status(value)
            if name.endswith("JSONResponse"):
                content = keyword(value, "content") or (value.args[0] if value.args else None)
                inner = self._shape(_dumped(content), state, file, line, errors)
                return ResponseShape(
                    inner.kind, inner.model, inner.keys, file, line, error or inner.error
                )
            if name in _STREAMS:
                return shape("stream", error=error)
            if name in _OTHER_BODIES:
                return shape("unknown", error=error)
            if name == "Response":
                body = keyword(value, "content") or (value.args[0] if value.args else None)
                return shape("empty" if body is None else "unknown", error=error)
            cls = self.code.resolve_class(state.module, value.func)
            if cls is not None and self.models.is_body_model(cls):
                self.models.read(cls)
                return shape("model", cls.qualname)
            models = self._produced(value, state)
            if len(models) == 1:
                return shape("model", models[0])
            return shape("unknown")
        if isinstance(value, ast.Name):
            if value.id in state.narrow:
                cls = self.models.model_of(state.module, state.narrow[value.id])
                if cls is not None:
                    self.models.read(cls)
                    return shape("model", cls.qualname)
            produced = state.assigned.get(value.id)
            if produced is not None and not isinstance(produced, ast.Name):
                rest = {k: v for k, v in state.assigned.items() if k != value.id}
                return self._shape(
                    produced, _State(state.module, state.narrow, rest), file, line, errors
                )
        return shape("unknown")

    def _delegated(self, call: ast.AST | None, state: _State, errors: set) -> list[ResponseShape]:
        """``return await other_handler(request)``: that function's shapes (two calls deep)."""
        if not isinstance(call, ast.Call):
            return []
        name = dotted_name(call.func)
        found = self.code.resolve(state.module, name) if name else None
        if not isinstance(found, Def) or found.kind not in ("FunctionDef", "AsyncFunctionDef"):
            return []
        func = cast(ast.FunctionDef | ast.AsyncFunctionDef, found.node)  # by its kind
        if state.depth >= 2 or self.models.model_of(found.module, func.returns):
            return []
        out: list[ResponseShape] = []
        inner = _State(found.module, {}, {}, state.depth + 1)
        self._walk(func.body, inner, out, self.code.file(found.module), errors)
        return out

    def _produced(self, call: ast.Call, state: _State) -> list[str]:
        """Models a method's return annotation names (``await handler.create_x(...)``, with
        ``handler = getter(...)`` whose own return annotation names the handler's class)."""
        func = call.func
        if not isinstance(func, ast.Attribute) or not isinstance(func.value, ast.Name):
            return []
        source = state.assigned.get(func.value.id)
        if not isinstance(source, ast.Call):
            return []
        getter = self.code.resolve(state.module, dotted_name(source.func) or "")
        if not isinstance(getter, Def) or getter.kind not in ("FunctionDef", "AsyncFunctionDef"):
            return []
        getter_node = cast(ast.FunctionDef | ast.AsyncFunctionDef, getter.node)  # by its kind
        from driftcheck.http.models import _class_names

        for expr in _class_names(getter_node.returns):
            cls = self.code.resolve_class(getter.module, expr)
            if cls is None:
                continue
            method = self.code.method(cls, func.attr)
            if method is not None:
                found = self.models.models_in(method.module, getattr(method.node, "returns", None))
                for m in found:
                    self.models.read(m)
                return [m.qualname for m in found]
        return []


class _State:
    def __init__(self, module: str, narrow: dict, assigned: dict, depth: int = 0) -> None:
        self.module = module
        self.narrow = narrow
        self.assigned = assigned
        self.depth = depth


def _unawait(value: ast.AST | None) -> ast.AST | None:
    return value.value if isinstance(value, ast.Await) else value


def _dumped(content: ast.AST | None) -> ast.AST | None:
    """``x.model_dump()`` / ``x.dict()`` / ``jsonable_encoder(x)``: ``x``."""
    if isinstance(content, ast.Call):
        if isinstance(content.func, ast.Attribute) and content.func.attr in (
            "model_dump",
            "dict",
            "model_dump_json",
        ):
            return content.func.value
        if (dotted_name(content.func) or "").endswith("jsonable_encoder") and content.args:
            return content.args[0]
    return content


def _keys(value: ast.Dict) -> tuple[str, ...]:
    return tuple(k for key in value.keys if (k := literal_str(key)) is not None)


def _isinstance_of(test: ast.AST) -> dict[str, ast.AST]:
    if (
        isinstance(test, ast.Call)
        and isinstance(test.func, ast.Name)
        and test.func.id == "isinstance"
        and len(test.args) == 2
        and isinstance(test.args[0], ast.Name)
    ):
        return {test.args[0].id: test.args[1]}
    return {}


def _status(node: ast.AST | None) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    name = dotted_name(node) if node is not None else None
    if name:  # HTTPStatus.BAD_REQUEST.value / status.HTTP_400_BAD_REQUEST
        for part in name.split("."):
            digits = "".join(c for c in part if c.isdigit())
            if len(digits) == 3:
                return int(digits)
            if part.isupper() and part in _STATUS_NAMES:
                return _STATUS_NAMES[part]
    return None


_STATUS_NAMES = {
    "OK": 200,
    "CREATED": 201,
    "ACCEPTED": 202,
    "NO_CONTENT": 204,
    "BAD_REQUEST": 400,
    "UNAUTHORIZED": 401,
    "FORBIDDEN": 403,
    "NOT_FOUND": 404,
    "CONFLICT": 409,
    "UNPROCESSABLE_ENTITY": 422,
    "INTERNAL_SERVER_ERROR": 500,
    "NOT_IMPLEMENTED": 501,
    "SERVICE_UNAVAILABLE": 503,
}


def _error_status(call: ast.Call) -> bool:
    """``status_code=`` present and not a 2xx the code spells out."""
    code = keyword(call, "status_code")
    if code is None:
        return False
    status = _status(code)
    return status is None or not 200 <= status < 300
