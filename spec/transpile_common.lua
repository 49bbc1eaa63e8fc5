--- What the transpile specs share (spec/transpile_spec.lua and the ptxas
-- comparisons split from it so that ctest runs them side by side): the
-- corpus, round trips through the transpiler, structural comparison, and
-- the cubin comparison of a corpus part.
local transpile = require "luaptx.transpile"
local ptxparse = require "pyptx.ptxparse"
local sugar = require "pyptx.tools.transpile_sugar"
local H = require "spec.helpers"
local luassert = require "luassert"

local M = {}

M.CORPUS = "spec/fixtures/ptx"
local CORPUS = M.CORPUS

--- Transpile a PTX file (sugared when asked) and trace the script's
-- module: its PTX, the script and what the script returns. Done once per
-- file and kind: several tests read the same round trip.
local trips = {}
function M.round_trip(path, sweet)
  local key = (sweet and "sugar\0" or "plain\0") .. path
  if not trips[key] then
    local script = transpile.transpile(ptxparse.read_file(path), path)
    if sweet then script = sugar.sugar(script) end
    local chunk = assert(loadstring(script, "=" .. path .. ".lua"))
    local m = chunk()
    trips[key] = { m.module:ptx(), script, m }
  end
  return unpack(trips[key], 1, 3)
end

--- Canonical text without debug information and blank lines: the script
-- drops .loc/.file/DWARF sections and the "debug" target modifier.
function M.structure(text)
  local canon = ptxparse.parse(text):canonical()
  canon = canon:gsub("\t%.loc[^\n]*\n", ""):gsub("\t%.file[^\n]*\n", ""):gsub(", debug\n", "\n")
  canon = canon:gsub("\n%.section[^\n{]*%s*%b{}", "\n"):gsub("\n@@DWARF[^\n]*", "")
  return (canon:gsub("\n%s*\n", "\n"))
end

--- Label names renumbered per function in order of appearance (--sugar
-- shortens them).
function M.labels(text)
  local out, map, n = {}, {}, 0
  for line in (text .. "\n"):gmatch("(.-)\n") do
    if line:match("^[^\t]*%.entry ") or line:match("^[^\t]*%.func ") then map, n = {}, 0 end
    out[#out + 1] = line:gsub("%$L[%w_$]*", function(l)
      if not map[l] then n = n + 1; map[l] = "$LBL" .. n end
      return map[l]
    end)
  end
  return table.concat(out, "\n")
end


--- Every .ptx file of the corpus.
function M.corpus()
  return H.find(CORPUS, "%.ptx$")
end

--- Every corpus file under part ("large/": the large ones; nil: all the
-- others) ptxas takes assembles transpiled (sugared when sweet), to the
-- same cubin when the input has no debug information. Returns how many
-- were compared cubin to cubin.
function M.assembles(sweet, part)
  local cases = {}
  for _, path in ipairs(M.corpus()) do                 -- transpiled and traced first: no ptxas needed
    local large = path:sub(#CORPUS + 2, #CORPUS + 7) == "large/"
    if large == (part == "large/") then
      local text = ptxparse.read_file(path)
      cases[#cases + 1] = { path = path, text = text, arch = text:match("%.target%s+([%w_]+)"),
        traced = (M.round_trip(path, sweet)) }
    end
  end
  H.need_ptxas()
  local same = 0
  for _, c in ipairs(cases) do   -- H.cubin: ptxas once per text and arch, also across spec files
    local want = H.cubin(c.text, c.arch)
    if want then   -- edge/ files exercise grammar ptxas refuses
      local got, log = H.cubin(c.traced, c.arch)
      assert(got, c.path .. ": " .. tostring(log))
      if not (c.text:find("\t%.loc") or c.text:find("%.section")) then
        luassert.are.equal(want, got, c.path)
        same = same + 1
      end
    end
  end
  return same
end

return M
