-- GCRA (generic cell rate algorithm) for one budget, run atomically by Redis: the same
-- rule as the in-process limiter (the `governor` crate), on Redis's clock.
--
-- KEYS[1]  the budget's key: {prefix}rl:{kind}:{id}:{per_minute}
-- ARGV[1]  the budget in requests per minute (n >= 1): a burst of n, and one request back
--          every T = 60 s / n (in whole microseconds, at least 1)
--
-- The key holds only the theoretical arrival time (TAT, Unix epoch microseconds) and
-- expires when the full budget is back (at most 60 s).
--
-- Returns {allowed (0|1), remaining, retry_after_us, reset_at_us}: the requests that may
-- still be made now, the wait before a refused request would be allowed (0 when allowed),
-- and the Unix epoch microseconds at which the full budget is back.
local limit = tonumber(ARGV[1])
local t = math.max(math.floor(60000000 / limit), 1)
local tau = t * (limit - 1)
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then
  tat = now
end
local earliest = tat - tau
if now < earliest then
  return {0, 0, earliest - now, tat}
end
local next_tat = tat + t
-- '%d': a number argument would be sent with 14 significant digits, too few for
-- microseconds since the epoch.
redis.call('SET', KEYS[1], string.format('%d', next_tat), 'PX', math.ceil((next_tat - now) / 1000))
return {1, math.floor((now + tau + t - next_tat) / t), 0, next_tat}
