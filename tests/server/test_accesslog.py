from __future__ import annotations

import asyncio
import io
import logging
import logging.config

import pytest
from uvicorn.logging import AccessFormatter as UvicornAccessFormatter

from gateway.server.accesslog import DEFAULT_FORMAT, AccessFormatter, AfterResponseLogger, log_config

REQUESTS = [
    ("127.0.0.1:50000", "POST", "/agents/clerk/tools/listIssues", "1.1", 200),
    ("[::1]:8080", "GET", "/agents?x=1&y=%20", "1.1", 404),
    ("10.0.0.2:1", "DELETE", "/mcp/clerk", "2", 202),
    ("127.0.0.1:2", "GET", "/healthz", "1.0", 599),  # no phrase for this status
    ("127.0.0.1:3", "POST", "/v1/chat/completions", "1.1", 500),
]


def _record(args: tuple[object, ...], level: int = logging.INFO) -> logging.LogRecord:
    return logging.LogRecord("uvicorn.access", level, __file__, 1, '%s - "%s %s HTTP/%s" %d', args, None)


@pytest.mark.parametrize("use_colors", [False, True])
@pytest.mark.parametrize("level", [logging.INFO, logging.WARNING])
def test_lines_are_uvicorns_own(use_colors: bool, level: int) -> None:
    ours = AccessFormatter(DEFAULT_FORMAT, use_colors=use_colors)
    theirs = UvicornAccessFormatter(DEFAULT_FORMAT, use_colors=use_colors)
    for args in REQUESTS * 2:  # the second round comes from the per-status and per-level caches
        assert ours.format(_record(args, level)) == theirs.format(_record(args, level))


def test_another_format_is_left_to_uvicorn() -> None:
    fmt = "%(asctime)s %(client_addr)s %(status_code)s %(request_line)s"
    ours = AccessFormatter(fmt, use_colors=False, datefmt="%Y")
    theirs = UvicornAccessFormatter(fmt, use_colors=False, datefmt="%Y")
    for args in REQUESTS:
        assert ours.format(_record(args)) == theirs.format(_record(args))


def test_log_config_is_uvicorns_with_this_formatter(capsys: pytest.CaptureFixture[str]) -> None:
    from uvicorn.config import LOGGING_CONFIG

    config = log_config()
    assert config["formatters"]["access"]["()"] == "gateway.server.accesslog.AccessFormatter"
    assert config["handlers"] == LOGGING_CONFIG["handlers"]
    assert {k: v for k, v in config.items() if k not in ("formatters", "handlers")} == {
        k: v for k, v in LOGGING_CONFIG.items() if k not in ("formatters", "handlers")}
    assert LOGGING_CONFIG["formatters"]["access"]["()"] == "uvicorn.logging.AccessFormatter"  # not changed in place
    assert LOGGING_CONFIG["handlers"]["access"]["class"] == "logging.StreamHandler"
    loggers = [logging.getLogger(name) for name in config["loggers"]]
    saved = [(logger.handlers[:], logger.level, logger.propagate) for logger in loggers]
    try:
        logging.config.dictConfig(config)
        logging.getLogger("uvicorn.access").info('%s - "%s %s HTTP/%s" %d', *REQUESTS[0])
    finally:  # the loggers as they were (their new handlers hold this test's captured stdout)
        for logger, (handlers, level, propagate) in zip(loggers, saved, strict=True):
            logger.handlers[:], logger.level, logger.propagate = handlers, level, propagate
    line = 'INFO:     127.0.0.1:50000 - "POST /agents/clerk/tools/listIssues HTTP/1.1" 200 OK\n'
    assert capsys.readouterr().out == line


def test_lines_logged_on_the_loop_are_made_and_written_on_its_next_turn_in_order() -> None:
    stream = io.StringIO()
    logger = logging.getLogger("test.accesslog.after_response")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False

    async def serve() -> list[str]:
        after_response = AfterResponseLogger(logger, asyncio.get_running_loop())
        assert after_response.hasHandlers() and after_response.name == logger.name  # the logger's own
        seen = []
        for n in range(3):
            after_response.info('%s - "%s %s HTTP/%s" %d', *REQUESTS[n])
        seen.append(stream.getvalue())  # what had been written when the (response) work went on
        await asyncio.sleep(0)
        seen.append(stream.getvalue())
        return seen

    try:
        during, after = asyncio.run(serve())
    finally:
        logger.removeHandler(handler)
    assert during == ""
    assert after.splitlines() == [f'{a} - "{m} {p} HTTP/{v}" {s}' for a, m, p, v, s in REQUESTS[:3]]
