"""What vLLM's CPU build needs corrected in its own code before a probe's workload can run there
(``cpu_shims.toml``), for one target: the driver of an in-process workload and a served
workload's server take them alike.

Like a built-in model's ``CPU_NEEDS`` (:func:`driftcheck.probes.builtin_models.cpu_needs`), each
shim is data with its evidence: it is applied only where the target's vLLM source holds the line
it corrects (and the line that needs it, where one is named), and each applied one is a line of
the report naming that line. Two kinds: a distribution record (a ``NAME-VERSION.dist-info`` for
a package that is installed under another distribution name) and a source shim (a replacement
of one line of a host module, made as the module is imported: :mod:`driftcheck.probes.shim_site`,
installed as the folder's ``sitecustomize``). They go in one folder on the driver's or the server's
``PYTHONPATH`` (every process they start runs the ``sitecustomize``, workers included); the
client's own code is never changed.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from importlib import resources
from pathlib import Path

from driftcheck.probes.builtin_models import find_line

SHIMS_FILE = "cpu_shims.toml"


@dataclass(frozen=True)
class ServeShim:
    """One shim, as the data file declares it."""

    id: str
    kind: str  # "dist-record" or "source"
    file: str  # under the vllm package
    old: str
    why: str
    new: str = ""
    name: str = ""  # dist-record: the distribution's name
    needs: tuple[str, str] | None = None


def load_shims(text: str | None = None) -> list[ServeShim]:
    """The shims of the data file (or of ``text``)."""
    from driftcheck.compat import tomllib

    if text is None:
        text = (resources.files("driftcheck.probes") / SHIMS_FILE).read_text(encoding="utf-8")
    data = tomllib.loads(text)
    out = []
    for kind in ("dist-record", "source"):
        for raw in data.get(kind, []):
            needs = raw.get("needs")
            out.append(
                ServeShim(
                    id=raw["id"],
                    kind=kind,
                    file=raw["file"],
                    old=raw["old"],
                    why=raw["why"],
                    new=raw.get("new", ""),
                    name=raw.get("name", ""),
                    needs=(needs[0], needs[1]) if needs else None,
                )
            )
    return out


def _module(file: str) -> str:
    return "vllm." + file.removesuffix(".py").replace("/", ".").removesuffix(".__init__")


#: Finds the first line of a file under the vllm package that holds a text (None: not there).
LineFinder = Callable[[str, str], int | None]


@dataclass(frozen=True)
class Needed:
    """A shim the target's source shows a need for, and where (``vllm/FILE:LINE``, and the line
    that needs it)."""

    shim: ServeShim
    where: str

    def line(self, version: str) -> str:
        """The report's line for it."""
        shim = self.shim
        if shim.kind == "dist-record":
            return (
                f"{shim.id}: a '{shim.name}' distribution record ({version}+cpu) on the server's "
                f"path: {shim.why} ({self.where})"
            )
        return f"{shim.id}: {self.where} reads {shim.new!r} in the server: {shim.why}"


def needed(
    find: LineFinder, has_dist: Callable[[str], bool], shims: list[ServeShim] | None = None
) -> list[Needed]:
    """The shims whose line ``find`` finds in the target's source (and the line that needs
    it, where one is named); a distribution record only where ``has_dist`` says the
    distribution is not installed."""
    out = []
    for shim in load_shims() if shims is None else shims:
        line = find(shim.file, shim.old)
        if line is None:
            continue
        where = f"vllm/{shim.file}:{line}"
        if shim.needs is not None:
            need = find(*shim.needs)
            if need is None:
                continue
            where += f", vllm/{shim.needs[0]}:{need}"
        if shim.kind == "dist-record" and has_dist(shim.name):
            continue  # the distribution is there
        out.append(Needed(shim, where))
    return out


def installed_finders(vllm_root: Path | None) -> tuple[LineFinder, Callable[[str], bool]]:
    """The line finder and distribution check of an installed vllm package folder."""

    def has_dist(name: str) -> bool:
        return vllm_root is not None and any(vllm_root.parent.glob(f"{name}-*.dist-info"))

    return partial(find_line, vllm_root), has_dist


def prepare(
    vllm_root: Path | None, version: str, dest: Path, shims: list[ServeShim] | None = None
) -> list[str]:
    """Write the shims that ``vllm_root`` (the target's vllm package folder) shows a need for
    into ``dest`` (a folder for the server's ``PYTHONPATH``); returns the report's lines."""
    replacements: dict[str, list[list[str]]] = {}
    dest.mkdir(parents=True, exist_ok=True)
    chosen = needed(*installed_finders(vllm_root), shims)
    for item in chosen:
        shim = item.shim
        if shim.kind == "dist-record":
            info = dest / f"{shim.name}-{version}.dist-info"
            info.mkdir(exist_ok=True)
            (info / "METADATA").write_text(
                f"Metadata-Version: 2.1\nName: {shim.name}\nVersion: {version}+cpu\n"
            )
        else:
            replacements.setdefault(_module(shim.file), []).append([shim.old, shim.new])
    if replacements:
        (dest / "driftcheck_source_shims.json").write_text(json.dumps(replacements, indent=2))
        shutil.copyfile(Path(__file__).with_name("shim_site.py"), dest / "sitecustomize.py")
    return [item.line(version) for item in chosen]
