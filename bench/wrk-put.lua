-- SPDX-License-Identifier: LGPL-2.1-or-later
-- wrk-put.lua - wrk PUTs of one body to keys of its own per thread, for
-- bench/http-sink and pwb-objd (bench/README.md, "Small PUTs from wrk").
-- The body is the file named by the environment's WRK_BODY (4 KiB of
-- zeros without it). Keys: /t<thread>/<n>, n counting up per thread.
-- Example: wrk -t2 -c32 -d6s -s bench/wrk-put.lua http://127.0.0.1:PORT/
local path = os.getenv("WRK_BODY")
local body = string.rep("\0", 4096)
if path then
	local f = assert(io.open(path, "rb"))
	body = f:read("*a")
	f:close()
end
local ids = 0
function setup(thread)
	ids = ids + 1
	thread:set("id", ids)
end
function init(args)
	n = 0
end
function request()
	n = n + 1
	return wrk.format("PUT", "/t" .. id .. "/" .. n, nil, body)
end
