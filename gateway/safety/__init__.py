"""What keeps tool calls safe and accountable: approvals, audit, rate limits, breakers, redaction of secrets."""
