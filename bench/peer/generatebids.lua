-- generatebids.lua: the wrk script of the server-level peer comparison
-- (BenchmarkServerPeer in cmd/bidding-server, bench/doc.go).
--
-- usage: wrk --latency -s generatebids.lua URL -- BODY GROUPS
--
-- Every connection sends POST /v1/generateBids with BODY (a generateBids
-- request of GROUPS interest groups) back to back. Every answer is checked:
-- status 200, GROUPS "interest_group" entries and no "error" in the body;
-- one that is not counts as bad (and the first bad answer is kept). At the
-- end wrk prints, besides its own report, two lines for the harness:
--
--   INFERBID_WRK {"requests":..,"duration_us":..,"errors":{..},"latency_us":{"p50":..,"p90":..,"p99":..,"max":..},"checked":..,"bad":..}
--   INFERBID_WRK_BAD <the first bad answer: status and up to 300 bytes of body>   (only when bad > 0)

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

local threads = {}

-- setup runs in the main Lua state, once per wrk thread.
function setup(thread)
  table.insert(threads, thread)
end

-- init runs in each thread's state: the request is formatted from wrk.body
-- after it, once (no Lua call per request).
function init(args)
  if #args ~= 2 then
    error("generatebids.lua: want arguments BODY GROUPS, got " .. #args)
  end
  wrk.body = args[1]
  groups = tonumber(args[2])
  checked = 0
  bad = 0
  first_bad = ""
end

function response(status, headers, body)
  checked = checked + 1
  local why = nil
  if status ~= 200 then
    why = "status " .. status
  elseif body:find('"error"', 1, true) then
    why = "an error"
  else
    local _, n = body:gsub('"interest_group"', "")
    if n ~= groups then
      why = n .. " bids, want " .. groups
    end
  end
  if why then
    bad = bad + 1
    if first_bad == "" then
      first_bad = why .. ": " .. body:sub(1, 300):gsub("[\r\n]", " ")
    end
  end
end

function done(summary, latency, requests)
  local n, nbad, sample = 0, 0, ""
  for _, t in ipairs(threads) do
    n = n + t:get("checked")
    nbad = nbad + t:get("bad")
    if sample == "" then
      sample = t:get("first_bad")
    end
  end
  local e = summary.errors
  io.write(string.format(
    'INFERBID_WRK {"requests":%d,"duration_us":%d,"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"latency_us":{"p50":%d,"p90":%d,"p99":%d,"max":%d},"checked":%d,"bad":%d}\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, n, nbad))
  if nbad > 0 then
    io.write("INFERBID_WRK_BAD " .. sample .. "\n")
  end
end
