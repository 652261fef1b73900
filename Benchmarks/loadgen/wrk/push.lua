-- wrk script: POST /v1/notes/push with BATCH new notes of ~200 bytes per request, on one account.
-- Env: TOKEN (bearer token) and ORIGIN (the session's origin), BATCH (default 100), RUN (0-99, keeps client and edit
-- IDs of separate runs on one account apart). Client and edit IDs are 18-digit decimal strings, unique per
-- run, thread and request: valid MiniFlake values (positive 64-bit), which is all the server checks.
-- With TOKENS and ORIGINS (comma lists) instead, thread i uses account i (run -t N -c N: one connection each).
local function list(s) local t = {} for x in (s or ""):gmatch("[^,]+") do t[#t + 1] = x end return t end
local tokens = list(os.getenv("TOKENS") or os.getenv("TOKEN"))
local origins = list(os.getenv("ORIGINS") or os.getenv("ORIGIN"))
assert(#tokens > 0 and #tokens == #origins, "set TOKEN and ORIGIN, or TOKENS and ORIGINS of equal length")
local batch = tonumber(os.getenv("BATCH") or "100")
local run = tonumber(os.getenv("RUN") or "0")
local words = {}
for w in ("sync note list task idea draft meeting call buy milk fix bug read book plan trip review code send mail " ..
          "water plants call mom gym run swift server kinto store pull push merge cursor batch page token offline " ..
          "device laptop phone tablet backup"):gmatch("%S+") do words[#words + 1] = w end

local threads, counter = {}, 0
function setup(thread)
  thread:set("tid", #threads)
  thread:set("token", tokens[#threads % #tokens + 1])
  thread:set("origin", origins[#threads % #origins + 1])
  threads[#threads + 1] = thread
end

local texts = {}
function init(args)
  math.randomseed(1000 + tid)
  for i = 1, 512 do
    local parts, n = {}, 0
    while n < 200 do
      local w = words[math.random(#words)]
      parts[#parts + 1] = w
      n = n + #w + 1
    end
    texts[i] = table.concat(parts, " "):sub(1, 200)
  end
  wrk.method = "POST"
  wrk.path = "/v1/notes/push"
  wrk.headers["Authorization"] = "Bearer " .. token
  wrk.headers["Content-Type"] = "application/json"
  prefix = string.format("%02d%02d", run, tid)
end

rejected = 0 -- global: done() reads it from each thread
function request()
  local parts = {}
  for i = 1, batch do
    counter = counter + 1
    local n = string.format("%013d", counter)
    parts[i] = '{"clientID":"4' .. prefix .. n .. '","origin":"' .. origin .. '","editID":"5' .. prefix .. n ..
               '","text":"' .. texts[counter % 512 + 1] .. '"}'
  end
  return wrk.format(nil, nil, nil, '{"changes":[' .. table.concat(parts, ",") .. ']}')
end

function response(status, headers, body)
  -- every change must come back created
  if status ~= 200 or body:find('"status":"', 1, true) and (body:find('"rejected"', 1, true) or body:find('"reconciled"', 1, true)) then
    rejected = rejected + 1
  end
end

function done(summary, latency, requests)
  local failed = 0
  for _, t in ipairs(threads) do failed = failed + t:get("rejected") end
  local s = summary.duration / 1e6
  io.write(string.format(
    'WRKJSON {"phase":"push_b%d","requests":%d,"notes":%d,"wall_s":%.3f,"req_per_s":%.1f,"notes_per_s":%.1f,' ..
    '"p50_ms":%.3f,"p90_ms":%.3f,"p99_ms":%.3f,"max_ms":%.3f,"errors":%d,"non2xx":%d,"not_created":%d}\n',
    batch, summary.requests, summary.requests * batch, s, summary.requests / s, summary.requests * batch / s,
    latency:percentile(50) / 1e3, latency:percentile(90) / 1e3, latency:percentile(99) / 1e3, latency.max / 1e3,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.errors.status, failed))
end
