"""Receiver inference: which host class an expression in the client evaluates to.

A first pass over the whole client (:class:`ClientIndex`) records every class, its bases, the
``self.x = …`` assignments of its methods and the return annotations of its functions. Then
:class:`TypeInferrer` answers "what is this expression?" from constructor calls, annotations
(quoted ones and those of locals included), ``self`` attributes, module-level names of other
client modules, host return annotations (stubs included) or the one class an unannotated host
function's returns build (a ``return param.hook(...)`` in a ``try`` that catches AttributeError
left aside when no class of the host's Python files or of the client defines ``hook``), host
attribute annotations and descriptors (an accessor namespace
that ``__get__`` builds from the class it was given). ``super().m`` is what the MRO reaches
after the method's class (:meth:`TypeInferrer.super_owner`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import cast

from driftcheck.client.index import (
    ClassInfo,
    ClientIndex,
    FunctionInfo,
    ModuleInfo,
    TypeRef,
    assigns_class_attr,
    first_param,
)
from driftcheck.gates import Gate
from driftcheck.host.api import UNKNOWN, Found, HostAPI
from driftcheck.host.served_model import ServedSpec


@dataclass(frozen=True)
class Bindings:
    """What binding rules tell receiver inference about one host."""

    #: Keyword -> host class that the client class named by that keyword's value is mixed into.
    mixins: dict[str, str] = field(default_factory=dict)
    #: Host attribute path -> the host class it holds at run time (annotations do not say).
    attributes: dict[str, str] = field(default_factory=dict)
    #: Host method path -> the host class whose method its first (string) argument names.
    dispatch: dict[str, str] = field(default_factory=dict)
    #: Where the host keeps the models it serves (``[binding.served_model]``), if it does.
    served: ServedSpec | None = None


_UNSET = object()


class TypeInferrer:
    """Infers host types of client expressions against one host API (usually the baseline)."""

    def __init__(self, index: ClientIndex, host: HostAPI, bindings: Bindings | None = None) -> None:
        self.index = index
        self.host = host
        self._busy: set[ast.AST] = set()
        #: Inferred classes, by ``id()`` of the scope (the function, or None: scopes live as
        #: long as the index), then by expression: keyed by the nodes themselves, not by a
        #: tuple of two ``id()`` ints per entry (transformers: 407,000 entries, 50 MB at the
        #: scan's peak); one table per scope, as most scopes ask about a few expressions.
        self._memo: dict[int, dict[ast.AST, TypeRef | None]] = {}
        #: One :class:`TypeRef` per class for the results kept (200,000 equal ones in
        #: transformers' memo otherwise).
        self._refs: dict[TypeRef, TypeRef] = {}
        self._implying = 0  # how many :meth:`implied_bases` are being worked out
        #: What binding rules say about this host (mix-ins, runtime attribute types).
        self.bindings = bindings or Bindings()
        #: Host attribute path -> runtime class, from binding rules.
        self.attribute_overrides = self.bindings.attributes
        #: The classes those bindings name.
        self.bound_classes = set(self.attribute_overrides.values())
        #: ``id()`` of values assigned in the arms of ``if``\ s on the host -> the arm's gate.
        self.value_gates: dict[int, Gate] = {}

    # -- entry points ----------------------------------------------------------------------
    def infer(self, expr: ast.AST, func: FunctionInfo | None, module: ModuleInfo) -> TypeRef | None:
        """The class ``expr`` evaluates to in ``func`` (None when unknown).

        Results are memoised per expression and scope (the nodes live as long as the index):
        without it, long chains of local assignments are re-inferred at every use.
        """
        memo = self._memo.get(id(func))
        if memo is None:
            memo = self._memo[id(func)] = {}
        got = memo.get(expr, _UNSET)
        if got is not _UNSET:  # one look-up: asked 600,000 times in transformers
            return cast("TypeRef | None", got)
        if expr in self._busy:
            return None
        self._busy.add(expr)
        try:
            if id(expr) in self.index.annotations:  # ``x: Frame = ...``: the annotation names it
                result = self.annotation_type(expr, module)
            else:
                result = self._infer(expr, func, module)
        finally:
            self._busy.discard(expr)
        if result is not None:
            result = self._refs.setdefault(result, result)
        memo[expr] = result
        return result

    def host_class(self, ref: TypeRef | None) -> Found | None:
        """The host class a type stands for (a client class's first host base)."""
        if ref is None:
            return None
        if ref.kind == "host":
            found = self.host.resolve(ref.path)
            return found if isinstance(found, Found) else None
        memo: dict[str, Found | None] = self.__dict__.setdefault("_host_class", {})
        if ref.path in memo:
            return memo[ref.path]
        got = None
        for base in self.host_bases(ref.path):
            found = self.host.resolve(base)
            if isinstance(found, Found):
                got = found
                break
        if not self._implying:  # the bases are final (see :meth:`host_bases`)
            memo[ref.path] = got
        return got

    def _bases(
        self, client_class: str, *, mixed: bool, ordered: bool = False
    ) -> Iterator[tuple[str, ClassInfo | None]]:
        """A client class and its bases, breadth first, each once: (name, its client class or
        None for a class outside the client); ``mixed``: with the host classes it is mixed into
        (``ordered``: of a mix-in, only those it comes before: :meth:`implied_bases`)."""
        todo, seen = [client_class], set()
        while todo:
            name = todo.pop(0)
            if name in seen:
                continue
            seen.add(name)
            info = self.index.classes.get(name)
            yield name, info
            if info is not None:
                implied = self.implied_bases(name, ordered=ordered) if mixed else []
                todo.extend(info.bases + (info.extra_bases + implied if mixed else []))

    def host_bases(
        self, client_class: str, *, overriding: bool = False, mixed: bool = True
    ) -> list[str]:
        """Host classes a client class derives from, directly or through client classes (and
        for a mix-in, the host classes of every class it is mixed into: :meth:`implied_bases`;
        ``overriding``: only those whose members the mix-in's own come before; ``mixed=False``:
        its own bases only, those whose class machinery builds it). Read once per class (every
        member read off an instance asks); a new list each time."""
        memo: dict[tuple[str, bool, bool], list[str]] = self.__dict__.setdefault("_hosts", {})
        key = (client_class, overriding, mixed)
        got = memo.get(key)
        if got is None:
            got = [
                name
                for name, info in self._bases(client_class, mixed=mixed, ordered=overriding)
                if info is None and self.host.owns(name)
            ]
            if not self._implying:  # not kept while a mix-in's bases are worked out (a cycle
                memo[key] = got  # reads a provisional [] for the class it started from)
        return list(got)

    def annotated_in_bases(self, client_class: str) -> set[str]:
        """Names the client class annotates in its body, and those a client base of it
        annotates as a ``ClassVar`` (a class attribute, never a field)."""
        return {
            stmt.target.id
            for name, info in self._bases(client_class, mixed=False)
            if info is not None
            for stmt in info.node.body
            if isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and (name == client_class or self._class_var(stmt.annotation))
        }

    def _class_var(self, annotation: ast.expr) -> bool:
        """Whether an annotation names ``ClassVar`` (unparsed once: every subclass asks)."""
        memo: dict[int, bool] = self.__dict__.setdefault("_class_vars", {})
        if id(annotation) not in memo:
            memo[id(annotation)] = "ClassVar" in ast.unparse(annotation)
        return memo[id(annotation)]

    def implied_bases(self, client_class: str, *, ordered: bool = False) -> list[str]:
        """For a client mix-in with no host base of its own: the host classes that every
        client class deriving from it also derives from (``class M(Mixin, Engine)``), so
        ``self`` in the mix-in's methods is one of them; [] where one class it is mixed into
        has none. ``ordered``: only the bases it comes before (``class M(Engine, Mixin)``:
        Engine's members win over the mix-in's, which override nothing of it)."""
        memo = self.__dict__.setdefault("_implied", {})
        key = (client_class, ordered)
        if key in memo:
            return memo[key]
        memo[key] = []  # a class that reaches itself again stops here
        self._implying += 1
        try:
            return self._implied_of(client_class, ordered, memo, key)
        finally:
            self._implying -= 1

    def _implied_of(
        self, client_class: str, ordered: bool, memo: dict, key: tuple[str, bool]
    ) -> list[str]:
        subs = self._subclasses().get(client_class, [])
        info = self.index.classes.get(client_class)
        if not subs or info is None or info.extra_bases or self._own_host_bases(info):
            return []
        common: set[str] | None = None
        for sub in subs:
            at = sub.bases.index(client_class)
            others = sub.bases[at + 1 :] if ordered else sub.bases[:at] + sub.bases[at + 1 :]
            found: set[str] = set()
            for base in others:
                if base in self.index.classes:
                    found.update(self.host_bases(base, overriding=ordered))
                elif self.host.owns(base):
                    found.add(base)
            found.update(self.implied_bases(sub.qualname, ordered=ordered))
            common = found if common is None else common & found
            if not common:
                return []
        memo[key] = sorted(common or ())
        return memo[key]

    def _own_host_bases(self, info: ClassInfo) -> bool:
        """The class derives from a host class itself (``object``, ``ABC`` and other classes
        outside the host do not count)."""
        return any(
            base not in self.index.classes and self.host.owns(base)
            for base, _ in self._bases(info.qualname, mixed=False)
        )

    # -- super() ---------------------------------------------------------------------------
    def super_owner(
        self, call: ast.AST, func: FunctionInfo | None, module: ModuleInfo, member: str
    ) -> TypeRef | None:
        """What ``super().member`` (or ``super(Cls, self).member``) in method ``func`` reaches:
        ``TypeRef("host", H)`` for the host class whose MRO defines it (for ``__init__``: the
        host class whose constructor runs), ``TypeRef("client", C)`` for a client class that
        defines it first. None where the MRO does not say: a base outside client and host
        before it, a base driftcheck cannot name, a client class made by a decorator, or a
        mix-in whose subclasses reach different classes."""
        start = self._super_start(call, func, module)
        if start is None or func is None or func.class_name is None:
            return None
        found: set[TypeRef] = set()
        for runtime in [func.class_name, *self._all_subclasses(func.class_name)]:
            lin = self._linear(runtime)
            if lin is None or start not in lin:
                return None
            got = self._next_defining(lin[lin.index(start) + 1 :], member)
            if got is UNKNOWN:
                return None
            if isinstance(got, TypeRef):
                found.add(got)
        return found.pop() if len(found) == 1 else None

    def _super_start(
        self, call: ast.AST, func: FunctionInfo | None, module: ModuleInfo
    ) -> str | None:
        """The class after which ``super(...)`` looks (None: not a ``super`` call of a method)."""
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
            return None
        if call.func.id != "super" or module.qualified(call.func) or call.keywords:
            return None
        if func is None or func.class_name is None or "staticmethod" in _decorators(func):
            return None
        if not call.args:
            return func.class_name
        if len(call.args) != 2:
            return None
        first, second = call.args
        if not (isinstance(second, ast.Name) and second.id == first_param(func.node)):
            return None
        named = [n for n in module.qualified(first) if n in self.index.classes]
        return named[0] if named else None

    def _next_defining(self, chain: list[str], member: str) -> TypeRef | object | None:
        """The first class of ``chain`` (an MRO's tail) that defines ``member``; None when none
        does; UNKNOWN when a class in between cannot be read."""
        for name in chain:
            info = self.index.classes.get(name)
            if info is not None:
                if member.startswith("__") and info.node.decorator_list:
                    return UNKNOWN  # a decorator (``@dataclass``) may make it
                if member in info.methods or assigns_class_attr(info.node, member):
                    return TypeRef("client", name)
                continue
            if name in _NO_MEMBERS:
                continue
            if not self.host.owns(name):
                return UNKNOWN
            cls = self.host.resolve(name)
            if not isinstance(cls, Found) or cls.kind != "class":
                return UNKNOWN
            # the class by the name the client gave it, not its home on this release: the
            # client never names the home, which may move while the name stays
            if member == "__init__":
                return TypeRef("host", name)
            got = self.host.class_member(cls, member)
            if isinstance(got, Found):
                return TypeRef("host", name)
            if got is not None:
                return UNKNOWN
        return None

    def _linear(self, name: str) -> list[str] | None:
        """A class's MRO as far as the client shows it (C3 over client classes; a class outside
        the client is one entry whose own MRO the host model walks); None where a base cannot
        be named or the client mixes host classes into it."""
        memo: dict[str, list[str] | None] = self.__dict__.setdefault("_lin", {})
        if name in memo:
            return memo[name]
        memo[name] = None  # a class that reaches itself again is unknown
        info = self.index.classes.get(name)
        if info is None:
            memo[name] = [name]
            return memo[name]
        if info.extra_bases:
            return None
        heads = []
        for i, base in enumerate(info.node.bases):
            node = base.value if isinstance(base, ast.Subscript) else base
            names = info.module.qualified(node)
            if names:
                heads.append(names[0])
            elif isinstance(node, ast.Name):
                heads.append(node.id if node.id == "object" else f"builtins.{node.id}")
            else:
                heads.append(f"<base {i} of {name}>")
        seqs = []
        for head in heads:
            lin = self._linear(head)
            if lin is None:
                return None
            seqs.append(lin)
        merged = _c3([*seqs, heads])
        memo[name] = [name, *merged] if merged is not None else None
        return memo[name]

    def _all_subclasses(self, name: str) -> list[str]:
        """Every client class deriving from ``name``, directly or not."""
        out: list[str] = []
        seen = {name}  # a set beside the list: a base of thousands of classes (transformers)
        todo = [name]
        while todo:
            for sub in self._subclasses().get(todo.pop(), []):
                if sub.qualname not in seen:
                    seen.add(sub.qualname)
                    out.append(sub.qualname)
                    todo.append(sub.qualname)
        return out

    def _subclasses(self) -> dict[str, list[ClassInfo]]:
        """Client class -> the client classes that name it as a direct base."""
        cache = self.__dict__.get("_subs")
        if cache is None:
            cache = {}
            for info in self.index.classes.values():
                for base in dict.fromkeys(info.bases):
                    cache.setdefault(base, []).append(info)
            self.__dict__["_subs"] = cache
        return cache

    # -- internals -------------------------------------------------------------------------
    def _infer(
        self, expr: ast.AST, func: FunctionInfo | None, module: ModuleInfo
    ) -> TypeRef | None:
        if isinstance(expr, ast.Call):
            return self._call_result(expr, func, module)
        if isinstance(expr, ast.Name):
            return self._name(expr, func, module)
        if isinstance(expr, ast.Attribute):
            owner = self.infer(expr.value, func, module)
            if owner is not None:
                return self.attribute_type(owner, expr.attr)
            return self._qualified_class(expr, module) or self._client_global(expr, module)
        if isinstance(expr, ast.NamedExpr):
            return self.infer(expr.value, func, module)
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.BitOr):
            return self.infer(expr.left, func, module) or self.infer(expr.right, func, module)
        if isinstance(expr, ast.Subscript):
            head = module.qualified(expr.value)
            if head and head[0] in ("typing.Optional",):
                el = expr.slice
                if isinstance(el, ast.Tuple):
                    el = el.elts[0] if el.elts else el
                return self.infer(el, func, module)
        return None

    def _qualified_class(self, expr: ast.AST, module: ModuleInfo) -> TypeRef | None:
        for name in module.qualified(expr):
            if name in self.index.classes:
                return TypeRef("client", name)
            if self.host.owns(name):
                found = self.host.resolve(name)
                if isinstance(found, Found) and found.kind == "class":
                    return TypeRef("host", found.path)
        return None

    def _name(
        self, expr: ast.Name, func: FunctionInfo | None, module: ModuleInfo
    ) -> TypeRef | None:
        name = expr.id
        scope = func
        while scope is not None:
            if name in scope.params:
                first = first_param(scope.node)
                if scope.class_name and name == first and "staticmethod" not in _decorators(scope):
                    if scope.bound_self:
                        return scope.bound_self[0]
                    return TypeRef("client", scope.class_name)
                if scope.bound_self and name == first:
                    return scope.bound_self[0]
                ann = scope.params[name]
                return self.annotation_type(ann, scope.module) if ann is not None else None
            if name in scope.locals:
                for value in scope.locals[name]:
                    got = self.infer(value, scope, scope.module)
                    if got is not None:
                        return got
                return None
            scope = self._enclosing(scope)
        if name in module.globals:
            for value in module.globals[name]:
                got = self.infer(value, None, module)
                if got is not None:
                    return got
            return None
        # A client class by name (``MyEngine.method``): its members are looked up as on an
        # instance, through the class's host bases.
        got = self._qualified_class(expr, module)
        if got is not None:
            return got if got.kind == "client" else None
        return self._client_global(expr, module)

    def _client_global(self, expr: ast.AST, module: ModuleInfo, depth: int = 0) -> TypeRef | None:
        """A module-level name of another client module, imported (``from app.state import
        ENGINE``, ``state.ENGINE``): what it is assigned there (re-exports followed)."""
        for name in module.qualified(expr):
            home, _, attr = name.rpartition(".")
            other = self.index.modules.get(home)
            if other is None or other is module:
                continue
            if attr in other.globals:
                for value in other.globals[attr]:
                    got = self.infer(value, None, other)
                    if got is not None:
                        return got
                return None
            if attr in other.names.imports and depth < 5:
                return self._client_global(ast.Name(id=attr, ctx=ast.Load()), other, depth + 1)
        return None

    def inherited_host_init(self, client_class: str) -> str | None:
        """The host class whose ``__init__`` a client class's constructor is: when neither the
        class nor a client class between it and that host base defines ``__init__`` or
        ``__new__`` or is decorated (a dataclass makes its own)."""
        for name, info in self._bases(client_class, mixed=False):
            if info is None:
                found = self.host.resolve(name) if self.host.owns(name) else None
                return found.path if isinstance(found, Found) else None
            if {"__init__", "__new__"} & set(info.methods) or info.node.decorator_list:
                return None
            if len(info.bases) != len(info.node.bases) or info.node.keywords:
                return None  # a base driftcheck cannot name, or a metaclass: not certain
        return None

    def _enclosing(self, func: FunctionInfo) -> FunctionInfo | None:
        parent = func.qualname.rsplit(".", 1)[0]
        return self.index.functions.get(parent)

    def annotation_type(self, ann: ast.AST, module: ModuleInfo) -> TypeRef | None:
        """The class an annotation names (``X``, ``X | None``, ``Optional[X]``, ``Union[...]``)."""
        if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
            return self.annotation_type(ann.left, module) or self.annotation_type(ann.right, module)
        if isinstance(ann, ast.Subscript):
            head = module.qualified(ann.value)
            if head and head[0] in ("typing.Optional", "typing.Union"):
                elements = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
                for el in elements:
                    got = self.annotation_type(el, module)
                    if got:
                        return got
            return None
        if isinstance(ann, ast.Name | ast.Attribute):
            return self._qualified_class(ann, module)
        if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
            try:  # a quoted annotation (``df: "pd.DataFrame"``)
                parsed = ast.parse(ann.value.strip(), mode="eval").body
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                return None
            return (
                None if isinstance(parsed, ast.Constant) else self.annotation_type(parsed, module)
            )
        return None

    def _call_result(
        self, call: ast.Call, func: FunctionInfo | None, module: ModuleInfo
    ) -> TypeRef | None:
        callee = call.func
        cls = self._qualified_class(callee, module)
        if cls is not None:
            return cls
        for name in module.qualified(callee):
            if self.host.owns(name):
                found = self.host.resolve(name)
                if isinstance(found, Found):
                    return self.host_return(found)
            if name in self.index.functions:
                return self._client_return(self.index.functions[name])
        if isinstance(callee, ast.Attribute):
            owner = self.infer(callee.value, func, module)
            if owner is None:
                return None
            method = self.member_function(owner, callee.attr)
            if isinstance(method, FunctionInfo):
                return self._client_return(method)
            if isinstance(method, Found):
                return self.host_return(method)
        return None

    def host_return(self, found: Found) -> TypeRef | None:
        """The host class a call of host function ``found`` returns: the one its return
        annotation (or its stub's) names, else the one every ``return`` of its body builds
        (``return Frame(...)``, ``return self`` in a method, ``return cls(...)``)."""
        if found.kind != "function":
            return None
        ret = self.host.return_class(found) or self._built(found)
        return TypeRef("host", ret.path) if ret else None

    def _built(self, found: Found) -> Found | None:
        """The host class every ``return`` of an unannotated host function builds (a duck-typed
        hook no class defines, ``try: return im.getdraw(mode) except AttributeError:``, left out:
        the handler's return is the one that runs)."""
        memo: dict[str, Found | None] = self.__dict__.setdefault("_built_memo", {})
        if found.path in memo:
            return memo[found.path]
        memo[found.path] = None
        node = self.host.def_node(found)
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.returns:
            return None
        owner = found.path.rsplit(".", 1)[0]
        labels: set[str] = set(getattr(found.obj, "labels", ()))
        first = first_param(node)
        module = found.obj.module.path
        made: set[str] = set()
        hooks = _hook_returns(node)
        for value in _returned(node):
            if isinstance(value, ast.Constant) and value.value is None:
                continue
            if id(value) in hooks and not self._anyone_defines(hooks[id(value)]):
                continue  # ``try: return im.getdraw(mode) except AttributeError: ...``
            if isinstance(value, ast.Name) and value.id == first and "staticmethod" not in labels:
                if "classmethod" in labels:
                    return None
                made.add(owner)  # ``return self``
                continue
            if not isinstance(value, ast.Call):
                return None
            callee = value.func
            if isinstance(callee, ast.Name) and callee.id == first and "classmethod" in labels:
                made.add(owner)  # ``return cls(...)``
                continue
            if not isinstance(callee, ast.Name | ast.Attribute) or _rooted_at(callee, first):
                return None
            got = self.host.resolve(f"{module}.{ast.unparse(callee)}")
            if not isinstance(got, Found) or got.kind != "class":
                return None
            made.add(got.path)
        if len(made) != 1:
            return None
        cls = self.host.resolve(made.pop())
        memo[found.path] = cls if isinstance(cls, Found) and cls.kind == "class" else None
        return memo[found.path]

    def _anyone_defines(self, name: str) -> bool:
        """Whether a class of the host's Python files or of the client defines member ``name``
        (a method or a class attribute): the hook an object may offer a host function."""
        memo: dict[str, bool] = self.__dict__.setdefault("_defines_memo", {})
        if name in memo:
            return memo[name]
        found = any(
            name in info.methods or _class_sets(info.node, name)
            for info in self.index.classes.values()
        )
        texts = self.host.source_texts()
        for rel in texts if not found else ():
            text = texts[rel]
            if name not in text:
                continue
            try:
                tree = ast.parse(text)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                found = True  # unreadable: it may define it
                break
            if any(isinstance(n, ast.ClassDef) and _class_sets(n, name) for n in ast.walk(tree)):
                found = True
                break
        memo[name] = found
        return found

    def _client_return(self, func: FunctionInfo) -> TypeRef | None:
        ann = func.node.returns
        return self.annotation_type(ann, func.module) if ann is not None else None

    def _value_class(self, attr: Found) -> Found | None:
        """The class an unannotated host attribute is built from (``self.x = Cls(...)``); for
        a descriptor (a class attribute whose class defines ``__get__``), what reading it off
        an instance gives: :meth:`_descriptor_class`."""
        value = getattr(attr.obj, "value", None)
        func = getattr(value, "function", None)
        path = getattr(func, "canonical_path", None)
        if isinstance(path, str) and self.host.owns(path):
            got = self.host.resolve(path)
            if isinstance(got, Found) and got.kind == "class":
                getter = self.host.class_member(got, "__get__")
                labels = getattr(attr.obj, "labels", ())
                if "instance-attribute" in labels and "class-attribute" not in labels:
                    return got  # a descriptor read off an instance's dict is itself
                if getter is UNKNOWN:
                    return None
                if isinstance(getter, Found):
                    return self._descriptor_class(got, getter, value)
                return got
        return None

    def _descriptor_class(self, desc: Found, getter: Found, value: object) -> Found | None:
        """The class of what descriptor ``desc``'s ``__get__`` returns on an instance: its
        return annotation's class, or an accessor it builds from a class it was given
        (``str = Accessor("str", StringMethods)`` whose ``__get__`` returns
        ``self._accessor(obj)``, ``self._accessor`` set from that ``__init__`` parameter)."""
        ret = self.host.return_class(getter)
        if ret is not None:
            return ret
        node = self.host.def_node(getter)
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return None
        slot = _built_from_self_attr(node)
        init = self.host.class_member(desc, "__init__")
        init_node = self.host.def_node(init) if isinstance(init, Found) else None
        if slot is None or not isinstance(init_node, ast.FunctionDef):
            return None
        param = _param_stored(init_node, slot)
        if param is None:
            return None
        params = [a.arg for a in (*init_node.args.posonlyargs, *init_node.args.args)][1:]
        given = None
        for i, arg in enumerate(getattr(value, "arguments", []) or []):
            name = getattr(arg, "name", None)
            if hasattr(arg, "value") and name is not None:  # a keyword argument
                if name == param:
                    given = arg.value
            elif i < len(params) and params[i] == param:
                given = arg
        path = getattr(given, "canonical_path", None)
        if not isinstance(path, str) or not self.host.owns(path):
            return None
        cls = self.host.resolve(path)
        if not isinstance(cls, Found) or cls.kind != "class":
            return None
        if self.host.defined_in_host_mro(cls, "__new__") is not None:
            return None  # its ``__new__`` may build another class (``Combined...Properties``)
        return cls

    def member_function(self, owner: TypeRef, name: str) -> FunctionInfo | Found | None:
        """The client method or host member ``name`` of a type."""
        if owner.kind == "client":
            info = self.index.classes.get(owner.path)
            if info is not None and name in info.methods:
                return info.methods[name]
            for base in info.bases if info else []:
                if base in self.index.classes:
                    got = self.member_function(TypeRef("client", base), name)
                    if got is not None:
                        return got
        cls = self.host_class(owner)
        if cls is not None:
            found = self.host.class_member(cls, name)
            return found if isinstance(found, Found) else None
        return None

    def alternatives(
        self, expr: ast.AST, func: FunctionInfo | None, module: ModuleInfo
    ) -> list[tuple[TypeRef, Gate]]:
        r"""The types a name or ``self.x`` has in the arms of ``if``\ s on the host, each under
        its arm's gate, when every value it is assigned runs under one and they differ."""
        values: list[tuple[ast.expr, FunctionInfo | None, ModuleInfo]] = []
        if isinstance(expr, ast.Name) and func is not None and expr.id in func.locals:
            values = [(v, func, module) for v in func.locals[expr.id]]
        elif isinstance(expr, ast.Attribute):
            owner = self.infer(expr.value, func, module)
            info = self.index.classes.get(owner.path) if owner and owner.kind == "client" else None
            if info is not None:
                values = [(v, f, info.module) for v, f in info.attrs.get(expr.attr, [])]
        if len(values) < 2 or not all(id(v) in self.value_gates for v, _, _ in values):
            return []
        typed = [(self.infer(v, s, m), self.value_gates[id(v)]) for v, s, m in values]
        known = [(ref, gate) for ref, gate in typed if ref is not None]
        if not known or (len(known) == len(typed) and len({ref for ref, _ in known}) == 1):
            return []
        return known  # an arm whose type is unknown adds no use: its gate keeps the others apart

    def attribute_type(self, owner: TypeRef, name: str) -> TypeRef | None:
        """The class of attribute ``name`` read off an instance of ``owner``."""
        if owner.kind == "client":
            info = self.index.classes.get(owner.path)
            if info is not None and name in info.attrs:
                for value, func in info.attrs[name]:
                    got = self.infer(value, func, info.module)
                    if got is not None:
                        return got
                return None
        if owner.kind == "host" and f"{owner.path}.{name}" in self.attribute_overrides:
            # Bindings may name classes of the other release (a served model only the target
            # has): they are followed by path.
            return TypeRef("host", self.attribute_overrides[f"{owner.path}.{name}"])
        cls = self.host_class(owner)
        if cls is None:
            return None
        for klass in self.host.mro(cls)[0]:
            declared = self.attribute_overrides.get(f"{klass.path}.{name}")
            if declared:
                return TypeRef("host", declared)
        found = self.host.class_member(cls, name)
        if not isinstance(found, Found):
            return None
        if found.kind == "attribute":
            home = self.host.annotation_class(getattr(found.obj, "annotation", None), found.obj)
            if home is None:
                home = self._value_class(found)
            return TypeRef("host", home.path) if home else None
        if found.kind == "function" and "property" in found.obj.labels:
            return self.host_return(found)
        if found.kind == "class":
            return None
        return None


