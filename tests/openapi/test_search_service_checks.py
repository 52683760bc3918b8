"""Tool search answers "is the shipments service up" with that service's own health check (gateway/offer/
service_checks.py): HERE Tracking is twenty-five services, each with its `/health` and `/version`, and BM25 reads the
service's name in all its operations and "up", "down" or "release" in none."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from gateway.offer.index import ToolIndex
from gateway.offer.service_checks import ServiceChecks
from gateway.offer.signals import WEIGHTS
from gateway.openapi import compile_document

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "apis-guru"
HERE = CORPUS / "here.com" / "tracking.json"
KUBERNETES = CORPUS / "kubernetes.io.json"


def _first(index: ToolIndex, query: str) -> str:
    return index.search(query, limit=5)[0].tool.name


@pytest.mark.skipif(not HERE.exists(), reason="HERE Tracking's spec is in ../shared/corpus, beside the repository")
def test_a_service_asked_whether_it_answers_is_answered_by_its_own_check() -> None:
    catalog = compile_document(json.loads(HERE.read_text()), api="here")
    lifted = ToolIndex(catalog)
    plain = ToolIndex(catalog, dataclasses.replace(WEIGHTS, service_check=0.0))
    asked = {"no webhook has reached us since midnight: is the notifications service down?":
             "get_notifications_v3_health",
             "our importer refuses unknown releases: which release of the bulk jobs API is live":
             "get_bulkjobs_v4_version",
             "is the labels v4 service alive right now": "get_labels_v4_health"}
    for query, check in asked.items():
        assert _first(lifted, query) == check, query
        assert _first(plain, query) != check, query  # without it the service's reads come first
    # no word asks whether something answers: the service's own operations, as before
    query = "list the notification channels registered for my app"
    assert _first(lifted, query) == _first(plain, query)


@pytest.mark.skipif(not HERE.exists(), reason="HERE Tracking's spec is in ../shared/corpus, beside the repository")
def test_the_checks_are_read_from_the_spec_and_a_request_naming_two_services_asks_neither() -> None:
    catalog = compile_document(json.loads(HERE.read_text()), api="here")
    tools = catalog.for_api("here")
    checks = ServiceChecks(tools)
    assert len(checks.checks) == 50  # twenty-five services, a health and a version each
    assert tools[checks.asked("is the locations v4 service healthy") or 0].name == "get_locations_v4_health"
    # `sensors` and `rules` are both services, each one of its words: neither is named
    assert checks.asked("check that the sensor rules service is up") is None
    assert checks.asked("list my shipments") is None


@pytest.mark.skipif(not KUBERNETES.exists(), reason="Kubernetes' spec is in ../shared/corpus, beside the repository")
def test_a_check_that_names_no_service_is_never_asked() -> None:
    # `/version/` (tagged `version`) is the cluster's: "version" alone names no service of it
    catalog = compile_document(json.loads(KUBERNETES.read_text()), api="kubernetes")
    assert ServiceChecks(catalog.for_api("kubernetes")).asked("which version of apps/v1 does the cluster serve") is None
