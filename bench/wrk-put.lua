-- wrk script for `make bench`: PUTs of one fixed-size body rotating over the paths listed in a file.
-- Usage: wrk ... -s bench/wrk-put.lua http://HOST:PORT -- PATHS_FILE BODY_BYTES
-- The body is built once per thread; every request carries it with a Content-Length.

local requests = {}
local next_index = 1

function init(args)
	local file, size = args[1], tonumber(args[2])
	if file == nil or size == nil then
		error("wrk-put.lua: pass the paths file and the body size after --")
	end
	local body = string.rep("FastTierBench-01", math.floor(size / 16)) .. string.rep("x", size % 16)
	for line in io.lines(file) do
		if line ~= "" then
			requests[#requests + 1] = wrk.format("PUT", line, {["Content-Type"] = "application/octet-stream"}, body)
		end
	end
	if #requests == 0 then
		error("wrk-put.lua: no paths in " .. file)
	end
	math.randomseed(os.time() + tonumber(tostring({}):match("0x(%x+)") or "0", 16) % 100000)
	next_index = math.random(#requests)
end

function request()
	local r = requests[next_index]
	next_index = next_index % #requests + 1
	return r
end

function done(summary, latency, requests_unused)
	local e = summary.errors
	io.write(string.format(
		'WRK_JSON {"requests": %d, "bytes": %d, "duration_us": %d, "connect": %d, "read": %d, ' ..
		'"write": %d, "status": %d, "timeout": %d, "lat_mean_us": %.1f, "lat_p50_us": %d, "lat_p99_us": %d}\n',
		summary.requests, summary.bytes, summary.duration, e.connect, e.read, e.write, e.status,
		e.timeout, latency.mean, latency:percentile(50), latency:percentile(99)))
end