#: Bases that define no member a ``super()`` call is made for (``object``'s come last anyway).
_NO_MEMBERS = {
    "object",
    "abc.ABC",
    "typing.Generic",
    "typing.Protocol",
    "typing_extensions.Protocol",
}


def _c3(seqs: list[list[str]]) -> list[str] | None:
    """The C3 merge of linearizations (None when they are inconsistent)."""
    seqs = [list(s) for s in seqs if s]
    out: list[str] = []
    while seqs:
        head = next((s[0] for s in seqs if not any(s[0] in t[1:] for t in seqs)), None)
        if head is None:
            return None
        out.append(head)
        seqs = [t for t in ([x for x in s if x != head] for s in seqs) if t]
    return out


def _returned(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.expr]:
    """The values a function's own ``return`` statements give (nested definitions left out;
    a bare ``return`` gives None)."""
    out: list[ast.expr] = []
    todo: list[ast.AST] = list(node.body)
    while todo:
        cur = todo.pop()
        if isinstance(cur, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        if isinstance(cur, ast.Return):
            out.append(cur.value if cur.value is not None else ast.Constant(None))
        todo.extend(ast.iter_child_nodes(cur))
    return out


def _hook_returns(node: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[int, str]:
    """The returns of ``param.hook(...)`` in a ``try`` whose handler catches AttributeError
    (an object may offer the hook; one without it takes the handler's way), by the id of the
    returned value: the hook's name."""
    args = node.args
    params = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    out: dict[int, str] = {}
    for cur in _own_nodes(node):
        if not isinstance(cur, ast.Try) or not any(
            _catches_attribute_error(h) for h in cur.handlers
        ):
            continue
        for stmt in cur.body:
            value = stmt.value if isinstance(stmt, ast.Return) else None
            if (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Attribute)
                and isinstance(value.func.value, ast.Name)
                and value.func.value.id in params
            ):
                out[id(value)] = value.func.attr
    return out


def _own_nodes(node: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.AST]:
    """The nodes of a function's body, nested definitions left out."""
    todo: list[ast.AST] = list(node.body)
    while todo:
        cur = todo.pop()
        if isinstance(cur, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        yield cur
        todo.extend(ast.iter_child_nodes(cur))


def _catches_attribute_error(handler: ast.ExceptHandler) -> bool:
    """``except AttributeError`` (alone or in a tuple)."""
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(k, ast.Name) and k.id == "AttributeError" for k in kinds)


def _class_sets(node: ast.ClassDef, name: str) -> bool:
    """Whether a class body defines ``name`` (a method, or an assignment to it)."""
    for stmt in node.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name == name:
            return True
        targets = stmt.targets if isinstance(stmt, ast.Assign) else []
        if isinstance(stmt, ast.AnnAssign):
            targets = [stmt.target]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
    return False


def _rooted_at(node: ast.expr, name: str | None) -> bool:
    """``self.x.y`` is rooted at ``self``."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id == name


def _built_from_self_attr(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """For a ``__get__``: the attribute ``x`` of ``self`` whose call every instance read
    returns (``return self.x(obj)``, or a local assigned it); returns of ``self`` or of
    ``self.x`` itself (the read off the class) are left aside. None for any other shape."""
    me = first_param(node)
    local: dict[str, ast.expr] = {}
    for stmt in ast.walk(node):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
            if isinstance(target, ast.Name):
                local[target.id] = stmt.value
    slots: set[str] = set()
    for value in _returned(node):
        if isinstance(value, ast.Name) and value.id in local:
            value = local[value.id]
        if isinstance(value, ast.Name) and value.id == me:
            continue
        if isinstance(value, ast.Attribute) and _rooted_at(value, me):
            continue
        func = value.func if isinstance(value, ast.Call) else None
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
            return None
        if func.value.id != me:
            return None
        slots.add(func.attr)
    return slots.pop() if len(slots) == 1 else None


def _param_stored(init: ast.FunctionDef, attr: str) -> str | None:
    """The ``__init__`` parameter stored as ``self.<attr>`` (``self._accessor = accessor``)."""
    me = first_param(init)
    params = {a.arg for a in (*init.args.posonlyargs, *init.args.args)}
    stored = [
        stmt.value.id
        for stmt in ast.walk(init)
        if isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Attribute)
        and stmt.targets[0].attr == attr
        and isinstance(stmt.targets[0].value, ast.Name)
        and stmt.targets[0].value.id == me
        and isinstance(stmt.value, ast.Name)
        and stmt.value.id in params
    ]
    return stored[0] if len(set(stored)) == 1 else None


def _decorators(func: FunctionInfo) -> set[str]:
    return {d.id for d in func.node.decorator_list if isinstance(d, ast.Name)}
