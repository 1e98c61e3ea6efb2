"""The command line without a process: flags, their defaults and variables, and the one-line errors.

Every case builds the parser and the configuration from an :class:`~llmtap.config.Environment` made
here (never this process's), and no case starts a sidecar.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llmtap.cli import main
from llmtap.cli.parser import build_parser, subcommands
from llmtap.cli.query import Source, StoreReader
from llmtap.config import Environment, RunConfig
from llmtap.errors import UsageError
from llmtap.options import flags


@pytest.fixture(autouse=True)
def _logging_kept() -> Iterator[None]:
    """``main`` sets up logging for its process: this one's is put back."""
    root = logging.getLogger()
    handlers = root.handlers[:]
    levels = {name: logging.getLogger(name).level for name in ("", "llmtap.calls", "mitmproxy")}
    yield
    root.handlers[:] = handlers
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


def run_config(*argv: str, env: dict[str, str] | None = None) -> RunConfig:
    environment = Environment.of(env or {})
    return RunConfig.from_flags(build_parser(environment).parse_args(["run", *argv]), environment)


def one_line_error(capsys: pytest.CaptureFixture[str], *argv: str, env: dict[str, str] | None = None) -> str:
    assert main(list(argv), Environment.of(env or {})) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    return err


def test_every_command_runs_the_function_its_module_registered() -> None:
    commands = subcommands(build_parser(Environment.of({})))
    assert {"run", "sql", "report", "check-cost", "explain-cost", "explain-latency", "reconcile", "exec"} <= set(
        commands
    )
    for name, p in commands.items():
        func = p.get_default("func")
        assert callable(func) and func.__name__.startswith("cmd_"), name


def test_run_without_flags_is_the_config_types_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = run_config()
    defaults = RunConfig()
    for f in flags(RunConfig):
        if f.name not in ("data_dir", "store"):
            assert getattr(cfg, f.name) == getattr(defaults, f.name), f.name
    assert cfg.data_dir == tmp_path / "llmtap-data"  # resolved
    assert cfg.store == "chdb://llmtap-data/store"  # under the data dir, as given


def test_a_flag_beats_its_variable_which_beats_the_default() -> None:
    env = {"LLMTAP_LISTEN": "127.0.0.1:18080", "LLMTAP_DRAIN_TIMEOUT": "5m", "LLMTAP_SPOOL_MAX_MB": "64"}
    cfg = run_config("--listen", "127.0.0.1:28080", env=env)
    assert (cfg.listen, cfg.drain_timeout, cfg.spool_max_mb) == (("127.0.0.1", 28080), 300.0, 64)
    assert run_config("--alert-interval", "2m").alert_interval_s == 120.0


def test_repeatable_flags_add_to_their_variables_list() -> None:
    cfg = run_config(
        "--intercept", "b.internal", "--connect-to", "api.openai.com:443:127.0.0.1:9",
        env={"LLMTAP_INTERCEPT": "a.internal:8000, c.internal", "LLMTAP_ADMIN_ALLOWED_HOST": "llmtap.svc"},
    )  # fmt: skip
    assert cfg.intercept == ["a.internal:8000", "c.internal", "b.internal"]
    assert cfg.connect_to == {("api.openai.com", 443): ("127.0.0.1", 9)}
    assert cfg.admin_allowed_hosts == ["llmtap.svc"]


def test_switches_and_the_otel_variables_flags_stand_for() -> None:
    env = {"LLMTAP_CAPTURE_CONTENT": "yes", "OTEL_SERVICE_NAME": "checkout", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}
    cfg = run_config(env=env)
    assert (cfg.capture_content, cfg.allow_open_proxy, cfg.service, cfg.otlp_endpoint) == (
        True,
        False,
        "checkout",
        "http://c",
    )
    cfg = run_config("--service", "cli", env={**env, "LLMTAP_SERVICE": "", "LLMTAP_CAPTURE_CONTENT": "0"})
    assert (cfg.service, cfg.capture_content) == ("cli", False)
    assert run_config(env={**env, "LLMTAP_SERVICE": ""}).service == ""  # set, though empty: no fallback


