--- A small JSON encoder/decoder for tuning results (objects, arrays,
-- strings, numbers, booleans, null). Keys are written sorted, so output is
-- deterministic.
local M = {}

local ESC = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f", ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t" }

--- Is t a sequence (1..n, no other keys)?
local function is_array(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n == #t
end

--- Encode a Lua value; indent is an optional string for pretty output.
function M.encode(v, indent, depth)
  depth = depth or 0
  local tv = type(v)
  if v == nil or v == M.null then return "null" end
  if tv == "boolean" then return tostring(v) end
  if tv == "number" then
    if v ~= v or v == math.huge or v == -math.huge then return "null" end
    return v == math.floor(v) and math.abs(v) < 1e15 and ("%d"):format(v) or ("%.17g"):format(v)
  end
  if tv == "string" then return '"' .. v:gsub('[%c"\\]', function(c) return ESC[c] or ("\\u%04x"):format(c:byte()) end) .. '"' end
  if tv ~= "table" then error("json: cannot encode a " .. tv, 2) end
  local nl = indent and ("\n" .. indent:rep(depth + 1)) or ""
  local close = indent and ("\n" .. indent:rep(depth)) or ""
  local parts = {}
  if is_array(v) and (#v > 0 or next(v) == nil) then
    for i = 1, #v do parts[i] = nl .. M.encode(v[i], indent, depth + 1) end
    return "[" .. table.concat(parts, ",") .. (#v > 0 and close or "") .. "]"
  end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = tostring(k) end
  table.sort(keys)
  for i, k in ipairs(keys) do
    local x = v[k]
    if x == nil then x = v[tonumber(k)] end
    parts[i] = nl .. M.encode(k) .. (indent and ": " or ":") .. M.encode(x, indent, depth + 1)
  end
  return "{" .. table.concat(parts, ",") .. close .. "}"
end

M.null = setmetatable({}, { __tostring = function() return "null" end })

--- Decode JSON text; raises "json: <what> at position N" on bad input.
function M.decode(s)
  local pos = 1
  local value
  local function fail(what) error(("json: %s at position %d"):format(what, pos), 0) end
  local function ws() pos = s:find("[^ \t\r\n]", pos) or #s + 1 end
  local function str()
    local out, i = {}, pos + 1
    while true do
      local c = s:sub(i, i)
      if c == "" then fail("unterminated string") end
      if c == '"' then pos = i + 1 return table.concat(out) end
      if c == "\\" then
        local e = s:sub(i + 1, i + 1)
        local map = { b = "\b", f = "\f", n = "\n", r = "\r", t = "\t", ['"'] = '"', ["\\"] = "\\", ["/"] = "/" }
        if e == "u" then out[#out + 1] = string.char(tonumber(s:sub(i + 2, i + 5), 16) % 256) i = i + 6
        elseif map[e] then out[#out + 1] = map[e] i = i + 2
        else fail("bad escape") end
      else out[#out + 1] = c i = i + 1 end
    end
  end
  local function list(close, item)
    local t = {}
    pos = pos + 1
    ws()
    if s:sub(pos, pos) == close then pos = pos + 1 return t end
    while true do
      item(t)
      ws()
      local c = s:sub(pos, pos)
      pos = pos + 1
      if c == close then return t end
      if c ~= "," then fail("expected , or " .. close) end
    end
  end
  value = function()
    ws()
    local c = s:sub(pos, pos)
    if c == "{" then
      return list("}", function(t)
        ws()
        if s:sub(pos, pos) ~= '"' then fail("expected a key") end
        local k = str()
        ws()
        if s:sub(pos, pos) ~= ":" then fail("expected :") end
        pos = pos + 1
        t[k] = value()
      end)
    elseif c == "[" then return list("]", function(t) t[#t + 1] = value() end)
    elseif c == '"' then return str()
    elseif s:sub(pos, pos + 3) == "true" then pos = pos + 4 return true
    elseif s:sub(pos, pos + 4) == "false" then pos = pos + 5 return false
    elseif s:sub(pos, pos + 3) == "null" then pos = pos + 4 return nil
    end
    local num = s:match("^-?%d+%.?%d*[eE]?[-+]?%d*", pos)
    if not num or num == "" then fail("unexpected character '" .. c .. "'") end
    pos = pos + #num
    return tonumber(num)
  end
  local v = value()
  ws()
  if pos <= #s then fail("trailing text") end
  return v
end

return M
