"""What a name in a client module refers to: imports (anywhere in the file) and module-level
definitions, resolved to dotted paths in one pass over the module.

A lighter stand-in for libcst's QualifiedNameProvider (whose scope analysis dominated the cost of
a scan): shadowing of an imported name by a local variable is not modelled.
"""

from __future__ import annotations

import libcst as cst


def _dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""


class NameTable(cst.CSTVisitor):
    """Imported aliases and module-level definitions of one module."""

    def __init__(self, module_name: str, is_package: bool) -> None:
        self.module_name = module_name
        self.is_package = is_package
        self.imports: dict[str, str] = {}
        self.defined: set[str] = set()
        self.depth = 0

    # -- collection ------------------------------------------------------------------------
    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = _dotted(alias.name)
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.imports[alias.asname.name.value] = full
            else:
                root = full.split(".", 1)[0]
                self.imports.setdefault(root, root)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        base = _dotted(node.module) if node.module is not None else ""
        level = len(node.relative)
        if level:
            parts = self.module_name.split(".")
            keep = len(parts) - level + (1 if self.is_package else 0)
            if keep < 0:
                return
            base = ".".join([*parts[:keep], *([base] if base else [])])
        if isinstance(node.names, cst.ImportStar) or not base:
            return
        for alias in node.names:
            name = _dotted(alias.name)
            local = (
                alias.asname.name.value
                if alias.asname and isinstance(alias.asname.name, cst.Name)
                else name
            )
            self.imports[local] = f"{base}.{name}"

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self.depth == 0:
            self.defined.add(node.name.value)
        self.depth += 1

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.depth -= 1

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if self.depth == 0:
            self.defined.add(node.name.value)
        self.depth += 1

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.depth -= 1

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        if self.depth == 0 and isinstance(node.target, cst.Name):
            self.defined.add(node.target.value)

    # -- queries ---------------------------------------------------------------------------
    def qualified(self, node: cst.CSTNode) -> list[str]:
        """Dotted paths a Name or Attribute chain refers to ([] for locals and builtins)."""
        if isinstance(node, cst.Name):
            if node.value in self.imports:
                return [self.imports[node.value]]
            if node.value in self.defined:
                return [f"{self.module_name}.{node.value}"]
            return []
        if isinstance(node, cst.Attribute):
            return [f"{base}.{node.attr.value}" for base in self.qualified(node.value)]
        return []

    def imported_root(self, node: cst.CSTNode) -> bool:
        """True when an attribute chain starts at an imported name."""
        while isinstance(node, cst.Attribute):
            node = node.value
        return isinstance(node, cst.Name) and node.value in self.imports
