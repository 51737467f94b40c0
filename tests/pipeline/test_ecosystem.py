"""Whole ecosystems as clients: every file of a big real package is read, nothing crashes, and
what had to be skipped is summarised with a reason. (Slow: minutes; marked.)"""

from __future__ import annotations

import json
import time

import pytest
from conftest import run_cli

pytestmark = [pytest.mark.network, pytest.mark.slow]


@pytest.mark.parametrize(
    ("client", "host", "extra"),
    [
        # vLLM's own pin on torch (2.9.1) is the baseline.
        ("vllm==0.16.0", "torch==2.10.0", ()),
        # The newest transformers (2,900 files); its own pin on torch (>=2.6) is the baseline.
        ("transformers==5.24.0", "torch==2.10.0", ()),
    ],
)
def test_scan_a_whole_package_against_torch(client: str, host: str, extra: tuple[str, ...]):
    t0 = time.perf_counter()
    result = run_cli("scan", client, "--against", host, *extra, "--format", "json", "--quiet")
    seconds = time.perf_counter() - t0
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert result.exit_code in (0, 1), result.stderr
    data = json.loads(result.stdout)
    assert data["client"]["name"] in client and data["host"]["target"] == host.split("==")[1]
    for entry in data["skipped"]:
        assert entry["file"] and entry["reason"], entry
    print(
        f"{client} against {host}: {len(data['findings'])} findings, "
        f"{len(data['skipped'])} skipped, {data['stats']['uses']} uses, {seconds:.0f} s"
    )
