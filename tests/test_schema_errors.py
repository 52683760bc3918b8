"""The wording of refused instances: the first few errors, within a budget, never a regular expression in Python.

Each case here held the event loop for seconds before (`validate_arguments` sorted every error, and re-ran a spec's
`pattern` with Python's backtracking `re`); each answer is now found by a bounded walk. The walk's bound is a count
of keyword checks, so these tests run the real thing on hostile inputs: without the bounds they would take minutes.
"""

from __future__ import annotations

from executor_helpers import arg, make_tool
from jsonschema.exceptions import best_match

from gateway.execution import schema_errors
from gateway.execution.arguments import problems, validate_arguments
from gateway.execution.fastschema import format_holds, is_valid, pattern_matches

BACKTRACKING = r"^(\w+\s?)*$"  # exponential in Python's `re` on "aaaa…!"; linear in jsonschema_rs's engine


def _numbers_tool():  # type: ignore[no-untyped-def]
    return make_tool(arg("numbers", "query", {"type": "array", "items": {"type": "integer"}}),
                     arg("word", "query", {"type": "string", "pattern": BACKTRACKING}))


def test_a_backtracking_pattern_is_judged_and_worded_without_python_re() -> None:
    hostile = "a" * 5000 + "!"  # Python's re would not finish on this in a lifetime
    assert pattern_matches(BACKTRACKING, hostile) is False
    assert validate_arguments(_numbers_tool(), {"word": hostile}) == [
        f'word: expected a string matching {BACKTRACKING!r}, got "{"a" * 58}…']
    assert validate_arguments(_numbers_tool(), {"word": "two words"}) == []


def test_pattern_properties_and_the_keys_additional_properties_looks_past_use_the_same_engine() -> None:
    schema = {"type": "object", "patternProperties": {BACKTRACKING: {"type": "integer"}},
              "additionalProperties": False}
    hostile = "a" * 5000 + "!"
    assert [e.message for e in schema_errors.first_errors(schema, {hostile: 1}, 8)] == [
        f"{hostile!r} match none of the regexes {BACKTRACKING!r}"]
    assert [list(e.absolute_path) for e in schema_errors.first_errors(schema, {"fine": "x"}, 8)] == [["fine"]]


def test_only_the_first_errors_of_a_hundred_thousand_are_worded() -> None:
    found = validate_arguments(_numbers_tool(), {"numbers": ["x"] * 100_000})
    assert found == [f'numbers[{i}]: expected integer, got string "x"' for i in range(8)]


def test_a_wrong_item_after_a_long_valid_prefix_is_found_by_the_judge_not_walked_to() -> None:
    schema = {"type": "object", "$defs": {"pet": {"type": "object", "required": ["id"],
                                                  "properties": {"id": {"type": "integer"}}}},
              "properties": {"pets": {"type": "array", "items": {"$ref": "#/$defs/pet"}}}}
    instance = {"pets": [{"id": 1}] * 100_000 + [{"id": "x"}]}
    assert problems(schema, instance) == ['pets[100000].id: expected integer, got string "x"']


def test_a_walk_past_its_budget_stops_and_says_so() -> None:
    # One huge object: every key is walked by `additionalProperties` (no judge narrows objects).
    schema = {"type": "object", "additionalProperties": {"type": "integer"}, "required": ["missing"]}
    instance = {f"k{i}": i for i in range(schema_errors.BUDGET * 2)}
    assert problems(schema, instance) == [
        "(root): does not match the schema, somewhere too deep in a value too large for the gateway to say where"]


def test_any_of_and_one_of_keep_each_branchs_first_error_only() -> None:
    schema = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}]}
    [error] = schema_errors.first_errors(schema, [1] * 100_000, 8)
    assert error.message == "an array of 100000 item(s) is not valid under any of the given schemas"
    assert [e.message for e in error.context] == ["an array of 100000 item(s) is not of type 'string'",
                                                  "1 is not of type 'object'"]
    one_of = {"oneOf": [{"type": "integer"}, {"type": "number"}]}
    assert [e.message for e in schema_errors.first_errors(one_of, 2, 8)] == [
        "2 is valid under more than one of the given schemas"]
    assert schema_errors.first_errors(one_of, 2.5, 8) == []


def test_unique_items_is_decided_in_linear_time() -> None:
    schema = {"type": "array", "uniqueItems": True}
    distinct = [{"n": i} for i in range(50_000)]  # Python's check compares unhashable items pair by pair
    assert schema_errors.first_errors(schema, distinct, 8) == []
    assert [e.message for e in schema_errors.first_errors(schema, [*distinct, {"n": 7}], 8)] == [
        "the array has non-unique elements"]


def test_formats_are_checked_as_the_judge_checks_them_and_annotations_stay_annotations() -> None:
    assert format_holds("date", "2024-02-30") is False
    assert format_holds("hostname", "not a host name") is None  # an annotation, as it always was
    tool = make_tool(arg("when", "query", {"type": "string", "format": "date"}),
                     arg("host", "query", {"type": "string", "format": "hostname"}))
    assert validate_arguments(tool, {"when": "2024-02-29", "host": "not a host name"}) == []
    assert validate_arguments(tool, {"when": "yesterday"}) == ['when: expected a valid date, got "yesterday"']


def test_the_chat_requests_wrong_last_message_is_named() -> None:
    from gateway.server.api_schemas import CHAT_REQUEST_SCHEMA

    body = {"model": "m", "messages": [{"role": "user", "content": "x"}] * 4095 + [
        {"role": "user", "content": "x", "name": 1}]}
    assert not is_valid(CHAT_REQUEST_SCHEMA, body)
    error = best_match(schema_errors.first_errors(CHAT_REQUEST_SCHEMA, body, 8))
    assert list(error.absolute_path) == ["messages", 4095, "name"]
    assert error.message == "1 is not of type 'string'"
