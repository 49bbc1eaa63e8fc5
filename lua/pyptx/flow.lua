--- Control flow: labels, branches (guarded by a predicate or its
-- negation), ret/exit, and the structured forms ptx.if_, ptx.loop and
-- ptx.range, which place labels and branches around traced bodies. The
-- ptx namespace re-exports them; families that branch (ptx.mbarrier.wait)
-- use them from here.
local core = require "pyptx.core"
local trace = require "pyptx.trace"
local types = require "pyptx.types"
local reg = require "pyptx.reg"
local operands = require "pyptx.operands"

local M = {}
local F = reg.form

--- Make the next instruction appended carry the guard p (or !p for -p):
-- a predicate register or its negated view (trace.emit reads either).
function M.set_guard(t, p)
  reg.use_pred(t, p)
  t.guard = p
end

-- --------------------------------------------------- labels and branches

--- Place label name (already checked) in trace t.
local function place(t, name)
  if core.label_place(t.mod, t.fn, trace.sym(t, name)) < 0 then trace.fail(core.error_message()) end
end

--- Place a fresh label (a reference from operands.fresh_ref) in trace t.
local function place_ref(t, ref)
  if core.label_place(t.mod, t.fn, ref.sym) < 0 then trace.fail(core.error_message()) end
end
M.place_ref = place_ref

--- A fresh label of trace t ("$L__hint_n") as a reference, not yet placed.
local function fresh(t, hint)
  return operands.fresh_ref(t, trace.fresh_sym(t, hint))
end
M.fresh = fresh

--- Place a label here; returns a reference usable as a branch target.
function M.label(name)
  local t = trace.need("ptx.label")
  if type(name) ~= "string" or not name:match("^[%a_$][%w_$]*$") then
    trace.fail("ptx.label: a label name is letters, digits, _ and $, got " .. tostring(name))
  end
  place(t, name)
  return operands.label_ref(name)
end

--- Branch to a label (name or reference); with p, only where p holds.
function M.bra(target, p)
  if p ~= nil then
    local t = trace.need("ptx.bra")
    if not reg.is_pred(p) then trace.fail("ptx.bra: the condition must be a predicate (or -p), got " .. tostring(p)) end
    M.set_guard(t, p)
  end
  if type(target) == "string" then target = operands.label_ref(target) end
  return trace.emit_n(F("bra"), 1, target)
end

--- Uniform branch (all threads take it together).
function M.bra_uni(target)
  if type(target) == "string" then target = operands.label_ref(target) end
  return trace.emit_n(F("bra.uni"), 1, target)
end

--- ret; / exit;
function M.ret() return trace.emit_n(F("ret"), 0) end
function M.exit() return trace.emit_n(F("exit"), 0) end

-- ------------------------------------------------------ structured control

--- if p then then_fn() else else_fn() end, as branches around the blocks.
function M.if_(p, then_fn, else_fn)
  local t = trace.need("ptx.if_")
  if not reg.is_pred(p) then trace.fail("ptx.if_ needs a predicate (e.g. a:lt(b)), got " .. tostring(p)) end
  local l_else = fresh(t, "else")
  local l_end
  if else_fn then l_end = fresh(t, "endif") else t.nlabels = t.nlabels + 1 end   -- numbered as if made
  M.bra(l_else, -p)
  then_fn()
  if else_fn then M.bra_uni(l_end) end
  place_ref(t, l_else)
  if else_fn then
    else_fn()
    place_ref(t, l_end)
  end
end

--- A do-while loop: body(loop) runs, and its returned predicate says
-- whether to go round again; loop.exit is a label to break to. opts.top
-- names the top label; opts.exit = false places no exit label (a string
-- names it).
local no_opts = {}
function M.loop(body, opts)
  local t = trace.need("ptx.loop")
  opts = opts or no_opts
  local top, exit
  if opts.top then top = M.label(opts.top) else top = fresh(t, "loop"); place_ref(t, top) end
  if opts.exit then exit = operands.label_ref(opts.exit)
  elseif opts.exit ~= false then exit = fresh(t, "loop_exit") end
  local again = body({ top = top, exit = exit })
  if again == nil then M.bra_uni(top)
  elseif reg.is_pred(again) then M.bra(top, again)
  else trace.fail("ptx.loop: the body must return a predicate (continue?) or nothing") end
  if opts.exit then M.label(opts.exit) elseif exit then place_ref(t, exit) end
end

--- for i = lo, hi - 1, step: an emitted counted loop with a u32 (or the
-- bounds' register type) counter; body(i) is traced once.
function M.range(lo, hi, step, body)
  if body == nil then body, step = step, 1 end
  local t = trace.need("ptx.range")
  if type(step) == "number" and (step <= 0 or step ~= math.floor(step)) then
    trace.fail("ptx.range counts up: the step must be a positive integer, got " .. tostring(step))
  end
  local ty = reg.source_type(lo) or reg.source_type(hi) or types.u32
  local i = reg.scalar(ty, lo)
  local top, exit = trace.fresh_label(t, "range"), trace.fresh_label(t, "range_exit")
  if not (type(lo) == "number" and type(hi) == "number" and lo < hi) then
    M.bra(exit, i:ge(hi))
  end
  M.label(top)
  body(i, { top = operands.label_ref(top), exit = operands.label_ref(exit) })
  local suffix = (ty.kind == "b" and "u" .. ty.bits) or ty.name
  trace.emit_n(F("add." .. suffix), 3, i, i, step)
  M.bra(top, i:lt(hi))
  M.label(exit)
  return i
end

return M
