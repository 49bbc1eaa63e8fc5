--- `luaptx transpile --sugar`: rewrites the transpiler's plain script into
-- a readable one that traces to the same PTX. Demangled Lua names for
-- device functions (and the C++ signature as a comment), short labels
-- ($L__BB0_2 -> $L2), backward branches raised to ptx.loop, runs of
-- instructions that differ by a constant step raised to Lua `for` loops,
-- and builder chains (ptx.inst.add.s32(...)) instead of opcode strings.
-- It works on the plain script's lines, whose shape the C transpiler
-- (src/lpx_transpile.c) fixes: one statement per line inside bodies.
local core = require "pyptx.core"

local M = {}

-- ---------------------------------------------------------- demangling

local BUILTIN = {
  v = "void", b = "bool", c = "char", a = "signed char", h = "unsigned char", s = "short", t = "unsigned short",
  i = "int", j = "unsigned int", l = "long", m = "unsigned long", x = "long long", y = "unsigned long long",
  f = "float", d = "double", e = "long double", n = "__int128", o = "unsigned __int128", z = "...",
}

--- A <source-name> (length-prefixed identifier) at position i: name, next i.
local function source_name(s, i)
  local len = s:match("^%d+", i)
  if not len then return nil end
  local start = i + #len
  return s:sub(start, start + tonumber(len) - 1), start + tonumber(len)
end

--- One parameter type at i: its C spelling and the next position (nil if unknown).
local function param_type(s, i)
  local c = s:sub(i, i)
  if BUILTIN[c] then return BUILTIN[c], i + 1 end
  if c == "P" or c == "R" or c == "K" then
    local inner, j = param_type(s, i + 1)
    if not inner then return nil end
    return c == "K" and ("const " .. inner) or (inner .. (c == "P" and "*" or "&")), j
  end
  local name, j = source_name(s, i)
  if name then return name, j end
  return nil
end

