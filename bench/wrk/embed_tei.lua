-- embed_tei.lua: POST /embed with Text Embeddings Inference's body,
--   {"inputs": "one sentence"} or {"inputs": ["s1", ..., "sN"]}
-- for hearth and bench/peers/embed_uvicorn.py.
--   wrk -s bench/wrk/embed_tei.lua URL -- SENTENCES_PER_REQUEST
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local common = dofile(here .. "embed_common.lua")
common.install("/embed",
  function(s) return '{"inputs":' .. s .. ',"normalize":true}' end,
  function(a) return '{"inputs":' .. a .. ',"normalize":true}' end)
