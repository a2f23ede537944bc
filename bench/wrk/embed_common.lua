-- embed_common.lua: shared by embed_tei.lua and embed_openai.lua (loaded with
-- dofile from the same folder). 64 varied ten-word English sentences; each
-- request posts the next SENTENCES of them (wrk arg 1, default 1), rotating, so
-- no server can answer from a cache of one body and token counts vary a little
-- (about 11 to 15 WordPiece tokens each), as real traffic does.
-- done() prints one machine-readable line for bench/embed.sh:
--   WRK_RESULT requests=N duration_us=N p50_us=N p99_us=N status_errors=N other_errors=N
local M = {}

M.sentences = {
  "The quick brown fox jumps over the lazy sleeping dog.",
  "Fresh bread from the corner bakery smells wonderful every morning.",
  "Our team finally shipped the new release late last night.",
  "Heavy rain flooded several streets near the old river bridge.",
  "She practiced the violin for three hours before the concert.",
  "The museum opened a new exhibit about ancient Roman roads.",
  "Please remember to water the plants while I am away.",
  "A small cafe downtown serves the best espresso in town.",
  "The committee postponed its decision until the next quarterly meeting.",
  "Children played football in the park until the sun set.",
  "He forgot his umbrella and got soaked on the way home.",
  "The spacecraft sent back detailed images of the distant moon.",
  "Local farmers expect a good harvest after the mild spring.",
  "My grandmother taught me how to knit warm woolen scarves.",
  "The airline cancelled dozens of flights because of the storm.",
  "Scientists discovered a new species of frog in the rainforest.",
  "The library extended its opening hours during the exam period.",
  "Traffic on the highway slowed to a crawl after the accident.",
  "We hiked up the mountain trail and watched the sunrise.",
  "The chef added a pinch of salt to balance the sauce.",
  "Investors reacted nervously to the latest inflation report on Tuesday.",
  "Her novel was translated into twelve languages within two years.",
  "The old lighthouse still guides fishing boats safely into harbor.",
  "Engineers tested the bridge for weeks before opening it publicly.",
  "A stray cat waited patiently outside the fish market door.",
  "The students presented their robotics project to the whole school.",
  "Winter tires improve grip considerably on icy mountain roads today.",
  "The orchestra rehearsed the symphony twice before the premiere night.",
  "Doctors recommend drinking water regularly throughout a hot summer day.",
  "The startup raised enough money to hire ten more engineers.",
  "Volunteers cleaned the beach and collected bags of plastic waste.",
  "The detective examined the footprints carefully near the garden gate.",
  "Our neighbors adopted a playful puppy from the animal shelter.",
  "The printer jammed again just before the important client meeting.",
  "Tourists crowded the narrow streets of the medieval town center.",
  "The teacher explained photosynthesis using a simple classroom experiment.",
  "Fast trains now connect the two largest cities in under hours.",
  "A gentle breeze carried the scent of pine through the valley.",
  "The software update fixed a bug that drained phone batteries.",
  "He carefully restored the antique clock that belonged to his father.",
  "The city council approved funding for three new public playgrounds.",
  "Migrating birds rested on the lake before continuing their journey south.",
  "She wrote a detailed report summarizing the survey results for management.",
  "The bakery sold out of croissants before nine in the morning.",
  "Astronomers observed a bright comet passing close to the sun.",
  "The basketball team celebrated their first championship in twenty years.",
  "Workers repaired the broken water pipe under the main street.",
  "The documentary explores how coral reefs recover from warming oceans.",
  "I usually read the news on my tablet during breakfast.",
  "The hotel offers free bicycles so guests can explore the island.",
  "Researchers measured air quality in twenty neighborhoods across the city.",
  "The puppy chewed through the charging cable while we slept.",
  "A famous painter donated several works to the regional gallery.",
  "Strong winds knocked down power lines across the northern county.",
  "The recipe calls for two cups of flour and three eggs.",
  "Our flight landed early, so we had time for lunch.",
  "The volunteers translated the safety instructions into four local languages.",
  "An old map revealed the location of a forgotten village well.",
  "The company introduced flexible working hours for all office staff.",
  "Snow covered the rooftops, and the whole town fell quiet.",
  "The marathon route passes through parks, bridges and historic squares.",
  "She fixed the leaking faucet herself after watching a short video.",
  "The professor's lecture on black holes drew a huge audience.",
  "Farmers' markets offer seasonal vegetables grown by nearby small farms.",
}

local function json_string(s)
  -- the sentences are plain ASCII; escape what JSON requires anyway
  return '"' .. s:gsub('[%c"\\]', function(c)
    if c == '"' then return '\\"' elseif c == "\\" then return "\\\\" end
    return string.format("\\u%04x", c:byte())
  end) .. '"'
end

-- bodies[i] = the JSON body starting at sentence i; built once per thread
function M.build(per_request, wrap_one, wrap_many)
  local n = #M.sentences
  local bodies = {}
  for i = 1, n do
    if per_request == 1 then
      bodies[i] = wrap_one(json_string(M.sentences[i]))
    else
      local parts = {}
      for j = 0, per_request - 1 do
        parts[#parts + 1] = json_string(M.sentences[(i - 1 + j) % n + 1])
      end
      bodies[i] = wrap_many("[" .. table.concat(parts, ",") .. "]")
    end
  end
  return bodies
end

-- installs wrk's init/request/done for one API: path, and how to wrap one
-- JSON string or one JSON array into a request body
function M.install(path, wrap_one, wrap_many)
  local bodies, idx, step
  local counter = 0
  local threads = {}

  function setup(thread)
    counter = counter + 1
    thread:set("tid", counter)
    threads[#threads + 1] = thread
  end

  function init(args)
    local per_request = tonumber(args[1] or "1")
    bodies = M.build(per_request, wrap_one, wrap_many)
    step = per_request
    -- threads start at different sentences so they do not send in lockstep
    idx = ((tid or 1) - 1) * 17 % #bodies
    wrk.method = "POST"
    wrk.path = path
    wrk.headers["Content-Type"] = "application/json"
  end

  function request()
    idx = (idx + step) % #bodies
    return wrk.format(nil, nil, nil, bodies[idx + 1])
  end

  function done(summary, latency, requests)
    local e = summary.errors
    io.write(string.format(
      "WRK_RESULT requests=%d duration_us=%d p50_us=%d p99_us=%d status_errors=%d other_errors=%d\n",
      summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
      e.status, e.connect + e.read + e.write + e.timeout))
  end
end

return M
