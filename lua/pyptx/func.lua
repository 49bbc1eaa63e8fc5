--- Device functions (`.func`): `pyptx.func "name" { params, returns,
-- linkage, directives, function(P) ... end }`, traced into the module of
-- every kernel that lists them in its `funcs` option (or of a
-- pyptx.module), before that kernel. Without a body it is a declaration
-- (`.extern .func ...;`, a prototype for `call`).
local core = require "pyptx.core"
local trace = require "pyptx.trace"
local types = require "pyptx.types"
local reg = require "pyptx.reg"
local ptxparse = require "pyptx.ptxparse"

local M = {}

local Func = {}
Func.__index = Func
M.Func = Func

local LINKAGE = { [""] = 0, visible = 1, extern = 2, weak = 3, common = 4 }
local OPTIONS = { params = "table", returns = "table", linkage = "string", directives = "table", body = "function" }

--- The linkage code of a name ("visible" -> 1), or an error naming it.
local function linkage_code(name, where)
  local code = LINKAGE[name or ""]
  if not code then
    error(("%s: linkage '%s'; valid: visible, extern, weak, common"):format(where, tostring(name)), 0)
  end
  return code
end

--- Check one parameter entry { "type", "name", align =, count =, ptr =, ptr_align =, reg = }.
local function check_param(p, i, list, where)
  local what = ("%s: %s[%d]"):format(where, list, i)
  if type(p) ~= "table" then error(what .. ": expected { \"type\", \"name\", ... }, got " .. tostring(p), 0) end
  local ty = types.get(p[1]) or p[1]
  if not types.is(ty) then error(what .. ": unknown type " .. tostring(p[1]), 0) end
  if type(p[2]) ~= "string" or not p[2]:match("^[%%%a_$][%w_$]*$") then
    error(what .. ": the name must be a PTX identifier, got " .. tostring(p[2]), 0)
  end
  if p.ptr ~= nil and p.ptr ~= true and not ({ global = 1, shared = 1, const = 1, ["local"] = 1 })[p.ptr] then
    error(what .. ": ptr must be true or a state space (global, shared, const, local), got " .. tostring(p.ptr), 0)
  end
  return ty, what
end

--- Declare a parameter list on function fn of trace t; returns the table
-- the body sees: a .param's name (for ptx.addr) or a .reg's register.
function M.declare_params(t, list, where, kind)
  local P, is_ret = {}, kind == "returns"
  for i, p in ipairs(list or {}) do
    local ty, what = check_param(p, i, kind, where)
    local add = is_ret and core.func_return or core.func_param
    local idx = add(t.mod, t.fn, p[2], ty.id, p.align or 0, p.count or 0)
    if idx < 0 then error(what .. ": " .. core.error_message(), 0) end
    if p.reg or p.ptr or p.ptr_align then
      local space = type(p.ptr) == "string" and p.ptr or nil
      if core.param_attr(t.mod, t.fn, is_ret and 1 or 0, idx, p.reg and 1 or 0, space, p.ptr_align or (p.ptr and not space and -1) or 0) ~= 0 then
        error(what .. ": " .. core.error_message(), 0)
      end
    end
    P[p[2]] = p[2]
    if p.reg then P[p[2]] = reg.param(t, ty, p[2]) end
  end
  return P
end

--- The PTX text of one parameter for a declaration.
local function param_text(p)
  local ty = types.get(p[1]) or p[1]
  local s = (p.reg and ".reg " or ".param ") .. (p.align and (".align " .. p.align .. " ") or "") .. "." .. ty.name .. " "
  if p.ptr or p.ptr_align then
    s = s .. ".ptr " .. (type(p.ptr) == "string" and ("." .. p.ptr .. " ") or "")
    if p.ptr_align then s = s .. ".align " .. p.ptr_align .. " " end
  end
  return s .. p[2] .. (p.count and ("[" .. p.count .. "]") or "")
end

--- A parenthesized parameter list's text.
local function list_text(list)
  local parts = {}
  for i, p in ipairs(list) do parts[i] = param_text(p) end
  return "(" .. table.concat(parts, ", ") .. ")"
end

--- The declaration text of a body-less function.
function Func:declaration()
  local link = self.linkage ~= "" and ("." .. self.linkage .. " ") or ""
  local rets = #self.returns > 0 and (list_text(self.returns) .. " ") or ""
  local dirs = {}
  for i, d in ipairs(self.directives) do dirs[i] = " " .. d end
  return link .. ".func " .. rets .. self.name .. list_text(self.params) .. table.concat(dirs) .. ";"
end

--- Trace this function into trace t (which must have no function open).
function Func:trace_into(t)
  if not self.body then
    ptxparse.append_module(self:declaration(), 3)
    return
  end
  trace.open(t, self.name, false, linkage_code(self.linkage, self.where))
  local P = M.declare_params(t, self.returns, self.where, "returns")
  for k, v in pairs(M.declare_params(t, self.params, self.where, "params")) do P[k] = v end
  for _, d in ipairs(self.directives) do core.func_directive(t.mod, t.fn, d) end
  self.body(P)
  if t.at_where then
    error(t.at_where .. ": ptx.at guards nothing; call the instruction through it: ptx.at(p).inst.op(...)", 0)
  end
  reg.warn_unused_preds(t)
  if core.func_check_refs(t.mod, t.fn) < 0 then error(core.error_message(), 0) end
  t.fn = -1
end

Func.__tostring = function(f) return ("func \"%s\""):format(f.name) end

--- Check options and build a function object; `where` is the defining line.
function M.new(name, opts, where)
  if type(opts) ~= "table" then error(where .. ": func \"" .. name .. "\" expects an options table { ..., function(P) ... end }", 0) end
  for k, v in pairs(opts) do
    if k ~= 1 and (not OPTIONS[k] or type(v) ~= OPTIONS[k]) then
      error(("%s: func \"%s\": option '%s' %s; valid: params, returns, linkage, directives, and the body function")
        :format(where, name, tostring(k), OPTIONS[k] and ("must be a " .. OPTIONS[k]) or "is unknown"), 0)
    end
  end
  if not name:match("^[%a_$][%w_$]*$") then error(where .. ": func name '" .. name .. "' is not a PTX identifier", 0) end
  local body = opts[1] or opts.body
  if body ~= nil and type(body) ~= "function" then error(where .. ": func \"" .. name .. "\": the body must be a function", 0) end
  local f = setmetatable({
    name = name, where = where, body = body, params = opts.params or {}, returns = opts.returns or {},
    linkage = opts.linkage or "", directives = opts.directives or {},
  }, Func)
  linkage_code(f.linkage, where)
  for i, p in ipairs(f.params) do check_param(p, i, "params", where) end
  for i, p in ipairs(f.returns) do check_param(p, i, "returns", where) end
  return f
end

--- func "name" { ... }
function M.func(name)
  if type(name) ~= "string" then error("func: expected a name string: func \"name\" { ... }", 2) end
  local where = trace.format_where(trace.where(2))
  return function(opts) return M.new(name, opts, where) end
end

--- Is v a device function object?
function M.is(v) return getmetatable(v) == Func end

return M
