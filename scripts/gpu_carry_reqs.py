"""The part of PEP 440 and PEP 508 that ``gpu_carry.py`` needs, in the standard library alone:
requirement lines, environment markers, version specifiers, and a wheel's ``Requires-Dist``.

It runs on this machine (choosing the wheels for the GPU machine) and on the GPU machine itself
(checking the installed set against the versions really there), where nothing can be installed
first, so it cannot lean on ``packaging``.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

#: The GPU machine's interpreter, as markers see it (Python 3.12.3, Linux x86-64, CPython).
DEVICE_MARKERS = {
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "implementation_version": "3.12.3",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "platform_machine": "x86_64",
    "platform_system": "Linux",
    "sys_platform": "linux",
    "os_name": "posix",
    "platform_release": "",
    "platform_version": "",
}


def norm(name: str) -> str:
    """A distribution name as PEP 503 compares it."""
    return re.sub(r"[-_.]+", "-", name).lower()


# -- versions (PEP 440) --------------------------------------------------------------------------

_VERSION = re.compile(
    r"^\s*v?(?:(?P<epoch>\d+)!)?(?P<release>\d+(?:\.\d+)*)"
    r"(?:[-_.]?(?P<pre_l>alpha|beta|preview|pre|rc|a|b|c)[-_.]?(?P<pre_n>\d*))?"
    r"(?:-(?P<post_n1>\d+)|[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>\d*))?"
    r"(?:[-_.]?(?P<dev_l>dev)[-_.]?(?P<dev_n>\d*))?"
    r"(?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?\s*$",
    re.IGNORECASE,
)
_PRE = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}


@dataclass(frozen=True)
class Version:
    """A parsed version: compare with :meth:`key` (public part) and :attr:`local`."""

    epoch: int
    release: tuple[int, ...]
    pre: tuple[int, int] | None
    post: int | None
    dev: int | None
    local: str | None

    @classmethod
    def parse(cls, text: str) -> Version | None:
        m = _VERSION.match(text)
        if not m:
            return None
        post = m["post_n1"] or (m["post_n2"] or "0" if m["post_l"] else None)
        return cls(
            epoch=int(m["epoch"] or 0),
            release=tuple(int(p) for p in m["release"].split(".")),
            pre=(_PRE[m["pre_l"].lower()], int(m["pre_n"] or 0)) if m["pre_l"] else None,
            post=int(post) if post is not None else None,
            dev=int(m["dev_n"] or 0) if m["dev_l"] else None,
            local=m["local"].lower() if m["local"] else None,
        )

    @property
    def trimmed(self) -> tuple[int, ...]:
        """The release without trailing zeros (1.0 and 1.0.0 are equal)."""
        rel = list(self.release)
        while len(rel) > 1 and rel[-1] == 0:
            rel.pop()
        return tuple(rel)

    @property
    def is_pre(self) -> bool:
        return self.pre is not None or self.dev is not None

    def key(self) -> tuple:
        """Sort key of the public version: dev < pre < final < post, as PEP 440 orders them."""
        if self.pre is None and self.post is None and self.dev is not None:
            pre: tuple = (-1,)
        else:
            pre = (0, *self.pre) if self.pre is not None else (1,)
        post = (-1,) if self.post is None else (0, self.post)
        dev = (1,) if self.dev is None else (0, self.dev)
        return (self.epoch, self.trimmed, pre, post, dev)


# -- specifiers ----------------------------------------------------------------------------------

_CLAUSE = re.compile(r"^\s*(===|~=|==|!=|<=|>=|<|>)\s*(\S+?)\s*$")


def _prefix_match(v: Version, pattern: str) -> bool:
    want = Version.parse(pattern)
    if want is None:
        return False
    n = len(want.release)
    padded = v.release + (0,) * max(0, n - len(v.release))
    return v.epoch == want.epoch and padded[:n] == want.release


def _clause_holds(op: str, raw: str, v: Version, text: str) -> bool:
    if op == "===":
        return text.strip() == raw
    if op in ("==", "!=") and raw.endswith(".*"):
        hit = _prefix_match(v, raw[:-2])
        return hit if op == "==" else not hit
    want = Version.parse(raw)
    if want is None:
        return False
    if op in ("==", "!="):
        same = v.key() == want.key() and (want.local is None or v.local == want.local)
        return same if op == "==" else not same
    if op == "~=":
        stem = f"{want.epoch}!" + ".".join(str(p) for p in want.release[:-1])
        return v.key() >= want.key() and _prefix_match(v, stem)
    if op == ">=":
        return v.key() >= want.key()
    if op == "<=":
        return v.key() <= want.key()
    if op == ">":
        # >1.0 admits no post-release of 1.0 (a final release named: no pre, post or dev part).
        final = not want.is_pre and want.post is None
        post_of = final and v.post is not None and v.trimmed == want.trimmed
        return v.key() > want.key() and not post_of
    # <2.0 admits no pre-release of 2.0 (a final release named).
    final = not want.is_pre and want.post is None
    pre_of = final and v.is_pre and v.trimmed == want.trimmed and v.epoch == want.epoch
    return v.key() < want.key() and not pre_of


def satisfies(version: str, specifier: str) -> bool:
    """True when ``version`` meets every clause of ``specifier`` (pre-releases admitted).

    An unparsable version meets only an empty specifier or ``===`` with its own text."""
    clauses = [c for c in specifier.split(",") if c.strip()]
    v = Version.parse(version)
    for clause in clauses:
        m = _CLAUSE.match(clause)
        if not m:
            return False
        if v is None:
            if m[1] != "===" or m[2] != version.strip():
                return False
            continue
        if not _clause_holds(m[1], m[2], v, version):
            return False
    return True


# -- environment markers (PEP 508) ---------------------------------------------------------------

_TOKEN = re.compile(
    r"\s*(?:(?P<str>'[^']*'|\"[^\"]*\")|(?P<op>===|==|!=|<=|>=|~=|<|>|not\s+in\b|in\b)"
    r"|(?P<paren>[()])|(?P<word>[A-Za-z_][A-Za-z0-9_.]*))"
)


class MarkerError(ValueError):
    """A marker this evaluator cannot read."""


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if not m:
            raise MarkerError(f"cannot read marker {text!r} at {pos}")
        kind = m.lastgroup or ""
        value = m[kind]
        if kind == "word" and value in ("and", "or"):
            kind = value
        out.append((kind, re.sub(r"\s+", " ", value)))
        pos = m.end()
    return out


def _compare(left: str, op: str, right: str, is_extra: bool) -> bool:
    if is_extra:
        left, right = norm(left), norm(right)
    if op == "in":
        return left in right
    if op == "not in":
        return left not in right
    if Version.parse(left) is not None and Version.parse(right) is not None:
        return satisfies(left, f"{op}{right}")
    if op == "==":
        return left == right
    if op == "!=":
        return left != right
    raise MarkerError(f"no order between {left!r} and {right!r}")


def marker_holds(marker: str, env: dict[str, str]) -> bool:
    """Evaluate ``marker`` in ``env`` (a mapping of marker variables, ``extra`` among them)."""
    toks = _tokens(marker)
    pos = 0

    def value() -> tuple[str, bool]:
        nonlocal pos
        kind, text = toks[pos]
        pos += 1
        if kind == "str":
            return text[1:-1], False
        if kind == "word":
            return env.get(text, ""), text == "extra"
        raise MarkerError(f"unexpected {text!r} in {marker!r}")

    def atom() -> bool:
        nonlocal pos
        if toks[pos][0] == "paren" and toks[pos][1] == "(":
            pos += 1
            got = expr()
            pos += 1  # the closing parenthesis
            return got
        left, lx = value()
        kind, op = toks[pos]
        if kind != "op":
            raise MarkerError(f"expected an operator in {marker!r}")
        pos += 1
        right, rx = value()
        return _compare(left, op, right, lx or rx)

    def chain(word: str, inner: Callable[[], bool]) -> bool:
        """``inner (word inner)*``: every operand is read, then combined."""
        nonlocal pos
        got = inner()
        while pos < len(toks) and toks[pos][0] == word:
            pos += 1
            nxt = inner()
            got = (got and nxt) if word == "and" else (got or nxt)
        return got

    def expr() -> bool:
        return chain("or", lambda: chain("and", atom))

    return expr()


# -- requirements --------------------------------------------------------------------------------

_REQ = re.compile(
    r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[(?P<extras>[^\]]*)\])?"
    r"\s*(?P<spec>[^;]*?)\s*(?:;\s*(?P<marker>.*?))?\s*$"
)


@dataclass(frozen=True)
class Requirement:
    """One requirement line: name, extras, specifier (``>=1,<2``) and marker."""

    name: str
    extras: tuple[str, ...] = ()
    specifier: str = ""
    marker: str = ""

    @classmethod
    def parse(cls, line: str) -> Requirement:
        m = _REQ.match(line)
        if not m or "@" in (m["spec"] or ""):
            raise ValueError(f"not a requirement this script reads: {line!r}")
        spec = (m["spec"] or "").strip().removeprefix("(").removesuffix(")")
        extras = tuple(norm(e) for e in (m["extras"] or "").split(",") if e.strip())
        return cls(m["name"], extras, re.sub(r"\s+", "", spec), (m["marker"] or "").strip())

    @property
    def key(self) -> str:
        return norm(self.name)

    def applies(self, extras: tuple[str, ...] = (), env: dict[str, str] | None = None) -> bool:
        """True when the marker holds with no extra, or with one of ``extras``."""
        if not self.marker:
            return True
        base = dict(env or DEVICE_MARKERS)
        return any(marker_holds(self.marker, {**base, "extra": e}) for e in ("", *extras))

    def __str__(self) -> str:
        extras = f"[{','.join(self.extras)}]" if self.extras else ""
        return f"{self.name}{extras}{self.specifier}"


def wheel_metadata(path: Path) -> tuple[str, str, list[Requirement]]:
    """A wheel's name, version and ``Requires-Dist`` (unreadable lines left out)."""
    with zipfile.ZipFile(path) as z:
        meta = next(
            n for n in z.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")
        )
        text = z.read(meta).decode("utf-8", "replace")
    return metadata_fields(text)


def metadata_fields(text: str) -> tuple[str, str, list[Requirement]]:
    """Name, version and requirements of a ``METADATA`` text."""
    name = version = ""
    reqs: list[Requirement] = []
    for line in text.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(":")
        if key == "Name":
            name = value.strip()
        elif key == "Version":
            version = value.strip()
        elif key == "Requires-Dist":
            try:
                reqs.append(Requirement.parse(value.strip()))
            except ValueError:
                continue
    return name, version, reqs


def unmet(
    owner: str, reqs: list[Requirement], extras: tuple[str, ...], versions: dict[str, str]
) -> list[str]:
    """Lines for each requirement of ``owner`` that the known ``versions`` do not meet (names
    whose version is unknown pass)."""
    out = []
    for r in reqs:
        if not r.applies(extras):
            continue
        have = versions.get(r.key)
        if have is not None and r.specifier and not satisfies(have, r.specifier):
            out.append(f"{owner} needs {r} but {r.key}=={have} is there")
    return out
