"""The GPU memory a probe run used, as ``nvidia-smi`` measures it: ``memory.used`` of every
GPU, in MiB, sampled while the run lasts, and its peak per GPU, reported in MiB as measured
(never converted to GB). Asked of ``nvidia-smi`` in its own process, so that nothing in the
probe's processes initialises CUDA before the host does.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from types import TracebackType

#: Milliseconds between samples (``nvidia-smi -lms``).
INTERVAL_MS = 200


class GpuMemorySampler:
    """While the ``with`` block runs, ``nvidia-smi`` writes every GPU's memory in use to
    ``path``; :meth:`peaks` reads the largest value per GPU. Nothing is sampled when
    ``enabled`` is false or there is no ``nvidia-smi``."""

    def __init__(self, path: Path, *, enabled: bool = True) -> None:
        self.path = path
        self.exe = shutil.which("nvidia-smi") if enabled else None
        self._proc: subprocess.Popen | None = None

    def __enter__(self) -> GpuMemorySampler:
        if self.exe is None:
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("wb") as out:
            try:
                self._proc = subprocess.Popen(
                    [
                        self.exe,
                        "--query-gpu=index,memory.used",
                        "--format=csv,noheader,nounits",
                        f"-lms={INTERVAL_MS}",
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            except OSError:
                self._proc = None
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._proc is None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout=5)

    def peaks(self) -> dict[str, int]:
        """GPU index -> the most MiB in use seen (empty when nothing was sampled)."""
        try:
            text = self.path.read_text(errors="replace")
        except OSError:
            return {}
        return parse_samples(text)


def parse_samples(text: str) -> dict[str, int]:
    """``index, MiB`` lines (``nvidia-smi --format=csv,noheader,nounits``) -> the peak per GPU;
    lines that are not two numbers (a partly written last line, an error) are left out."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        index, _, used = line.partition(",")
        index, used = index.strip(), used.strip()
        if index.isdigit() and used.isdigit():
            out[index] = max(out.get(index, 0), int(used))
    return out


def mib_text(peaks: dict[str, int]) -> str:
    """``GPU 0 132,295 MiB`` for each GPU, in index order."""
    return ", ".join(f"GPU {i} {peaks[i]:,} MiB" for i in sorted(peaks, key=int))
