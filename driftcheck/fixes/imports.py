"""``rename-import`` where the name is imported: the import statement rewritten where it stands.

``from old import a`` -> ``from new import a`` (``a as b`` kept; a renamed name keeps its local
name with ``as``, so the client's own ``__all__`` and importers still find it), inside its
function or its try/except guard, with its comments and its layout. Names that move while others
stay are imported on the next line, one import per new module; when every name moves, the
statement itself takes the first new module. ``import old.mod as m`` -> ``from new import mod as
m``. An import of the new module already written next to it takes the moved names instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import libcst as cst

from driftcheck.findings import Finding
from driftcheck.fixes.base import Decline, Located, code_of, new_home, params, without


@dataclass(frozen=True)
class _Move:
    """One imported name that moves: its index in the statement, its new home, its local name."""

    index: int
    module: str
    name: str
    asname: str | None


def _tried_first(new: list[cst.SimpleStatementLine], old: cst.SimpleStatementLine) -> cst.Try:
    """``try: <the new imports> except ImportError: <the old one>``: the new home first, the
    old one on a release the client allows that lacks it. Comments above stay above."""
    body = [s.with_changes(leading_lines=()) for s in new]
    return cst.Try(
        body=cst.IndentedBlock(body=body),
        handlers=[
            cst.ExceptHandler(
                body=cst.IndentedBlock(body=[old.with_changes(leading_lines=())]),
                type=cst.Name("ImportError"),
            )
        ],
        leading_lines=old.leading_lines,
    )


def _moved_along(index: int, alias: cst.ImportAlias, module: str) -> _Move:
    """One name of ``from old import a, b`` whose module moved whole to ``module``."""
    name = code_of(alias.name)
    asname = _asname(alias)
    return _Move(index, module, name, asname)


class MoveImport(Located):
    """Rewrites the from-imports and ``import x as y`` statements the findings point at."""

    def __init__(self, findings: list[Finding]) -> None:
        super().__init__(findings)
        self.after: dict[cst.CSTNode, list[cst.SimpleStatementLine]] = {}
        self.created: list[cst.ImportFrom] = []
        #: Lines whose moved import falls back to the old one (a release the client allows
        #: lacks the new home): written as ``try: new / except ImportError: old``.
        self.fallback: set[cst.CSTNode] = set()

    # -- from x import a, b ------------------------------------------------------------------

    def leave_ImportFrom(
        self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom
    ) -> cst.ImportFrom:
        if isinstance(original_node.names, cst.ImportStar):
            return updated_node
        moves: list[_Move] = []
        stated = "" if original_node.relative else code_of(original_node.module or cst.Name("_"))
        for i, alias in enumerate(original_node.names):
            finding = self.target_of(alias.name)
            if finding is None:
                continue
            p = params(finding)
            self._falls_back(original_node, p)
            if p["old"] == stated:  # the module moved whole: every name of it goes with it
                moves = [_moved_along(j, a, p["new"]) for j, a in enumerate(original_node.names)]
                break
            module, name = new_home(p)
            old_name = code_of(alias.name)
            if old_name != p["old"].rpartition(".")[2]:
                raise Decline("the imported name does not match the finding")
            asname = _asname(alias) if alias.asname else (None if name == old_name else old_name)
            moves.append(_Move(i, module, name, asname))
        if not moves:
            return updated_node
        modules = list(dict.fromkeys(m.module for m in moves))
        moved = {m.index for m in moves}
        node = _closing_as_comma(updated_node)
        aliases = _aliases(node)
        rewritten = len(moved) == len(aliases)
        if rewritten:
            # Every name moves: the statement takes the first new module, in its own layout.
            here, modules = modules[0], modules[1:]
            for m in moves:
                if m.module == here:
                    aliases[m.index] = _alias_as(aliases[m.index], m.name, m.asname)
            stay = {m.index for m in moves if m.module == here}
            node = node.with_changes(module=cst.parse_expression(here), relative=[])
            moves = [m for m in moves if m.module != here]
        else:
            stay = set(range(len(aliases))) - moved
        extra = [
            _import_line(
                module,
                [_new_alias(m.name, m.asname) for m in moves if m.module == module],
                [c for m in moves if m.module == module for c in _comments(aliases[m.index])],
            )
            for module in modules
        ]
        kept = aliases
        for i in reversed(range(len(aliases))):
            if i not in stay:
                kept = without(kept, i)
        result = _closing_restored(node.with_changes(names=kept), updated_node)
        if rewritten:
            self.created.append(result)  # folded into a sibling import of its module, if any
        if extra:
            self._after(original_node, extra)
        return result

    # -- import x.y as z ---------------------------------------------------------------------

    def leave_Import(
        self, original_node: cst.Import, updated_node: cst.Import
    ) -> cst.Import | cst.ImportFrom:
        moves: list[tuple[int, cst.ImportFrom | cst.Import]] = []
        for i, alias in enumerate(original_node.names):
            finding = self.target_of(alias.name)
            if finding is None:
                continue
            p = params(finding)
            self._falls_back(original_node, p)
            if code_of(alias.name) != p["old"]:
                raise Decline("the imported module does not match the finding")
            if alias.asname is None:
                raise Decline(
                    f"import {p['old']} binds the top package; its uses name the old path"
                )
            moves.append((i, _module_import(p["new"], cast(str, _asname(alias)))))
        if not moves:
            return updated_node
        if len(moves) == len(original_node.names):
            (_, first), rest = moves[0], moves[1:]
            first = first.with_changes(semicolon=updated_node.semicolon)
        else:
            first, rest = None, moves
        if rest:
            self._after(
                original_node,
                [cst.SimpleStatementLine(body=[imp]) for _, imp in rest],
            )
        if first is not None:
            if isinstance(first, cst.ImportFrom):
                self.created.append(first)
            return first
        kept = list(updated_node.names)
        for i, _ in reversed(moves):
            kept = without(kept, i)
        return updated_node.with_changes(names=kept)

    # -- statements added after the rewritten one, and folded into their neighbours ----------

    def _falls_back(self, original: cst.CSTNode, p: dict[str, str]) -> None:
        if not p.get("fallback"):
            return
        line = self.parent(original)
        if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
            raise Decline("the import shares its line with other statements")
        self.fallback.add(line)

    def _after(self, original: cst.CSTNode, lines: list[cst.SimpleStatementLine]) -> None:
        line = self.parent(original)
        if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
            raise Decline("the import shares its line with other statements")
        self.after.setdefault(line, []).extend(lines)

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.SimpleStatementLine]:
        extra = self.after.pop(original_node, None)
        if original_node in self.fallback:
            return _tried_first([updated_node, *(extra or [])], original_node)
        if not extra:
            return updated_node
        self.created.extend(s.body[0] for s in extra if isinstance(s.body[0], cst.ImportFrom))
        return cst.FlattenSentinel([updated_node, *extra])

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
            if (
                imp is None
                or id(imp) not in mine
                or imp.lpar
                or cast(cst.SimpleStatementLine, stmt).trailing_whitespace.comment  # holds imp
            ):
                i += 1
                continue
            module = code_of(cast(cst.CSTNode, imp.module))  # the imports made here name one
            target = next(
                (
                    j
                    for j in [*range(i - 1, -1, -1), i + 1]
                    if j < len(body)
                    and (other := _lone_import(body[j])) is not None
                    and id(other) not in mine
                    and not other.relative
                    and other.module is not None
                    and code_of(other.module) == module
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
            written = {_binding(a) for a in have}
            add = [
                a.with_changes(comma=cst.MaybeSentinel.DEFAULT)
                for a in _aliases(imp)
                if _binding(a) not in written
            ]
            names = have + add
            if [code_of(a) for a in have] == sorted(code_of(a) for a in have):
                names.sort(key=code_of)
            merged = sibling.with_changes(names=_one_line(names))
            body[target] = body[target].with_changes(body=[merged])
            self.created.append(merged)
            mine.add(id(merged))
            if i + 1 < len(body):
                nxt = body[i + 1]
                body[i + 1] = nxt.with_changes(leading_lines=[*_leading(stmt), *_leading(nxt)])
            del body[i]
        return body


# -- helpers ---------------------------------------------------------------------------------


def _asname(alias: cst.ImportAlias) -> str | None:
    """The local name an ``import ... as name`` binds (an import binds a plain name)."""
    return cast(cst.Name, alias.asname.name).value if alias.asname else None


def _aliases(node: cst.ImportFrom) -> list[cst.ImportAlias]:
    """The names of a from-import (star imports are left alone before they get here)."""
    return list(cast(Sequence[cst.ImportAlias], node.names))


def _leading(stmt: cst.BaseStatement) -> Sequence[cst.EmptyLine]:
    """The blank lines and comments above a statement (every statement kind has them)."""
    return cast(cst.SimpleStatementLine | cst.BaseCompoundStatement, stmt).leading_lines


def _lone_import(stmt: cst.CSTNode) -> cst.ImportFrom | None:
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        only = stmt.body[0]
        return only if isinstance(only, cst.ImportFrom) else None
    return None


def _binding(alias: cst.ImportAlias) -> tuple[str, str]:
    """(imported name, local name): ``a`` and ``a as a`` are the same import."""
    name = code_of(alias.name)
    return name, code_of(alias.asname.name) if alias.asname else name


def _closing_as_comma(node: cst.ImportFrom) -> cst.ImportFrom:
    """A parenthesized import without a trailing comma, written as if it had one: the way to
    the closing bracket (and the last name's comment) then belongs to the last name, and
    :func:`without` keeps every comment with its own name."""
    names = _aliases(node)
    if node.rpar is None or isinstance(names[-1].comma, cst.Comma):
        return node
    tail = node.rpar.whitespace_before
    names[-1] = names[-1].with_changes(comma=cst.Comma(whitespace_after=tail))
    return node.with_changes(
        names=names, rpar=node.rpar.with_changes(whitespace_before=cst.SimpleWhitespace(""))
    )


def _closing_restored(node: cst.ImportFrom, original: cst.ImportFrom) -> cst.ImportFrom:
    """Undo :func:`_closing_as_comma` where the original had no trailing comma."""
    names = _aliases(node)
    if original.rpar is None or isinstance(_aliases(original)[-1].comma, cst.Comma):
        return node
    last = names[-1]
    tail = last.comma.whitespace_after if isinstance(last.comma, cst.Comma) else None
    names[-1] = last.with_changes(comma=cst.MaybeSentinel.DEFAULT)
    rpar = (
        node.rpar.with_changes(whitespace_before=tail)
        if tail is not None and node.rpar is not None  # it has one where the original had
        else node.rpar
    )
    return node.with_changes(names=names, rpar=rpar)


def _comments(alias: cst.ImportAlias) -> list[str]:
    """The comments written after a name of a parenthesized import (they travel with it)."""
    comma = alias.comma
    if not isinstance(comma, cst.Comma) or not isinstance(
        comma.whitespace_after, cst.ParenthesizedWhitespace
    ):
        return []
    ws = comma.whitespace_after
    found = [ws.first_line.comment, *(e.comment for e in ws.empty_lines)]
    return [c.value for c in found if c is not None]


def _import_line(
    module: str, aliases: list[cst.ImportAlias], comments: list[str]
) -> cst.SimpleStatementLine:
    """``from module import ...`` on a line of its own, the moved names' comments kept: one as
    its trailing comment, several on the lines above it."""
    imp = cst.ImportFrom(module=_dotted(module), names=_one_line(aliases))
    if len(comments) == 1:
        return cst.SimpleStatementLine(
            body=[imp],
            trailing_whitespace=cst.TrailingWhitespace(
                whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment(comments[0])
            ),
        )
    return cst.SimpleStatementLine(
        body=[imp],
        leading_lines=[cst.EmptyLine(indent=True, comment=cst.Comment(c)) for c in comments],
    )


def _module_import(new: str, asname: str) -> cst.ImportFrom | cst.Import:
    """``from new.parent import last as asname`` (also right when ``last`` is a name its parent
    defines rather than a submodule file); ``import new as asname`` for a top-level module."""
    parent, _, last = new.rpartition(".")
    if not all(part.isidentifier() for part in new.split(".")):
        raise Decline(f"{new!r} is not a module path")
    alias = cst.ImportAlias(
        name=cst.Name(last) if parent else cst.Name(new),
        asname=cst.AsName(name=cst.Name(asname)),
    )
    if not parent:
        return cst.Import(names=[alias])
    return cst.ImportFrom(module=_dotted(parent), names=[alias])


def _dotted(module: str) -> cst.Attribute | cst.Name:
    """A module path as an expression (a dotted path parses to a Name or an Attribute)."""
    return cast(cst.Attribute | cst.Name, cst.parse_expression(module))


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
