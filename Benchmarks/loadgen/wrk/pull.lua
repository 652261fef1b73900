-- wrk script: pulls one account's notes page by page (GET /v1/notes/changes?since=&limit=), following each page's
-- cursor; after the last page (hasMore false) it starts again from the beginning. With SINCE set, every request
-- is the same incremental pull from that cursor (the changes since it fit in one page).
-- Env: TOKEN, LIMIT (default 1000), SINCE (optional cursor), PHASE (name in the output).
local token = os.getenv("TOKEN") or error("TOKEN not set")
local limit = os.getenv("LIMIT") or "1000"
local since = os.getenv("SINCE")
local phase = os.getenv("PHASE") or (since and "pull_incr" or "pull_full")

local threads = {}
function setup(thread)
  threads[#threads + 1] = thread
end

-- globals: done() reads them from each thread
cursor, notes, passes, bad = nil, 0, 0, 0
function init(args)
  wrk.headers["Authorization"] = "Bearer " .. token
  cursor = since
end

function request()
  local path = "/v1/notes/changes?limit=" .. limit
  if cursor then path = path .. "&since=" .. cursor end
  return wrk.format("GET", path)
end

function response(status, headers, body)
  if status ~= 200 then bad = bad + 1; return end
  -- count notes: each has exactly one "serverID" key
  local n, pos = 0, 1
  while true do
    pos = body:find('"serverID":', pos, true)
    if not pos then break end
    n, pos = n + 1, pos + 11
  end
  notes = notes + n
  if since then return end
  local tail = body:sub(-80)
  local c = tail:match('"cursor":"([^"]+)"')
  if tail:find('"hasMore":true', 1, true) then cursor = c else cursor = nil; passes = passes + 1 end
end

function done(summary, latency, requests)
  local total, full = 0, 0
  for _, t in ipairs(threads) do
    total = total + t:get("notes")
    full = full + t:get("passes")
  end
  local s = summary.duration / 1e6
  io.write(string.format(
    'WRKJSON {"phase":"%s","requests":%d,"notes":%d,"complete_passes":%d,"wall_s":%.3f,"req_per_s":%.1f,' ..
    '"notes_per_s":%.1f,"p50_ms":%.3f,"p90_ms":%.3f,"p99_ms":%.3f,"max_ms":%.3f,"errors":%d,"non2xx":%d}\n',
    phase, summary.requests, total, full, s, summary.requests / s, total / s,
    latency:percentile(50) / 1e3, latency:percentile(90) / 1e3, latency:percentile(99) / 1e3, latency.max / 1e3,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.errors.status))
end