--- Demangle an Itanium C++ function name: its unqualified name and the
-- signature text ("scale(float, float)"), or nil for a plain C name.
function M.demangle(mangled)
  if mangled:sub(1, 2) ~= "_Z" then return nil end
  local i, parts = 3, {}
  if mangled:sub(i, i) == "N" then
    i = i + 1
    while mangled:sub(i, i) ~= "E" do
      local part, j = source_name(mangled, i)
      if not part then return nil end
      parts[#parts + 1], i = part, j
    end
    i = i + 1
  else
    local part, j = source_name(mangled, i)
    if not part then return nil end
    parts[1], i = part, j
  end
  local params = {}
  while i <= #mangled do
    local ty, j = param_type(mangled, i)
    if not ty then params[#params + 1] = "..." break end
    if ty ~= "void" then params[#params + 1] = ty end
    i = j
  end
  return parts[#parts], table.concat(parts, "::") .. "(" .. table.concat(params, ", ") .. ")"
end

--- A Lua identifier made from a demangled name, not in `taken`.
local function lua_name(name, taken)
  local id = name:gsub("[^%w_]", "_"):gsub("^_+", "")
  if id == "" or id:match("^%d") then id = "f_" .. id end
  local base, k = id, 1
  while taken[id] do k = k + 1; id = base .. "_" .. k end
  taken[id] = true
  return id
end

-- --------------------------------------------------------- opcode chains

local LUA_KEYWORDS = {}
for w in ("and break do else elseif end false for function goto if in local nil not or repeat return then true until while")
    :gmatch("%a+") do LUA_KEYWORDS[w] = true end
local COLON_PREFIXES = { shared = 1, L1 = 1, L2 = 1, param = 1, cta_group = 1, async_shared = 1, async_global = 1 }
local ALIAS_KEYS = { and_ = 1, or_ = 1, xor_ = 1, not_ = 1, local_ = 1, const_ = 1, global_ = 1, async_ = 1 }

--- The Lua key of one opcode segment in a builder chain, or nil.
local function segment_key(seg)
  local pre, rest = seg:match("^([%w_]+)::([%w_]+)$")
  if pre then return COLON_PREFIXES[pre] and ("." .. pre .. "_" .. rest) or nil end
  if seg:match("^%d[%w]*$") then return "._" .. seg end
  if not seg:match("^[%a][%w_]*$") or seg:match("_$") or ALIAS_KEYS[seg] or seg:match("^tensor_") then return nil end
  for p in pairs(COLON_PREFIXES) do if seg:sub(1, #p + 1) == p .. "_" then return nil end end
  return LUA_KEYWORDS[seg] and ('["' .. seg .. '"]') or ("." .. seg)
end

--- ptx.inst.ld.global.f32 for "ld.global.f32" when every segment has a key
-- and the ISA table knows the form (the builder refuses unknown ones).
local function chain(opcode)
  local id = core.form_intern(core.ctx, opcode)
  if id < 0 or core.form_get(core.ctx, id).op < 0 then return nil end
  local out = {}
  for seg in (opcode .. "."):gmatch("(.-)%.") do
    local key = segment_key(seg)
    if not key then return nil end
    out[#out + 1] = key
  end
  return table.concat(out)
end

--- Rewrite `inst("op", ...)` on one line as a builder chain.
local function use_chain(line)
  return (line:gsub('inst%("([^"]+)",? ?', function(op)
    local c = chain(op)
    if not c then return nil end
    return "inst" .. c .. "("
  end, 1))
end

-- ---------------------------------------------------------------- labels

--- Rename the nvcc labels ($L__BB0_2, ...) of a body to $L1, $L2, ... in
-- order of placement, unless a short name is already in use.
local function short_labels(lines)
  local text = table.concat(lines, "\n")
  if text:find("%$L%d") then return lines end
  local map, n = {}, 0
  for _, l in ipairs(lines) do
    local name = l:match('^%s*ptx%.label%("(%$L__[%w_$]+)"%)$')
    if name and not map[name] then n = n + 1; map[name] = "$L" .. n end
  end
  if n == 0 then return lines end
  local out = {}
  for i, l in ipairs(lines) do
    out[i] = l:gsub("%$L__[%w_$]+", function(name) return map[name] end)
  end
  return out
end

-- ------------------------------------------------------------------ loops

-- A loop's body is one Lua function, which holds at most 65536 constants.
local MAX_CONSTANTS = 50000

--- How many distinct constants lines i..j may need at most (strings,
-- numbers and field names, each counted once).
local function constants(lines, i, j)
  local seen, n = {}, 0
  for k = i, j do
    local l = lines[k]:gsub("%[==%[(.-)%]==%]", function(s) if not seen[s] then seen[s], n = true, n + 1 end return "" end)
    for c in l:gmatch('"[^"]*"') do if not seen[c] then seen[c], n = true, n + 1 end end
    for c in l:gsub('"[^"]*"', ""):gmatch("[%w_.]+") do if not seen[c] then seen[c], n = true, n + 1 end end
  end
  return n
end

--- Raise `ptx.label("X") ... ptx.at(P).inst("bra", L"X")` to ptx.loop
-- (innermost first; spans holding a `local`, crossing another or needing
-- more constants than a Lua function holds stay).
local function raise_loops(lines)
  for j = 1, #lines do
    local indent, pred, target = lines[j]:match('^(%s*)ptx%.at%((.-)%)%.inst%("bra", L"([^"]+)"%)$')
    if target then
      local i
      for k = j - 1, 1, -1 do
        if lines[k] == indent .. 'ptx.label("' .. target .. '")' then i = k break end
      end
      local ok = i ~= nil
      for k = (i or j) + 1, j - 1 do
        local l = lines[k]
        if not l:match("^" .. indent) or l:match("^%s*local ") or l:match("^%s*do$") then ok = false end
        if l:find('"' .. target .. '"', 1, true) then ok = false end   -- another branch to the top: keep it plain
      end
      if ok and j - i > 1000 then ok = constants(lines, i + 1, j - 1) < MAX_CONSTANTS end
      if ok then
        local out = {}
        for k = 1, i - 1 do out[#out + 1] = lines[k] end
        out[#out + 1] = indent .. "ptx.loop(function()"
        for k = i + 1, j - 1 do out[#out + 1] = "  " .. lines[k] end
        out[#out + 1] = indent .. "  return " .. pred
        out[#out + 1] = indent .. ('end, { top = "%s", exit = false })'):format(target)
        for k = j + 1, #lines do out[#out + 1] = lines[k] end
        return raise_loops(out)
      end
    end
  end
  return lines
end

-- ------------------------------------------------------------ for loops

--- Split a statement into its skeleton and the integers outside strings:
-- "r[12]" -> "r[\0]", { 12 }; a unary minus belongs to its number. Hex,
-- decimals and exponents stay in the skeleton.
local function numbers_of(line)
  local skel, nums, i, n = {}, {}, 1, #line
  while i <= n do
    local c = line:sub(i, i)
    local float = line:match("^%d[%d%.]*[eE][%+%-]?%d+", i)
    local neg = c == "-" and line:sub(i + 1, i + 1):match("%d") and (skel[#skel] or ""):match("[%(,%[{ ]$")
    if float then
      skel[#skel + 1] = float; i = i + #float
    elseif neg and line:match("^%-%d+L?L?[^%w%.]", i) then
      local digits, suffix = line:match("^%-(%d+)(L?L?)", i)
      nums[#nums + 1] = -tonumber(digits)
      skel[#skel + 1] = "\0" .. suffix
      i = i + 1 + #digits + #suffix
    elseif c == '"' then
      local j = line:find('"', i + 1, true) or n
      skel[#skel + 1] = line:sub(i, j); i = j + 1
    elseif line:sub(i, i + 3) == "[==[" then
      local j = select(2, line:find("]==]", i, true)) or n
      skel[#skel + 1] = line:sub(i, j); i = j + 1
    elseif c:match("[%a_]") then
      local w = line:match("^[%w_]+", i)
      skel[#skel + 1] = w; i = i + #w
    elseif c:match("%d") then
      local w = line:match("^[%w%.]+", i)
      if w:match("^%d+$") or w:match("^%d+LL$") then
        local digits = w:match("^%d+")
        nums[#nums + 1] = tonumber(digits)
        skel[#skel + 1] = "\0" .. w:sub(#digits + 1)
      else
        skel[#skel + 1] = w
      end
      i = i + #w
    else
      skel[#skel + 1] = c; i = i + 1
    end
  end
  return table.concat(skel), nums
end

--- Can a line take part in a for loop (a plain statement)?
local function plain(line)
  return line:match("^%s*ptx%.") and not line:match("ptx%.label") and not line:match("ptx%.raw") and not line:match("ptx%.loop")
end

--- How many instructions from i repeat with period p, each number affine
-- in the repetition (at least 2 repetitions); and the steps.
local function run_length(parsed, i, p)
  local reps = 1
  while true do
    local base = i + reps * p
    for k = 0, p - 1 do
      local a, b = parsed[i + k], parsed[base + k]
      if not (a and b and a.ok and b.ok and a.skel == b.skel) then return reps end
      for m = 1, #a.nums do
        local step = parsed[i + p + k] and (parsed[i + p + k].nums[m] - a.nums[m]) or 0
        if b.nums[m] ~= a.nums[m] + reps * step then return reps end
      end
    end
    reps = reps + 1
  end
end

--- A number slot as a Lua expression of the loop variable v.
local function affine(v, v0, step, suffix)
  local e = step == 0 and tostring(v0) or step == 1 and (v0 == 0 and v or (v0 .. " + " .. v))
    or (v0 == 0 and (step .. " * " .. v) or (v0 .. " + " .. step .. " * " .. v))
  if suffix == "LL" then return step == 0 and (v0 .. "LL") or ("(" .. e .. ") * 1LL") end
  return e
end

--- The loop body line for instruction k of a run (its numbers as v terms).
local function template(parsed, i, p, k, v)
  local a, nxt = parsed[i + k], parsed[i + p + k]
  local m = 0
  return (a.skel:gsub("%z(L?L?)", function(suffix)
    m = m + 1
    return affine(v, a.nums[m], nxt.nums[m] - a.nums[m], suffix)
  end))
end

--- Raise runs of statements repeating with a constant step (period 1 to 8,
-- at least 3 repetitions and 4 instructions) to `for i = 0, n - 1 do ... end`.
local function raise_fors(lines)
  local parsed, text, v = {}, table.concat(lines, "\n"), "i"
  for _, name in ipairs { "i", "j", "k", "it", "rep" } do   -- a name no register range uses
    v = name
    if not text:find("local " .. name .. " ", 1, true) then break end
  end
  for i, l in ipairs(lines) do
    local skel, nums = numbers_of(l)
    parsed[i] = { ok = plain(l) and #nums > 0, skel = skel, nums = nums }
  end
  local out, i = {}, 1
  while i <= #lines do
    local best_p, best_n = 0, 0
    for p = 1, 8 do
      local n = parsed[i].ok and run_length(parsed, i, p) or 1
      if n >= 3 and n * p >= 4 and n * p > best_n * best_p then best_p, best_n = p, n end
    end
    if best_p > 0 then
      local indent = lines[i]:match("^%s*")
      out[#out + 1] = indent .. ("for %s = 0, %d do"):format(v, best_n - 1)
      for k = 0, best_p - 1 do out[#out + 1] = "  " .. template(parsed, i, best_p, k, v) end
      out[#out + 1] = indent .. "end"
      i = i + best_n * best_p
    else
      out[#out + 1] = lines[i]
      i = i + 1
    end
  end
  return out
end

-- ----------------------------------------------------------------- script

-- A long body comes in parts (`part(function()` ... `end)`, see
-- src/lpx_transpile.c): sugar works on the whole body, then splits it again.
local PART_OPEN, PART_CLOSE, PART_SIZE = "  part(function()", "  end)", 1000

--- The body's lines without its part boundaries; and whether it had any.
local function unpart(lines)
  local out, had = {}, false
  for _, l in ipairs(lines) do
    if l == PART_OPEN or l == PART_CLOSE then had = true else out[#out + 1] = l end
  end
  return out, had
end

--- Split a body into parts of at most PART_SIZE lines, between whole
-- statements (a line at the body's indent that closes nothing, outside a
-- long string); the declarations up to `local function part` stay ahead.
local function repart(lines)
  local out, k = {}, 1
  while k <= #lines and not lines[k]:match("^    local function part%(") do out[#out + 1] = lines[k]; k = k + 1 end
  if k > #lines then return lines end
  out[#out + 1] = lines[k]
  local in_string, count = false, 0
  for i = k + 1, #lines do
    local l = lines[i]
    local starts = not in_string and l:match("^    [^ ]") and not l:match("^    end")
    if starts and (count == 0 or count >= PART_SIZE) then
      if count > 0 then out[#out + 1] = PART_CLOSE end
      out[#out + 1] = PART_OPEN
      count = 0
    end
    out[#out + 1] = l
    count = count + 1
    local opens, closes = select(2, l:gsub("%[==%[", "")), select(2, l:gsub("%]==%]", ""))
    if opens ~= closes then in_string = not in_string end
  end
  out[#out + 1] = PART_CLOSE
  return out
end

--- Sugar one function body (its lines between `function(...)` and `end,`).
local function body(lines)
  local parted
  lines, parted = unpart(lines)
  lines = short_labels(lines)
  lines = raise_loops(lines)
  for k, l in ipairs(lines) do lines[k] = use_chain(l) end
  lines = raise_fors(lines)
  return parted and repart(lines) or lines
end

--- Name device functions after their demangled names and note C++
-- signatures above functions and kernels.
local function names(lines)
  local taken, rename = { M = true, N = true, P = true, R = true, S = true, L = true, T = true }, {}
  for w in pairs(LUA_KEYWORDS) do taken[w] = true end
  for _, w in ipairs { "pyptx", "kernel", "func", "reg", "ptx", "operands", "items", "prelude" } do taken[w] = true end
  local out = {}
  for _, l in ipairs(lines) do
    local var, mangled = l:match('^local (f%d+) = func "([^"]+)" {$')
    local kmangled = l:match('^M%.kernels%[#M%.kernels %+ 1%] = kernel "([^"]+)" {$')
    local short, sig = M.demangle(mangled or kmangled or "")
    if sig then out[#out + 1] = "-- " .. sig end
    if var then
      rename[var] = lua_name(short or mangled, taken)
      l = l:gsub("^local f%d+", "local " .. rename[var])
    end
    l = l:gsub("= (f%d+)$", function(v) return "= " .. (rename[v] or v) end)
    out[#out + 1] = l
  end
  return out
end

--- The sugared script for a plain transpiled one.
function M.sugar(script)
  local lines, out, bodylines = {}, {}, nil
  for l in (script .. "\n"):gmatch("(.-)\n") do lines[#lines + 1] = l end
  if lines[#lines] == "" then lines[#lines] = nil end
  for _, l in ipairs(names(lines)) do
    if bodylines then
      if l == "  end," then
        for _, b in ipairs(body(bodylines)) do out[#out + 1] = b end
        out[#out + 1] = l
        bodylines = nil
      else
        bodylines[#bodylines + 1] = l
      end
    else
      out[#out + 1] = l
      if l:match("^  function%(P?%)$") then bodylines = {} end
    end
  end
  return table.concat(out, "\n") .. "\n"
end

return M
