-- The calls between the C core's files run one way: reads `nm` of the
-- static library (one member per source file) on stdin, links each
-- undefined symbol to the member defining it, and fails on any cycle of
-- files, printing it, and on a call against the emulator's layers
-- (docs/architecture.md, "The C core's layers").
-- usage: nm libluaptx.a | luajit spec/c/circles.lua

local defs, uses, order = {}, {}, {}
local member
for line in io.lines() do
  local m = line:match("^(%S+)%.o:$")
  if m then
    member = m
    uses[m] = uses[m] or {}
    order[#order + 1] = m
  elseif member then
    local kind, sym = line:match("^%x*%s+(%a)%s+(%S+)$")
    if kind == "U" then
      uses[member][sym] = true
    elseif kind and kind:match("[TDRBCGSV]") then
      defs[sym] = member
    end
  end
end
if #order == 0 then
  io.stderr:write("circles.lua: no archive members on stdin (pipe `nm libluaptx.a`)\n")
  os.exit(2)
end

-- calls[a][b]: a member a uses a symbol member b defines (b ~= a), with
-- one such symbol kept to name the edge.
local calls = {}
for _, a in ipairs(order) do
  calls[a] = {}
  for sym in pairs(uses[a]) do
    local b = defs[sym]
    if b and b ~= a and not calls[a][b] then calls[a][b] = sym end
  end
end

-- The sorted successors of a member, so that reports are stable.
local function succ(a)
  local out = {}
  for b in pairs(calls[a]) do out[#out + 1] = b end
  table.sort(out)
  return out
end

-- Tarjan's strongly connected components; each with more than one member
-- is a circle.
local index, low, onstack, stack, sccs, n = {}, {}, {}, {}, {}, 0
local function strong(v)
  n = n + 1
  index[v], low[v] = n, n
  stack[#stack + 1], onstack[v] = v, true
  for _, w in ipairs(succ(v)) do
    if not index[w] then
      strong(w)
      low[v] = math.min(low[v], low[w])
    elseif onstack[w] then
      low[v] = math.min(low[v], index[w])
    end
  end
  if low[v] == index[v] then
    local comp = {}
    repeat
      local w = table.remove(stack)
      onstack[w] = nil
      comp[#comp + 1] = w
    until w == v
    if #comp > 1 then table.sort(comp); sccs[#sccs + 1] = comp end
  end
end
table.sort(order)
for _, v in ipairs(order) do
  if not index[v] then strong(v) end
end

-- One shortest cycle through a component's first member (breadth first
-- inside the component), as "a -(sym)-> b -(sym)-> ... -> a".
local function cycle_of(comp)
  local inside = {}
  for _, v in ipairs(comp) do inside[v] = true end
  local start = comp[1]
  local prev, queue, head = { [start] = false }, { start }, 1
  while head <= #queue do
    local v = queue[head]; head = head + 1
    for _, w in ipairs(succ(v)) do
      if w == start then
        local path = { start }
        local u = v
        while u ~= start do table.insert(path, 2, u); u = prev[u] end
        path[#path + 1] = start
        local parts = { path[1] }
        for i = 2, #path do
          parts[#parts + 1] = ("-(%s)-> %s"):format(calls[path[i - 1]][path[i]], path[i])
        end
        return table.concat(parts, " ")
      end
      if inside[w] and prev[w] == nil then prev[w] = v; queue[#queue + 1] = w end
    end
  end
end

-- Directions a circle check cannot see (docs/architecture.md): who may
-- call the emulator's runner, and what its leaf calls.
local rules = {
  { file = "emu_exec.c", callers = { ["emu_device.c"] = true, ["emu_decode.c"] = true, ["emu_call.c"] = true },
    why = "handlers call down into leaves, not up into the runner" },
  { file = "emu_report.c", callees = "^lpx_", why = "the failure reports are the emulator's leaf" },
}

-- The broken rules, one line each.
local function broken()
  local out = {}
  for _, r in ipairs(rules) do
    for _, a in ipairs(order) do
      if r.callers and calls[a][r.file] and not r.callers[a] then
        out[#out + 1] = ("%s calls %s (%s): %s"):format(a, r.file, calls[a][r.file], r.why)
      end
    end
    for _, b in ipairs(calls[r.file] and succ(r.file) or {}) do
      if r.callees and not b:match(r.callees) then
        out[#out + 1] = ("%s calls %s (%s): %s"):format(r.file, b, calls[r.file][b], r.why)
      end
    end
  end
  return out
end

local bad = broken()
for _, line in ipairs(bad) do print(line) end
if #sccs == 0 and #bad == 0 then
  print(("circles.lua: %d files, no circle of calls"):format(#order))
  os.exit(0)
end
for _, comp in ipairs(sccs) do
  print(("circle of %d files: %s"):format(#comp, table.concat(comp, " ")))
  print("  e.g. " .. cycle_of(comp))
end
os.exit(1)