def test_secrets_are_read_from_their_files(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("s3cret\n")
    (tmp_path / "auth").write_text("user:pass\n")
    env = {"LLMTAP_PROXY_AUTH_FILE": str(tmp_path / "auth")}
    cfg = run_config("--admin-token-file", str(tmp_path / "token"), env=env)
    assert (cfg.admin_token, cfg.proxy_auth) == ("s3cret", "user:pass")


@pytest.mark.parametrize(
    ("argv", "env", "needles"),
    [
        (["--listen", "127.0.0.1:99999"], {}, ["--listen", "1-65535"]),
        (["--admin", "127.0.0.1:0x50"], {}, ["--admin", "HOST:PORT"]),
        (["--spool-max-mb", "-5"], {}, ["--spool-max-mb", "'-5'"]),
        ([], {"LLMTAP_SPOOL_MAX_MB": "lots"}, ["--spool-max-mb", "'lots'", "$LLMTAP_SPOOL_MAX_MB"]),
        (["--drain-timeout", "soon"], {}, ["--drain-timeout", "duration", "'soon'"]),
        (["--alert-interval", "0.5s"], {}, ["--alert-interval", "at least 1s"]),
        (["--connect-to", "api.openai.com:443"], {}, ["--connect-to", "HOST:PORT:ADDR:PORT"]),
        (["--intercept", "host:port"], {}, ["--intercept", "'host:port'"]),
        (["--content-retention-days", "-1"], {}, ["--content-retention-days", ">= 0"]),
        (["--admin-token-file", "/nonexistent/token"], {}, ["--admin-token-file", "cannot read"]),
    ],
)
def test_a_bad_value_is_one_line_naming_the_flag(
    capsys: pytest.CaptureFixture[str], argv: list[str], env: dict[str, str], needles: list[str]
) -> None:
    with pytest.raises(UsageError) as e:
        run_config(*argv, env=env)
    for needle in needles:
        assert needle in str(e.value), (needle, str(e.value))
    err = one_line_error(capsys, "run", *argv, env=env)  # the CLI says it as one line, exit 2
    assert err.startswith("llmtap run: ") and needles[0] in err


def test_every_run_flag_says_its_default_and_its_variable() -> None:
    run = subcommands(build_parser(Environment.of({})))["run"]
    help_of = {a.dest: a.help or "" for a in run._actions}
    for f in flags(RunConfig):
        assert f"[${f.env}]" in help_of[f.name], f.name
        if f.default_help:
            assert f"(default {f.default_help})" in help_of[f.name], f.name
    assert "(default 30s)" in help_of["drain_timeout"] and "(default 127.0.0.1:8080)" in help_of["listen"]


def test_the_parser_names_every_variable_it_reads() -> None:
    read = build_parser(Environment.of({})).env_vars
    assert {f.env for f in flags(RunConfig)} <= read
    assert {"LLMTAP_LOG_LEVEL", "LLMTAP_FORMAT", "LLMTAP_MOCK_LISTEN", "LLMTAP_PROXY_PASSWORD"} <= read


def test_the_read_commands_defaults_come_from_the_environment_given() -> None:
    env = Environment.of({"LLMTAP_DATA_DIR": "/srv/llmtap", "LLMTAP_ADMIN": "", "LLMTAP_FORMAT": "CSV"})
    args = build_parser(env).parse_args(["sql", "SELECT 1"])
    assert (args.data_dir, args.admin, args.format) == ("/srv/llmtap", "", "CSV")
    reader = StoreReader.from_args(args, env)
    assert reader.source() == Source(store="chdb:///srv/llmtap/store")  # --admin '': never ask a sidecar
    assert reader.source() is reader.source()  # found once


def test_a_store_that_is_not_there_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for admin in ([], ["--admin", ""]):  # the sidecar on the data dir, else the store; or the store only
        err = one_line_error(capsys, "sql", "SELECT 1", "--data-dir", str(tmp_path / "none"), *admin)
        assert "no llmtap store" in err and not (tmp_path / "none").exists()  # a reader never creates one


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["check-cost", "--by", "colour", "--admin", ""], "--by takes"),
        (["explain-cost", "--by", "colour"], "--by takes"),
        (["explain-latency", "--quantile", "p99"], "--quantile must be between"),
        (["explain-cost", "--window", "2d", "--baseline", "7d"], "--window must be"),
        (["explain-cost", "--window", "1x"], "--window: expected a duration"),
        (["reconcile", "--provider", "openai"], "give the cost report"),
    ],
)
def test_bad_input_to_the_read_commands_is_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    err = one_line_error(capsys, *argv)
    assert err.startswith(f"llmtap {argv[0]}: ") and needle in err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["check-cost", "--threshold", "abc"], "20%"),
        (["check-cost", "--min-samples", "0"], ">= 1"),
        (["run", "--log-format", "xml"], "invalid choice"),
        (["nonsense"], "unknown command 'nonsense'"),
    ],
)
def test_what_argparse_refuses_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    with pytest.raises(SystemExit) as e:
        build_parser(Environment.of({})).parse_args(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and needle in err and "--help" in err


def test_check_cost_reads_its_threshold_as_a_fraction() -> None:
    args: Any = build_parser(Environment.of({})).parse_args(["check-cost", "--threshold", "35%"])
    assert args.threshold == pytest.approx(0.35) and isinstance(args, argparse.Namespace)


@pytest.mark.parametrize(("text", "value"), [("20%", 0.2), ("0.2", 0.2), ("1", 1.0), ("150%", 1.5), ("0", 0.0)])
def test_a_threshold_is_a_percentage_or_a_fraction(text: str, value: float) -> None:
    args: Any = build_parser(Environment.of({})).parse_args(["check-cost", "--threshold", text])
    assert args.threshold == pytest.approx(value)


@pytest.mark.parametrize("text", ["20", "1.5", "58"])
def test_a_bare_threshold_above_1_is_refused_as_ambiguous(capsys: pytest.CaptureFixture[str], text: str) -> None:
    with pytest.raises(SystemExit) as e:
        build_parser(Environment.of({})).parse_args(["check-cost", "--threshold", text])
    assert e.value.code == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert err.startswith("llmtap check-cost: argument --threshold: ") and f"({text}%)" in err and "ambiguous" in err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["run", "--lisen", "127.0.0.1:1"], "llmtap run: unknown flag --lisen: did you mean --listen?"),
        (["sql", "SELECT 1", "--formt", "CSV"], "llmtap sql: unknown flag --formt: did you mean --format?"),
        (["check-cost", "--treshold=20%"], "llmtap check-cost: unknown flag --treshold: did you mean --threshold?"),
        (["report", "--zzzz"], "llmtap report: unknown flag --zzzz (see"),
        (["sql", "SELECT 1", "extra"], "llmtap sql: unexpected argument 'extra'"),
        (["chek-cost"], "llmtap: unknown command 'chek-cost': did you mean check-cost?"),
    ],
)
def test_an_unknown_flag_is_named_by_its_command_with_the_likely_one(
    capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    with pytest.raises(SystemExit) as e:
        build_parser(Environment.of({})).parse_args(argv)
    assert e.value.code == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert err.startswith(said), err


def test_the_environment_is_read_once_into_types() -> None:
    env = Environment.of(
        {
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod, team = ml,broken",
            "LLMTAP_FAULT_INJECT": "sink, adapter",
            "LLMTAP_TEST_CACHE_TTL": "4s",
            "LLMTAP_ADMIN_QUERY_TIMEOUT_S": "5",
            "LLMTAP_ADMIN_QUERY_MAX_ROWS": "many",  # a stray value: the default
            "LLMTAP_MOCK_DELAY_MS": "0",
        }
    )
    assert env.otlp.protocol == "grpc" and env.resource_attributes == {"deployment.environment": "prod", "team": "ml"}
    assert env.faults == {"sink", "adapter"} and env.cache_ttl_s == 4.0
    assert (env.query_limits.max_execution_time, env.query_limits.max_result_rows) == (5, 1_000_000)
    assert env.mock.delay_ms == 0.0 and env.mock.events is None
    assert dataclasses.replace(RunConfig(), env=env).env.faults == {"sink", "adapter"}
