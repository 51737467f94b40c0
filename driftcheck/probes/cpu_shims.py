"""What vLLM's CPU build needs corrected in its own code before a probe's workload can run there
(``cpu_shims.toml``), for one target: the driver of an in-process workload and a served
workload's server take them alike.

Like a built-in model's ``CPU_NEEDS`` (:func:`driftcheck.models.builtin.cpu_needs`), each
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
from importlib import resources
from pathlib import Path

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
    # A line that comes before ``old`` in the file: the shim corrects the first ``old`` after it
    # (a line such as ``return query, key`` that several methods of one module share).
    after: str = ""
    # Further (old, new) lines of the same file, corrected with this one: the shim applies only
    # where every one of them is there (after ``after``).
    also: tuple[tuple[str, str], ...] = ()


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
                    after=raw.get("after", ""),
                    also=tuple((e["old"], e["new"]) for e in raw.get("also", [])),
                )
            )
    return out


def _module(file: str) -> str:
    return "vllm." + file.removesuffix(".py").replace("/", ".").removesuffix(".__init__")


#: The lines of a file under the vllm package (None: not there).
LineReader = Callable[[str], "list[str] | None"]


def first_line(lines: list[str] | None, text: str, after: str = "") -> int | None:
    """The first line (from 1) that holds ``text``, after the first that holds ``after`` when
    one is given."""
    if lines is None:
        return None
    start = 0
    if after:
        start = next((i for i, ln in enumerate(lines, start=1) if after in ln), 0)
        if not start:
            return None
    return next((i for i, ln in enumerate(lines, start=1) if i > start and text in ln), None)


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
    read: LineReader, has_dist: Callable[[str], bool], shims: list[ServeShim] | None = None
) -> list[Needed]:
    """The shims whose lines the target's source holds (``read``; every line of a shim's
    ``also`` too, and the line that needs it, where one is named); a distribution record only
    where ``has_dist`` says the distribution is not installed."""
    out = []
    for shim in load_shims() if shims is None else shims:
        lines = read(shim.file)
        line = first_line(lines, shim.old, shim.after)
        if line is None:
            continue
        more = [first_line(lines, o, shim.after) for o, _n in shim.also]
        if None in more:
            continue  # the lines are corrected together or not at all
        where = f"vllm/{shim.file}:{line}" + "".join(f", :{n}" for n in more)
        if shim.needs is not None:
            need = first_line(read(shim.needs[0]), shim.needs[1])
            if need is None:
                continue
            where += f", vllm/{shim.needs[0]}:{need}"
        if shim.kind == "dist-record" and has_dist(shim.name):
            continue  # the distribution is there
        out.append(Needed(shim, where))
    return out


def installed_finders(vllm_root: Path | None) -> tuple[LineReader, Callable[[str], bool]]:
    """The line reader and distribution check of an installed vllm package folder."""

    def read(rel: str) -> list[str] | None:
        if vllm_root is None:
            return None
        try:
            return (vllm_root / rel).read_text(errors="replace").splitlines()
        except OSError:
            return None

    def has_dist(name: str) -> bool:
        return vllm_root is not None and any(vllm_root.parent.glob(f"{name}-*.dist-info"))

    return read, has_dist


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
            for o, n in [(shim.old, shim.new), *shim.also]:
                replacements.setdefault(_module(shim.file), []).append(
                    [o, n, shim.after] if shim.after else [o, n]
                )
    if replacements:
        (dest / "driftcheck_source_shims.json").write_text(json.dumps(replacements, indent=2))
        shutil.copyfile(Path(__file__).with_name("shim_site.py"), dest / "sitecustomize.py")
    return [item.line(version) for item in chosen]
