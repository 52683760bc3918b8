from __future__ import annotations

import logging

import pytest

from gateway.kernel.redaction import Redactor, redact_logs

SECRET = "s3cr3t-log-value-42"


def test_messages_arguments_and_tracebacks_are_scrubbed(caplog: pytest.LogCaptureFixture) -> None:
    redactor = Redactor([SECRET])
    redact_logs(redactor)
    redact_logs(redactor)  # idempotent
    logger = logging.getLogger("some.library.child")
    with caplog.at_level(logging.DEBUG):
        logger.debug("headers: %r", [(b"authorization", f"Bearer {SECRET}".encode())])
        logger.info(f"plain {SECRET}")
        try:
            raise ValueError(f"bad token {SECRET}")
        except ValueError:
            logger.exception("failed")
        logger.info("nothing secret: %d", 5)
    assert SECRET not in caplog.text
    assert caplog.text.count("[REDACTED]") == 3
    assert "nothing secret: 5" in caplog.text


def test_records_keep_their_arguments_for_formatters_that_read_them(caplog: pytest.LogCaptureFixture) -> None:
    redactor = Redactor([SECRET])  # held here: redact_logs keeps it only weakly
    redact_logs(redactor)
    logger = logging.getLogger("gateway.tests.access_like")  # not under uvicorn.*: that one may not propagate
    with caplog.at_level(logging.INFO):
        logger.info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:1", "GET", "/healthz", "1.1", 200)
        logger.info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:1", "GET", f"/x?key={SECRET}", "1.1", 200)
    plain, secret = caplog.records[-2:]
    assert plain.args == ("127.0.0.1:1", "GET", "/healthz", "1.1", 200)
    assert len(secret.args) == 5 and SECRET not in str(secret.args)
    assert SECRET not in caplog.text and "[REDACTED]" in caplog.text


def test_secrets_learned_after_registration_are_scrubbed_and_dead_redactors_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import gc

    import gateway.kernel.redaction as logredact

    redactor = Redactor()
    redact_logs(redactor)
    redactor.add("late-token-9876")  # e.g. an OAuth2 access token fetched at run time
    logger = logging.getLogger("gateway.tests.late")
    with caplog.at_level(logging.INFO):
        logger.info("got %s", "late-token-9876")
    assert "late-token-9876" not in caplog.text and "[REDACTED]" in caplog.text
    assert any(ref() is redactor for ref in logredact._refs)
    del redactor
    gc.collect()
    assert logredact._refs == tuple(ref for ref in logredact._refs if ref() is not None)
