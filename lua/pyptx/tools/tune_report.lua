--- Reports of a tuning sweep: the sorted table, CSV, JSON, an SVG bar
-- chart, and merging the JSON of several shards.
local tune = require "pyptx.tools.tune"

local M = {}

--- The measure a result is ranked by, as text: time on a GPU; on the
-- emulator ptxas registers, or instructions where there was no ptxas.
local function measure(r, timed)
  if r.status ~= "ok" then return "-" end
  if timed then return r.ms and ("%.4f ms"):format(r.ms) or "-" end
  if r.registers then return ("%s regs"):format(r.registers) end
  return ("%s insts"):format(r.instructions or "?")
end

--- The number a result's bar shows, and what it is.
local function bar_value(r, timed)
  if timed then return r.ms, "time per config (ms)" end
  if r.registers then return r.registers, "registers per config (emulator run: not timed)" end
  return r.instructions, "instructions per config (emulator run, no ptxas: not timed)"
end

--- "shard 13/20 is empty (12 configs)" for a shard with no configs (more
-- tasks than configs: not a failure, the merge completes without it), else nil.
function M.empty_shard(result)
  local sh = result.shard
  if #result.results > 0 or type(sh) ~= "table" or sh.n == 1 then return nil end
  return ("shard %d/%d is empty (%d configs)"):format(sh.i, sh.n, sh.configs)
end

