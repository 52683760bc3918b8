"""What keeps tool calls safe and accountable: approvals, audit, rate limits, breakers (the redactor they share is
`gateway.kernel.redaction`).

`guards.Safeguards` owns the store and hands the call pipeline its stages: `approvals.HoldForApproval`,
`ratelimit.ChargeToolBucket`, `breaker.GuardApi` (breaker per api and caller, concurrency per api, its slots
handed over fairly among callers by `fair_slots.FairSlots`) and `audit.RecordCall` (one row per call, failing
closed).
"""
