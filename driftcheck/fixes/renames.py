"""Codemods for names that moved or were renamed in the host.

* ``rename-import``: import a moved name from the module that now holds it, rewriting the
  import where it is written (``fixes/imports.py``); where the name is read off a module
  (``np.AxisError``), the use is pointed at a name already imported from its new home.
* ``rename-attribute``: ``recv.old(...)`` -> ``recv.new(...)``; a dotted ``new`` reaches
  through attributes (``model.model`` -> ``model.language_model.model``, where a served wrapper
  keeps the model that has ``old``).
"""

from __future__ import annotations

import libcst as cst
from libcst.metadata import (
    ExpressionContext,
    ExpressionContextProvider,
    ImportAssignment,
    PositionProvider,
    Scope,
    ScopeProvider,
)

from driftcheck.findings import Finding
from driftcheck.fixes.base import Decline, Located, code_of, new_home, params, run
from driftcheck.fixes.imports import MoveImport

# -- rename attribute ------------------------------------------------------------------------


class _RenameAttribute(Located):
    """Rename the attribute at the finding: the outermost one starting there that reads
    ``old`` (a call's ``recv.old`` starts where the call does, and so does every attribute of
    its chain: ``recv.old.forward`` renames ``old``)."""

    def leave_Attribute(
        self, original_node: cst.Attribute, updated_node: cst.Attribute
    ) -> cst.Attribute:
        pos = self.get_metadata(PositionProvider, original_node).start
        finding = self.targets.get((pos.line, pos.column))
        if finding is None or updated_node.attr.value != params(finding)["old"]:
            return updated_node
        parent = self.parent(original_node)
        if (
            isinstance(parent, cst.Attribute)
            and parent.value is original_node
            and parent.attr.value == params(finding)["old"]
        ):
            return updated_node  # ``recv.old.old``: the outer one is the finding's
        self.done.add((pos.line, pos.column))
        *through, last = _path(params(finding)["new"])
        value = updated_node.value
        for name in through:
            value = cst.Attribute(value=value, attr=cst.Name(name))
        return updated_node.with_changes(value=value, attr=cst.Name(last))


def _path(new: str) -> list[str]:
    """The names of a dotted attribute path (Decline for anything else)."""
    names = new.split(".")
    if not all(n.isidentifier() for n in names):
        raise Decline(f"{new!r} is not an attribute path")
    return names


def rename_attribute(code: str, findings: list[Finding]) -> str:
    """Rename a method or attribute read off a host receiver."""
    return run(_RenameAttribute(findings), code)


# -- moved names read off a module -----------------------------------------------------------


class _MoveUse(Located):
    """``mod.Old`` -> ``New``, where ``mod`` is bound by imports to the module ``Old`` was read
    off and ``New`` is a name already imported from the new home, visible here.

    A new import line is not added: it would move every line below it, and the findings there
    that are fixed after this one would no longer point at their code.
    """

    METADATA_DEPENDENCIES = (
        *Located.METADATA_DEPENDENCIES,
        ScopeProvider,
        ExpressionContextProvider,
    )

    def leave_Attribute(
        self, original_node: cst.Attribute, updated_node: cst.Attribute
    ) -> cst.BaseExpression:
        pos = self.get_metadata(PositionProvider, original_node).start
        finding = self.targets.get((pos.line, pos.column))
        names = _dotted(original_node)
        if finding is None or names is None:
            return updated_node
        p = params(finding)
        scope = self.get_metadata(ScopeProvider, original_node, None)
        root = _module_of(scope, names[0])
        if root is None or ".".join([root, *names[1:]]) != p["old"]:
            return updated_node
        self.done.add((pos.line, pos.column))
        if self.get_metadata(ExpressionContextProvider, original_node, None) not in (
            None,
            ExpressionContext.LOAD,
        ):
            raise Decline(f"{code_of(original_node)} is assigned or deleted here")
        module, name = new_home(p)
        local = _bound_to(scope, f"{module}.{name}", pos.line, self)
        if local is None:
            raise Decline(
                f"import {name} from {module} and use it here (no import of it is in reach)"
            )
        return cst.Name(local, lpar=updated_node.lpar, rpar=updated_node.rpar)


def _dotted(node: cst.BaseExpression) -> list[str] | None:
    """``a.b.c`` as ``["a", "b", "c"]`` (None for anything but names and attributes)."""
    if isinstance(node, cst.Name):
        return [node.value]
    if isinstance(node, cst.Attribute):
        head = _dotted(node.value)
        return None if head is None else [*head, node.attr.value]
    return None


def _module_of(scope: Scope | None, name: str) -> str | None:
    """The one dotted name ``name`` is bound to in ``scope``, when every binding is an import
    of it (None for other bindings, star and relative imports, or two different targets)."""
    if scope is None or name not in scope:
        return None
    targets = set()
    for assignment in scope[name]:
        if not isinstance(assignment, ImportAssignment) or assignment.name != name:
            return None
        targets.add(_imported_as(assignment.node, name))
    return targets.pop() if len(targets) == 1 and None not in targets else None


def _imported_as(stmt: cst.CSTNode, name: str) -> str | None:
    if isinstance(stmt, cst.Import):
        for alias in stmt.names:
            dotted = code_of(alias.name)
            if alias.asname is not None:
                if code_of(alias.asname.name) == name:
                    return dotted
            elif dotted.split(".")[0] == name:
                return name
    elif isinstance(stmt, cst.ImportFrom) and not stmt.relative and stmt.module is not None:
        if isinstance(stmt.names, cst.ImportStar):
            return None
        for alias in stmt.names:
            local = code_of(alias.asname.name) if alias.asname else code_of(alias.name)
            if local == name:
                return f"{code_of(stmt.module)}.{code_of(alias.name)}"
    return None


def _bound_to(scope: Scope | None, target: str, line: int, at: Located) -> str | None:
    """A local name that imports bind to ``target``, visible in ``scope`` and bound on a line
    above ``line`` (so that it is bound when the use runs)."""
    candidates = [target.rpartition(".")[2]]
    seen: set[int] = set()
    cur = scope
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        candidates += [a.name for a in cur.assignments if isinstance(a, ImportAssignment)]
        cur = cur.parent
    for local in dict.fromkeys(c for c in candidates if "." not in c):
        # A name _module_of matches has a scope and is bound by imports only.
        if scope is None or _module_of(scope, local) != target:
            continue
        lines = [
            at.get_metadata(PositionProvider, a.node).start.line
            for a in scope[local]
            if isinstance(a, ImportAssignment)
        ]
        if max(lines) < line:
            return local
    return None


def rename_import(code: str, findings: list[Finding]) -> str:
    """Import moved names from their new module, rewriting the import where it is written, or
    read them off the name already imported from there."""
    wrapper = cst.MetadataWrapper(cst.parse_module(code))
    imports = MoveImport(findings)
    new = wrapper.visit(imports)
    if imports.done:
        return new.code
    uses = _MoveUse(findings)
    new = cst.MetadataWrapper(cst.parse_module(code)).visit(uses)
    if not uses.done:
        raise Decline("the finding points at neither an import nor a name read off a module")
    return new.code
