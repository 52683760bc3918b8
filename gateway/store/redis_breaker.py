"""An api's circuit breaker in Redis, one for every gateway instance: the Lua functions the slots' scripts share.

With `gateway.redis` set, an api that fails five times in a row is paused for every instance, not only for the one
that saw the failures. The breaker is a hash per api: `consecutive` failures, `opened` (when it opened), `probe`
(until when a half-open probe holds the single pass). Same states as `gateway.safety.breaker.CircuitBreaker`.

The breaker has no script of its own: a call's way in asks its state and its way out records its verdict in the
same script that takes or gives back its slot (`gateway.store.redis_slots`), so each is one round trip, atomic with
Redis's own clock. The functions below are prepended to those scripts.
"""

from __future__ import annotations

# `breaker_state(key, now, reset)`: the breaker's state (`key`, its hash) at `now`: 'closed', 'open' (with the
# seconds left), 'probe' (this call takes the half-open pass) or 'held' (another call holds it, until its lease
# ends). `give_back_probe(key)`: a held probe is given back (its call ended with no verdict: cancelled, left the
# queue). `record_verdict(key, verdict, failures, reset)`: 1 ok closes it; 0 failed counts a failure and opens it at
# `failures` in a row (or when the probe failed); -1 none gives a held probe back. Returns the failures in a row.
# `now`: Redis's clock, read once per script (before the functions, which see it).
BREAKER = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000

local function breaker_state(key, now, reset)
  local held = redis.call('HMGET', key, 'opened', 'probe')
  local opened = tonumber(held[1] or '0')
  if opened == 0 then return 'closed', 0 end
  if now - opened < reset then return 'open', opened + reset - now end
  local probe = tonumber(held[2] or '0')
  if probe > now then return 'held', probe - now end
  return 'probe', 0
end

local function give_back_probe(key)
  if tonumber(redis.call('HGET', key, 'probe') or '0') > 0 then redis.call('HSET', key, 'probe', '0') end
end

local function record_verdict(key, verdict, failures, reset)
  local probing = tonumber(redis.call('HGET', key, 'probe') or '0') > 0
  local consecutive = 0
  if verdict == 1 then
    redis.call('DEL', key)
  elseif verdict == -1 then
    if probing then redis.call('HSET', key, 'probe', '0') end
  else
    consecutive = redis.call('HINCRBY', key, 'consecutive', 1)
    if probing or consecutive >= failures then
      redis.call('HSET', key, 'opened', tostring(now), 'probe', '0')
    end
    redis.call('EXPIRE', key, math.ceil(reset * 10 + 3600))
  end
  return consecutive
end
"""