--- The sorted table as text.
function M.table(result)
  local lines = { ("sweep %s on %s — %s"):format(result.name, result.device, result.ranking) }
  lines[#lines + 1] = ("%-4s %-36s %-8s %12s %6s %8s %7s  %s"):format("#", "config", "status", "measure", "regs", "smem", "insts", "note")
  for i, r in ipairs(result.results) do
    lines[#lines + 1] = ("%-4d %-36s %-8s %12s %6s %8s %7s  %s"):format(i, r.key, r.status, measure(r, result.timed),
      r.registers or "-", r.smem or "-", r.instructions or "-", (r.reason or "") .. (r.cached and " (cached)" or ""))
  end
  if result.best then lines[#lines + 1] = ("best: %s"):format(result.best.key)
  elseif M.empty_shard(result) then lines[#lines + 1] = M.empty_shard(result)
  else lines[#lines + 1] = "best: none (every config failed)" end
  return table.concat(lines, "\n") .. "\n"
end

--- Quote a CSV field (RFC 4180: one holding a comma, a quote, CR or LF).
local function csv_field(v)
  v = v == nil and "" or tostring(v)
  if v:find('[,"\r\n]') then return '"' .. v:gsub('"', '""') .. '"' end
  return v
end

--- CSV: one row per config, config keys as columns.
function M.csv(result)
  local keys, seen = {}, {}
  for _, r in ipairs(result.results) do
    for k in pairs(r.config) do if not seen[k] then seen[k] = true; keys[#keys + 1] = k end end
  end
  table.sort(keys)
  local head = {}
  for _, k in ipairs(keys) do head[#head + 1] = k end
  for _, k in ipairs { "status", "ms", "registers", "smem", "spills", "instructions", "reason" } do head[#head + 1] = k end
  local rows = { table.concat(head, ",") }
  for _, r in ipairs(result.results) do
    local row = {}
    for _, k in ipairs(keys) do row[#row + 1] = csv_field(r.config[k]) end
    for _, k in ipairs { "status", "ms", "registers", "smem", "spills", "instructions", "reason" } do row[#row + 1] = csv_field(r[k]) end
    rows[#rows + 1] = table.concat(row, ",")
  end
  return table.concat(rows, "\n") .. "\n"
end

--- JSON of the whole result (what --merge reads back).
function M.json(result)
  return tune.encode_json(result) .. "\n"
end

-- The second byte's range after a lead byte that narrows it (no overlong
-- forms, no surrogates, nothing past U+10FFFF).
local SECOND = { [0xE0] = { 0xA0, 0xBF }, [0xED] = { 0x80, 0x9F }, [0xF0] = { 0x90, 0xBF }, [0xF4] = { 0x80, 0x8F } }

--- Is ch (len bytes by its lead byte) one well-formed UTF-8 character XML
-- allows (not U+FFFE or U+FFFF)?
local function utf8_ok(ch, len)
  if #ch < len then return false end
  if len == 1 then return true end
  if not ch:sub(2):match("^[\128-\191]+$") then return false end
  local r = SECOND[ch:byte(1)]
  if r and (ch:byte(2) < r[1] or ch:byte(2) > r[2]) then return false end
  return ch ~= "\239\191\190" and ch ~= "\239\191\191"
end

--- Text as at most max (default: all) whole UTF-8 characters, with
-- control characters (C0, DEL; XML 1.0 forbids most) dropped and bytes
-- that are not UTF-8 shown as U+FFFD, so the SVG stays well-formed.
function M.clean_text(s, max)
  local out, n, i = {}, 0, 1
  s = tostring(s)
  while i <= #s and n < (max or math.huge) do
    local c = s:byte(i)
    local len = c < 0x80 and 1 or c >= 0xC2 and c <= 0xDF and 2 or c >= 0xE0 and c <= 0xEF and 3 or c >= 0xF0 and c <= 0xF4 and 4 or 0
    local ch = len > 0 and s:sub(i, i + len - 1) or nil
    if ch and not utf8_ok(ch, len) then ch = nil end
    if ch and len == 1 and (c < 0x20 or c == 0x7F) then ch = "" end
    out[#out + 1] = ch or "\239\191\189"
    if ch ~= "" then n = n + 1 end
    i = i + (ch and len or 1)
  end
  return table.concat(out)
end

--- Escape text for SVG (cleaned first: whole characters, no controls).
local function xml(s, max)
  return (M.clean_text(s, max):gsub("&", "&amp;"):gsub("<", "&lt;"):gsub(">", "&gt;"))
end

--- An SVG bar chart of the measure per config (failed configs marked).
function M.svg(result)
  local rows = result.results
  local bar_h, left, width = 18, 260, 420
  local first_ok = {}
  for _, r in ipairs(rows) do if r.status == "ok" then first_ok = r break end end
  local max, title = 0, select(2, bar_value(first_ok, result.timed))
  local function value(r) return (bar_value(r, result.timed)) end
  for _, r in ipairs(rows) do if r.status == "ok" and value(r) then max = math.max(max, value(r)) end end
  local h = 50 + #rows * (bar_h + 4)
  local out = {
    ('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="monospace" font-size="12">'):format(left + width + 120, h),
    ('<text x="10" y="20" font-size="14">%s — %s</text>'):format(xml(result.name), xml(title)),
  }
  for i, r in ipairs(rows) do
    local y = 30 + (i - 1) * (bar_h + 4)
    out[#out + 1] = ('<text x="10" y="%d">%s</text>'):format(y + 13, xml(r.key))
    if r.status == "ok" and value(r) and max > 0 then
      local w = math.max(1, width * value(r) / max)
      out[#out + 1] = ('<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>'):format(left, y, w, bar_h, i == 1 and "#2a7" or "#48c")
      out[#out + 1] = ('<text x="%.1f" y="%d">%s</text>'):format(left + w + 6, y + 13, xml(result.timed and ("%.4f"):format(value(r)) or value(r)))
    else
      out[#out + 1] = ('<text x="%d" y="%d" fill="#c33">failed: %s</text>'):format(left, y + 13, xml(r.reason or "", 60))
    end
  end
  out[#out + 1] = "</svg>"
  return table.concat(out, "\n") .. "\n"
end

--- Check one part's shard record (paths[k] names it): { i, n, configs }
-- with 1 <= i <= n and as many results as shard i of n holds.
local function check_part(p, path)
  local sh = p.shard
  if type(sh) ~= "table" or type(sh.i) ~= "number" or type(sh.n) ~= "number" or type(sh.configs) ~= "number"
     or sh.i < 1 or sh.i > sh.n then
    error(("tune --merge: %s has no shard record (i/n and the config count); write it again with this luaptx's tune --json")
      :format(path), 0)
  end
  local want = tune.shard_size(sh.configs, sh.i, sh.n)
  if #p.results ~= want then
    error(("tune --merge: %s (shard %d/%d of %d configs) holds %d results, not %d: it is incomplete or was edited")
      :format(path, sh.i, sh.n, sh.configs, #p.results, want), 0)
  end
end

--- Refuse a set of parts that is not exactly shards 1..n of one sweep:
-- another sweep, another n or config count, a shard given twice, one missing.
local function check_set(parts, paths)
  local first, seen, missing = parts[1].shard, {}, {}
  for k, p in ipairs(parts) do
    check_part(p, paths[k])
    local sh = p.shard
    if p.name ~= parts[1].name then error(("tune --merge: sweeps differ (%s vs %s)"):format(parts[1].name, p.name), 0) end
    if sh.n ~= first.n or sh.configs ~= first.configs then
      error(("tune --merge: %s is shard %d/%d of %d configs but %s is shard %d/%d of %d configs: not one split of one sweep")
        :format(paths[1], first.i, first.n, first.configs, paths[k], sh.i, sh.n, sh.configs), 0)
    end
    if seen[sh.i] then
      error(("tune --merge: shard %d/%d is given twice (%s and %s)"):format(sh.i, sh.n, paths[seen[sh.i]], paths[k]), 0)
    end
    seen[sh.i] = k
  end
  for i = 1, first.n do if not seen[i] then missing[#missing + 1] = ("%d/%d"):format(i, first.n) end end
  if #missing > 0 then
    error(("tune --merge: the set is incomplete: shard%s %s of %d configs %s missing (%d of %d given); " ..
           "a merge of a part would name a best of part of the sweep"):format(#missing > 1 and "s" or "",
           table.concat(missing, ", "), first.configs, #missing > 1 and "are" or "is", #parts, first.n), 0)
  end
end

--- Join shard results (decoded JSON; paths name them in errors) into one
-- sorted result, refusing a set that is not exactly shards 1..n of one sweep.
function M.merge(parts, paths)
  if #parts == 0 then error("tune --merge: no result files given", 0) end
  paths = paths or {}
  for k = 1, #parts do paths[k] = paths[k] or ("part " .. k) end
  check_set(parts, paths)
  local merged = { name = parts[1].name, device = parts[1].device, timed = parts[1].timed, ranking = parts[1].ranking, results = {},
                   shard = { i = 1, n = 1, configs = parts[1].shard.configs } }
  for _, p in ipairs(parts) do
    for _, r in ipairs(p.results) do merged.results[#merged.results + 1] = r end
  end
  tune.sort_results(merged.results, merged.timed)
  merged.best = merged.results[1] and merged.results[1].status == "ok" and merged.results[1] or nil
  return merged
end

return M
