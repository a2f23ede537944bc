-- soak_mix.lua: the requests of bench/soak.sh. wrk arg 1: "health" (every
-- request GET /health) or "models" (a fixed rotation of 12: 6 TEI /embed of
-- 1-3 sentences, 3 OpenAI /v1/embeddings, 2 /completion of 4 tokens, 1
-- streamed chat of 4 tokens); arg 2: the encoder's name, arg 3: the
-- generator's. soak.sh runs one wrk of each at once, so the cheap requests
-- make up the count while the model requests run all along beside them.
-- done() prints one machine-readable line for soak.sh:
--   SOAK_RESULT requests=N non2xx=N socket_errors=N
local mode, enc, gen = "models", "demo-minilm-l6", "demo-llama-tiny"
local texts = { "a short sentence", "the quick brown fox jumps over the lazy dog",
                "embedding servers batch requests from many clients" }
local n = 0
local threads = {}

function setup(thread) table.insert(threads, thread) end

function init(args)
  mode = args[1] or mode
  enc = args[2] or enc
  gen = args[3] or gen
  non2xx = 0
end

local json = { ["Content-Type"] = "application/json" }

function request()
  n = n + 1
  if mode == "health" then return wrk.format("GET", "/health") end
  local k = n % 12
  if k < 6 then
    local m = (n % 3) + 1
    local parts = {}
    for i = 1, m do parts[i] = '"' .. texts[((n + i) % #texts) + 1] .. '"' end
    return wrk.format("POST", "/embed", json, '{"inputs":[' .. table.concat(parts, ",") .. ']}')
  elseif k < 9 then
    return wrk.format("POST", "/v1/embeddings", json, '{"model":"' .. enc .. '","input":"' .. texts[(n % #texts) + 1] .. '"}')
  elseif k < 11 then
    return wrk.format("POST", "/completion", json, '{"prompt":"Once upon a time","n_predict":4,"seed":' .. n .. '}')
  else
    return wrk.format("POST", "/v1/chat/completions", json,
      '{"model":"' .. gen .. '","messages":[{"role":"user","content":"hi"}],"max_tokens":4,"stream":true}')
  end
end

function response(status, headers, body)
  if status < 200 or status > 299 then non2xx = non2xx + 1 end
end

function done(summary, latency, requests)
  local bad = 0
  for _, t in ipairs(threads) do bad = bad + (t:get("non2xx") or 0) end
  local e = summary.errors
  io.write(string.format("SOAK_RESULT requests=%d non2xx=%d socket_errors=%d\n", summary.requests, bad,
    e.connect + e.read + e.write + e.timeout))
end
