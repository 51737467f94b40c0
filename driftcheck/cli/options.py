"""Option helpers shared by the commands: report formats, id lists, the progress spinner."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click

_QUICK_EXIT = [False]


def exit_quickly() -> None:
    """Let the ``driftcheck`` command end this process without the interpreter's teardown once
    the command returns (:func:`driftcheck.cli.run`): a command calls it when what it built
    (a whole package's trees and index, the host's model) is of no further use and nothing it
    started is still running. Freeing those objects one by one took transformers' scan 4 s
    more after its report was written."""
    _QUICK_EXIT[0] = True


def quick_exit() -> bool:
    """Whether the command that ran called :func:`exit_quickly`."""
    return _QUICK_EXIT[0]


#: Report formats (``driftcheck.report.FORMATS``; kept here so ``--help`` stays fast).
REPORT_FORMATS = ("text", "json", "sarif", "github")


def id_list(_ctx: click.Context, _param: click.Parameter, value: tuple[str, ...]) -> list[str]:
    """``--disable a --disable b`` or ``--disable a,b``."""
    return [part for item in value for part in item.replace(",", " ").split()]


@contextmanager
def status(quiet: bool) -> Iterator[Callable[[str], None] | None]:
    """A rich spinner on stderr showing the scan's progress messages, on a terminal only."""
    if quiet or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.markup import escape

    with Console(stderr=True).status("scanning") as status:
        yield lambda message: status.update(escape(message))


def _client_options() -> list[Callable]:
    """How the client is read and reported: ``scan``, ``fix`` and ``timeline`` share them."""
    return [
        click.option(
            "--disable",
            multiple=True,
            callback=id_list,
            metavar="ID",
            help="Check, kind or rule id not to report (repeat, or comma-separate; "
            "'driftcheck rules list' shows them).",
        ),
        click.option(
            "--exclude",
            multiple=True,
            metavar="GLOB",
            help="Client files not to read, relative to its root (repeat; a folder excludes "
            "its files).",
        ),
        click.option(
            "--include",
            multiple=True,
            metavar="GLOB",
            help="Client files to read beyond what its packaging declares (scripts, notebooks; "
            "relative to its root; repeat).",
        ),
        click.option(
            "--config",
            "config_path",
            type=click.Path(exists=True, dir_okay=False),
            help="Settings file: a pyproject.toml ([tool.driftcheck]) or a TOML file of the same "
            "keys. Default: the directory client's pyproject.toml.",
        ),
    ]


def _model_option() -> Callable:
    """``--model``: ``scan``, ``fix`` and ``timeline`` check the client with the same served
    model."""
    return click.option(
        "--model",
        metavar="NAME_OR_PATH",
        help="The model the host serves, for hosts that build the model from its config "
        "(vLLM): a folder or config.json, a model id in the Hugging Face cache, or a "
        "built-in tiny model. Default: the probe's tiny Llama.",
    )


def client_options(func: Callable) -> Callable:
    """``--disable``, ``--exclude``, ``--include``, ``--config`` and ``--model``
    (``timeline``)."""
    for option in reversed([*_client_options(), _model_option()]):
        func = option(func)
    return func


def scan_options(func: Callable) -> Callable:
    """The options ``scan`` and ``fix`` share: the target, the baseline, what to read and
    report, the settings file and the user's rules."""
    options = [
        click.option(
            "--against",
            "against",
            metavar="SPEC",
            help="Target host: NAME==VERSION, a range or NAME@latest (newest matching release), "
            "NAME (installed) or a path. Default: the installed host.",
        ),
        click.option(
            "--host", "host", metavar="NAME", help="Host name when --against does not give one."
        ),
        click.option(
            "--baseline",
            metavar="VERSION",
            help="Host version the client was written against, or 'none' (no baseline: only "
            "what cannot work on the target). Default: the client's own pin.",
        ),
        *_client_options(),
        click.option(
            "--rules",
            "rule_dirs",
            multiple=True,
            type=click.Path(exists=True, file_okay=False),
            metavar="DIR",
            help="A folder of your own rules (<host>/<rule-id>.toml), used beside the built-in "
            "ones (repeat).",
        ),
        _model_option(),
        click.option(
            "--mined-only",
            is_flag=True,
            help="Run without the built-in drift rules (binding rules stay): only what the "
            "checks read from the host's own code.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def run_settings(params: dict) -> dict:
    """The library's keyword arguments for one run, from a command's parameters (the options of
    :func:`scan_options`): flags win over ``[tool.driftcheck]``.

    ``scan`` and ``fix`` read the settings the same way, through here.
    """
    client, config_path = params["client"], params["config_path"]
    against, host, baseline = params["against"], params["host"], params["baseline"]
    disable, exclude, rule_dirs = params["disable"], params["exclude"], params["rule_dirs"]
    include = params.get("include") or ()
    from driftcheck.config import config_for
    from driftcheck.registry import check_ids
    from driftcheck.rules import load_rules

    cfg = config_for(client, config_path)
    rules = load_rules(*(rule_dirs or cfg.rules))
    if params.get("mined_only"):
        rules = rules.mined_only()
    if disable:
        check_ids(disable, rules, where="--disable")
    else:
        check_ids(cfg.disable, rules, where=f"{cfg.path}: 'disable'")
    return {
        "against": against or cfg.against,
        "baseline": baseline if baseline is not None else cfg.baseline,
        "host": host or cfg.host,
        "disable": frozenset(disable or cfg.disable),
        "exclude": list(exclude or cfg.exclude),
        "include": list(include or cfg.include),
        "rules": rules,
        "model": params.get("model") or cfg.model,
        "config": cfg,
    }
