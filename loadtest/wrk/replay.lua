-- Replays the requests record.mjs wrote, in order and round again, one connection after
-- another taking the next; at the end prints one JSON line bench.py reads.
-- Usage: wrk -s replay.lua <url> -- <requests-file>
-- No response() here: wrk then parses no bodies, which keeps one wrk thread fast enough to
-- saturate the fastest server of the benchmark. Its own count of answers with a status over
-- 399 is the error count.

local requests = {}
local next_request = 1

local function split(line, separator)
  local parts, from = {}, 1
  while true do
    local at = string.find(line, separator, from, true)
    if not at then
      parts[#parts + 1] = string.sub(line, from)
      return parts
    end
    parts[#parts + 1] = string.sub(line, from, at - 1)
    from = at + 1
  end
end

function init(args)
  for line in io.lines(args[1]) do
    local fields = split(line, "\t")
    local headers = {}
    if fields[3] ~= "" then
      for _, pair in ipairs(split(fields[3], "\31")) do
        local colon = string.find(pair, ":", 1, true)
        headers[string.sub(pair, 1, colon - 1)] = string.sub(pair, colon + 1)
      end
    end
    local body = fields[4] ~= "" and fields[4] or nil
    if body and not headers["content-type"] then
      headers["content-type"] = "application/octet-stream"
    end
    requests[#requests + 1] = wrk.format(fields[1], fields[2], headers, body)
  end
  if #requests == 0 then
    error("no requests in " .. args[1])
  end
end

function request()
  local formatted = requests[next_request]
  next_request = next_request % #requests + 1
  return formatted
end

function done(summary, latency, _)
  local e = summary.errors
  io.write(string.format(
    '{"requests":%d,"duration_us":%d,"bad_status":%d,"socket_errors":%d,"p50_us":%d,"p95_us":%d,"p99_us":%d}\n',
    summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(95), latency:percentile(99)))
end
