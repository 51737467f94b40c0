"""Codemods for names that moved or were renamed in the host.

* ``rename-import``: import a moved name from the module that now holds it, rewriting the
  import where it is written.
* ``rename-attribute``: ``recv.old(...)`` -> ``recv.new(...)``.
"""

from __future__ import annotations

import libcst as cst
from libcst.metadata import PositionProvider

from driftcheck.findings import Finding
from driftcheck.fixes.base import (
    Decline,
    Located,
    params,
    run,
    without,
)

# -- rename attribute ------------------------------------------------------------------------


class _RenameAttribute(Located):
    """Rename the attribute at the finding: the outermost one starting there (a call's
    ``recv.old`` starts where the call does, and so does every attribute of its chain)."""

    def leave_Attribute(
        self, original_node: cst.Attribute, updated_node: cst.Attribute
    ) -> cst.Attribute:
        parent = self.parent(original_node)
        if isinstance(parent, cst.Attribute) and parent.value is original_node:
            return updated_node
        pos = self.get_metadata(PositionProvider, original_node).start
        finding = self.targets.get((pos.line, pos.column))
        if finding is None or updated_node.attr.value != params(finding)["old"]:
            return updated_node
        self.done.add((pos.line, pos.column))
        return updated_node.with_changes(attr=cst.Name(params(finding)["new"]))


def rename_attribute(code: str, findings: list[Finding]) -> str:
    """Rename a method or attribute read off a host receiver."""
    return run(_RenameAttribute(findings), code)


# -- imports ---------------------------------------------------------------------------------


class _MoveImport(Located):
    """Rewrites a from-import where it stands: inside its function or its try/except guard,
    with its comments and its layout. Names that move while others stay are imported on the
    next line; an import of the new module already written nearby takes them instead."""

    def __init__(self, findings: list[Finding]) -> None:
        super().__init__(findings)
        self.after: dict[cst.CSTNode, list[cst.ImportFrom]] = {}
        self.created: list[cst.ImportFrom] = []

    def leave_ImportFrom(
        self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom
    ) -> cst.ImportFrom:
        if isinstance(original_node.names, cst.ImportStar):
            return updated_node
        moves: list[tuple[int, str, str, str | None]] = []
        for i, alias in enumerate(original_node.names):
            finding = self.target_of(alias.name)
            if finding is None:
                continue
            p = params(finding)
            module, _, name = p["new"].rpartition(".")
            old_name = _code(alias.name)
            if old_name != p["old"].rpartition(".")[2]:
                raise Decline("the imported name does not match the finding")
            if not module or not name.isidentifier():
                raise Decline(f"{p['new']!r} is not a name inside a module")
            asname = (
                alias.asname.name.value  # type: ignore[attr-defined]
                if alias.asname
                else (None if name == old_name else old_name)
            )
            moves.append((i, module, name, asname))
        if not moves:
            return updated_node
        modules = list(dict.fromkeys(m for _, m, _, _ in moves))
        if len(moves) == len(original_node.names) and len(modules) == 1:
            names = [_alias_as(updated_node.names[i], name, asname) for i, _, name, asname in moves]  # type: ignore[index]
            new = updated_node.with_changes(
                module=cst.parse_expression(modules[0]), relative=[], names=names
            )
            self.created.append(new)
            return new
        line = self.parent(original_node)
        if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
            raise Decline("the import shares its line with other statements")
        kept = list(updated_node.names)  # type: ignore[arg-type]
        for i, *_ in reversed(moves):
            kept = without(kept, i)
        self.after[line] = [
            cst.ImportFrom(
                module=cst.parse_expression(module),
                names=_one_line(
                    [_new_alias(name, asname) for _, m, name, asname in moves if m == module]
                ),
            )
            for module in modules
        ]
        return updated_node.with_changes(names=kept)

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine | cst.FlattenSentinel[cst.SimpleStatementLine]:
        extra = self.after.pop(original_node, None)
        if not extra:
            return updated_node
        self.created.extend(extra)
        return cst.FlattenSentinel(
            [updated_node, *(cst.SimpleStatementLine(body=[imp]) for imp in extra)]
        )

    def leave_IndentedBlock(
        self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        return updated_node.with_changes(body=self._merged(list(updated_node.body)))

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        return updated_node.with_changes(body=self._merged(list(updated_node.body)))

    def _merged(self, body: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        """Fold a rewritten import into an import of the same module written just before it
        (or right after it), on one line; its blank lines and comments above stay."""
        mine = {id(imp) for imp in self.created}
        i = 0
        while i < len(body):
            stmt = body[i]
            imp = _lone_import(stmt)
            if imp is None or id(imp) not in mine or stmt.trailing_whitespace.comment:  # type: ignore[attr-defined]
                i += 1
                continue
            module = _code(imp.module)  # type: ignore[arg-type]
            target = next(
                (
                    j
                    for j in [*range(i - 1, -1, -1), i + 1]
                    if j < len(body)
                    and (other := _lone_import(body[j])) is not None
                    and id(other) not in mine
                    and not other.relative
                    and other.module is not None
                    and _code(other.module) == module
                    and not other.lpar
                    and not isinstance(other.names, cst.ImportStar)
                ),
                None,
            )
            if target is None:
                i += 1
                continue
            sibling = _lone_import(body[target])
            assert sibling is not None and not isinstance(sibling.names, cst.ImportStar)
            have = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in sibling.names]
            add = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in imp.names]  # type: ignore[union-attr]
            names = have + add
            if [_code(a) for a in have] == sorted(_code(a) for a in have):
                names.sort(key=_code)
            merged = sibling.with_changes(names=_one_line(names))
            body[target] = body[target].with_changes(body=[merged])  # type: ignore[attr-defined]
            self.created.append(merged)
            mine.add(id(merged))
            if i + 1 < len(body):
                nxt = body[i + 1]
                body[i + 1] = nxt.with_changes(
                    leading_lines=[*stmt.leading_lines, *nxt.leading_lines]
                )
            del body[i]
        return body


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def _lone_import(stmt: cst.CSTNode) -> cst.ImportFrom | None:
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        only = stmt.body[0]
        return only if isinstance(only, cst.ImportFrom) else None
    return None


def _alias_as(alias: cst.ImportAlias, name: str, asname: str | None) -> cst.ImportAlias:
    if alias.asname is not None or asname is None:
        return alias.with_changes(name=cst.Name(name))
    return alias.with_changes(name=cst.Name(name), asname=cst.AsName(name=cst.Name(asname)))


def _new_alias(name: str, asname: str | None) -> cst.ImportAlias:
    return cst.ImportAlias(
        name=cst.Name(name), asname=cst.AsName(name=cst.Name(asname)) if asname else None
    )


def _one_line(aliases: list[cst.ImportAlias]) -> list[cst.ImportAlias]:
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    return [
        a.with_changes(comma=comma if k < len(aliases) - 1 else cst.MaybeSentinel.DEFAULT)
        for k, a in enumerate(aliases)
    ]


def rename_import(code: str, findings: list[Finding]) -> str:
    """Import moved names from their new module, rewriting the import where it is written."""
    transformer = _MoveImport(findings)
    module = cst.MetadataWrapper(cst.parse_module(code)).visit(transformer)
    if not transformer.done:
        raise Decline("the finding does not point at a from-import")
    return module.code
