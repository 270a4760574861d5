-- wrk script for `make bench`: GETs rotating over the paths listed in a file, and a JSON summary at the end.
-- Usage: wrk ... -s bench/wrk-urls.lua http://HOST:PORT -- PATHS_FILE
-- Every thread pre-builds its requests once (no per-request string building in Lua) and starts at its
-- own random offset, so the threads do not walk the objects in lockstep.

local requests = {}
local next_index = 1

function init(args)
	local file = args[1]
	if file == nil then
		error("wrk-urls.lua: pass the paths file after --")
	end
	for line in io.lines(file) do
		if line ~= "" then
			requests[#requests + 1] = wrk.format("GET", line)
		end
	end
	if #requests == 0 then
		error("wrk-urls.lua: no paths in " .. file)
	end
	math.randomseed(os.time() + tonumber(tostring({}):match("0x(%x+)") or "0", 16) % 100000)
	next_index = math.random(#requests)
end

function request()
	local r = requests[next_index]
	next_index = next_index % #requests + 1
	return r
end

-- One line the harness parses: requests, bytes, microseconds and the error counts.
function done(summary, latency, requests_unused)
	local e = summary.errors
	io.write(string.format(
		'WRK_JSON {"requests": %d, "bytes": %d, "duration_us": %d, "connect": %d, "read": %d, ' ..
		'"write": %d, "status": %d, "timeout": %d, "lat_mean_us": %.1f, "lat_p50_us": %d, "lat_p99_us": %d}\n',
		summary.requests, summary.bytes, summary.duration, e.connect, e.read, e.write, e.status,
		e.timeout, latency.mean, latency:percentile(50), latency:percentile(99)))
end
