-- GCRA (generic cell rate algorithm) for one budget, run atomically by Redis: the same
-- rule as the in-process limiter (the `governor` crate), on Redis's clock.
--
-- KEYS[1]  the budget's key: {prefix}rl:{kind}:{id}:{per_minute}
-- ARGV[1]  the budget in requests per minute (n >= 1): a burst of n, and one request back
--          every T = 60 s / n (in whole microseconds, at least 1)
-- ARGV[2]  how many requests to take at once (1, or a reservation of up to 1,024; default 1);
--          at most 1/64 of those left are granted, and at least 1 while any is left
-- ARGV[3]  requests taken earlier and not used, given back first (default 0)
--
-- The key holds only the theoretical arrival time (TAT, Unix epoch microseconds) and
-- expires when the full budget is back (at most 60 s).
--
-- Returns {granted, remaining, retry_after_us, reset_at_us}: how many requests were taken
-- (0: refused; fewer than asked when fewer are left), the requests that may still be made
-- now, the wait before a refused request would be allowed (0 when granted), and the Unix
-- epoch microseconds at which the full budget is back.
local limit = tonumber(ARGV[1])
local want = math.max(tonumber(ARGV[2]) or 1, 1)
local back = math.max(tonumber(ARGV[3]) or 0, 0)
local t = math.max(math.floor(60000000 / limit), 1)
local tau = t * (limit - 1)
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local tat = tonumber(redis.call('GET', KEYS[1])) or now
tat = tat - back * t
if tat < now then
  tat = now
end
local earliest = tat - tau
if now < earliest then
  if back > 0 then
    redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', math.ceil((tat - now) / 1000))
  end
  return {0, 0, earliest - now, tat}
end
local available = math.floor((now - earliest) / t) + 1
-- A reservation is at most 1/64 of what is left, so the last requests of a budget are
-- counted one at a time: no instance holds requests another could have used.
local granted = math.min(want, math.max(math.floor(available / 64), 1))
local next_tat = tat + granted * t
-- '%d': a number argument would be sent with 14 significant digits, too few for
-- microseconds since the epoch.
redis.call('SET', KEYS[1], string.format('%d', next_tat), 'PX', math.ceil((next_tat - now) / 1000))
return {granted, available - granted, 0, next_tat}
