"""Token and cost budgets shared by every gateway instance and worker, on Redis (`gateway.redis`).

The same contract as `gateway.safety.budgets.BudgetBook` (reserve a model call, settle it with its usage), with
the windows in Redis, so a client's budget is one budget however many processes serve it. Each decision is one
Lua script with Redis's own clock:

- spent (two hashes per scope and window, tokens and cost): a field per slot of 1/100 of the window, summed over
  the slots inside the window (older slots are deleted as they are met): a sliding window to within 1%;
- held (a hash per scope and window): a field per call in flight, `tokens cost expiry`; a hold outlives its call's
  deadline by a margin, so the holds of an instance killed mid-call go away on their own;
- the agent's estimate (a string): what its previous call used, what its next call is held at.

Reserving waits (polling) while only holds stand in the way, as the in-process book waits for a settle.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import redis.asyncio as aioredis

from ..config.hooks_budgets import BudgetLimit, Budgets
from ..store.redis_scripts import run_script
from .budgets import FIRST_ESTIMATE, BudgetBook, Hold, check_limit, scope_label, windowed_scopes

PREFIX = "gateway:{budgets}:"
SLOTS = 100
"""Slots a window is counted in."""
HOLD_SECONDS = 900.0
"""How long a hold lasts at most (a killed instance's holds expire after this)."""
_POLL = (0.01, 0.2)

# KEYS: per scope its tokens, cost and holds hashes, then the agent's estimate; ARGV: hold id, first tokens, first
# cost, hold seconds, then per scope window, token limit (-1: none), cost limit (-1: none).
# Returns {'exceeded', scope index (0-based), tokens, cost} | {'wait'} | {'ok', tokens held, cost held}.
_RESERVE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local n = (#KEYS - 1) / 3
local estimate = redis.call('GET', KEYS[#KEYS])
local est_t, est_c = tonumber(ARGV[2]), tonumber(ARGV[3])
if estimate then
  local space = string.find(estimate, ' ')
  est_t = tonumber(string.sub(estimate, 1, space - 1))
  est_c = tonumber(string.sub(estimate, space + 1))
end
local function sum(key, oldest)
  local total = 0
  local fields = redis.call('HGETALL', key)
  for j = 1, #fields, 2 do
    if tonumber(fields[j]) <= oldest then redis.call('HDEL', key, fields[j])
    else total = total + tonumber(fields[j + 1]) end
  end
  return total
end
local blocked = false
for i = 0, n - 1 do
  local window = tonumber(ARGV[5 + 3 * i])
  local limit_t, limit_c = tonumber(ARGV[6 + 3 * i]), tonumber(ARGV[7 + 3 * i])
  local oldest = math.floor((now - window) / (window / 100))
  local spent_t, spent_c = sum(KEYS[1 + 3 * i], oldest), sum(KEYS[2 + 3 * i], oldest)
  if (limit_t >= 0 and spent_t >= limit_t) or (limit_c >= 0 and spent_c >= limit_c) then
    return {'exceeded', tostring(i), tostring(spent_t), tostring(spent_c)}
  end
  local held_t, held_c = 0, 0
  local holds = redis.call('HGETALL', KEYS[3 + 3 * i])
  for j = 1, #holds, 2 do
    local a, b, c = string.match(holds[j + 1], '(%S+) (%S+) (%S+)')
    if tonumber(c) < now then redis.call('HDEL', KEYS[3 + 3 * i], holds[j])
    else held_t = held_t + tonumber(a); held_c = held_c + tonumber(b) end
  end
  if (limit_t >= 0 and spent_t + held_t >= limit_t) or (limit_c >= 0 and spent_c + held_c >= limit_c) then
    blocked = true
  end
end
if blocked then return {'wait'} end
local expiry = now + tonumber(ARGV[4])
for i = 0, n - 1 do
  redis.call('HSET', KEYS[3 + 3 * i], ARGV[1], tostring(est_t) .. ' ' .. tostring(est_c) .. ' ' .. tostring(expiry))
  redis.call('EXPIRE', KEYS[3 + 3 * i], math.ceil(tonumber(ARGV[4])) + 1)
end
return {'ok', tostring(est_t), tostring(est_c)}
"""

# KEYS: as for _RESERVE; ARGV: hold id, tokens, cost, then per scope its window. The hold goes, the usage is
# counted in the current slot, and it becomes the agent's estimate.
_SETTLE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local n = (#KEYS - 1) / 3
for i = 0, n - 1 do
  local window = tonumber(ARGV[4 + i])
  local slot = tostring(math.floor(now / (window / 100)))
  redis.call('HDEL', KEYS[3 + 3 * i], ARGV[1])
  redis.call('HINCRBYFLOAT', KEYS[1 + 3 * i], slot, ARGV[2])
  redis.call('HINCRBYFLOAT', KEYS[2 + 3 * i], slot, ARGV[3])
  redis.call('EXPIRE', KEYS[1 + 3 * i], math.ceil(window) + 60)
  redis.call('EXPIRE', KEYS[2 + 3 * i], math.ceil(window) + 60)
end
if tonumber(ARGV[2]) > 0 or tonumber(ARGV[3]) > 0 then
  redis.call('SET', KEYS[#KEYS], ARGV[2] .. ' ' .. ARGV[3], 'EX', 86400)
end
return 0
"""


class SharedBudgetBook(BudgetBook):
    """`BudgetBook` whose agent and client windows are in Redis (the run's own budget stays the run's)."""

    def __init__(self, client: aioredis.Redis, url: str) -> None:
        """Windows on `client` (`RedisCounters.client`); `url` only names the server in errors."""
        super().__init__()
        self.url = url
        self._reserve = client.register_script(_RESERVE)
        self._settle = client.register_script(_SETTLE)

    async def reserve(self, budgets: Budgets, *, agent: str, client: str | None, run_tokens: int,
                      run_cost: float, first_cost: float = 0.0) -> Hold:
        if budgets.run is not None:
            check_limit(budgets.run, "run", None, run_tokens, run_cost, "this run")
        hold = Hold(id=secrets.token_hex(8), agent=agent, client=client,
                    scopes=windowed_scopes(budgets, agent, client))
        if not hold.scopes:
            return hold
        args: list[Any] = [hold.id, FIRST_ESTIMATE, repr(float(first_cost)), repr(HOLD_SECONDS)]
        for _, _, limit in hold.scopes:
            args += [repr(float(limit.window)), -1 if limit.tokens is None else limit.tokens,
                     -1 if limit.cost is None else repr(float(limit.cost))]
        keys = self._keys(hold)
        pause = _POLL[0]
        while True:
            answer = [_text(part) for part in await self._call(self._reserve, keys, args)]
            if answer[0] == "ok":
                hold.tokens, hold.cost = int(float(answer[1])), float(answer[2])
                return hold
            if answer[0] == "exceeded":
                scope, name, limit = hold.scopes[int(answer[1])]
                check_limit(limit, scope, name, int(float(answer[2])), float(answer[3]),
                            scope_label(scope, name, limit))
            await asyncio.sleep(pause)  # calls in flight hold the rest: look again once one may have settled
            pause = min(pause * 2, _POLL[1])

    async def settle(self, hold: Hold, *, tokens: int, cost: float) -> None:
        if not hold.scopes:
            return
        args: list[Any] = [hold.id, tokens, repr(float(cost))]
        args += [repr(float(limit.window)) for _, _, limit in hold.scopes]
        await self._call(self._settle, self._keys(hold), args)

    @staticmethod
    def _keys(hold: Hold) -> list[str]:
        keys = []
        for scope, name, limit in hold.scopes:
            base = f"{PREFIX}{scope}:{name}:{_window_key(limit)}"
            keys += [f"{base}:tokens", f"{base}:cost", f"{base}:held"]
        return [*keys, f"{PREFIX}estimate:{hold.agent}"]

    async def _call(self, script: Any, keys: list[str], args: list[Any]) -> Any:
        return await run_script(script, keys, args, self.url)


def _window_key(limit: BudgetLimit) -> str:
    return f"{limit.window:g}"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
