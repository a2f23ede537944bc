-- embed_openai.lua: POST /v1/embeddings with OpenAI's body,
--   {"input": "one sentence"} or {"input": ["s1", ..., "sN"]}
-- for llama-server (whose /v1/embeddings L2-normalizes, as TEI's default
-- does) and hearth's OpenAI route.
--   wrk -s bench/wrk/embed_openai.lua URL -- SENTENCES_PER_REQUEST
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local common = dofile(here .. "embed_common.lua")
common.install("/v1/embeddings",
  function(s) return '{"input":' .. s .. ',"encoding_format":"float"}' end,
  function(a) return '{"input":' .. a .. ',"encoding_format":"float"}' end)
