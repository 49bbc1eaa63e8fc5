--- `pyptx.module { arch =, version =, address_size =, items... }`: several
-- kernels, device functions and module-level PTX text traced into one
-- PTX module in the order given (a multi-entry module, as nvcc writes one
-- per .cu file). Each kernel is traced with its default values.
local ffi = require "ffi"
local core = require "pyptx.core"
local trace = require "pyptx.trace"
local kernel = require "pyptx.kernel"
local func = require "pyptx.func"
local ptxparse = require "pyptx.ptxparse"

local M = {}

local Module = {}
Module.__index = Module

--- Check that every item is a kernel, a func or PTX text.
local function check_items(opts, where)
  local items = {}
  for i, it in ipairs(opts) do
    if not (kernel.is(it) or func.is(it) or type(it) == "string") then
      error(("%s: module item %d must be a kernel, a pyptx.func or module-level PTX text, got %s"):format(where, i, tostring(it)), 0)
    end
    items[i] = it
  end
  return items
end

--- Trace every item into one module; the module's PTX text.
function Module:trace()
  if self.traced then return self.traced end
  local arch = self.arch == "auto" and kernel.auto_arch() or self.arch
  local sm = ffi.new("int32_t[2]")
  if core.arch_parse(arch, sm, sm + 1) < 0 then error(self.where .. ": unknown arch '" .. tostring(arch) .. "'", 0) end
  local version = self.version or kernel.default_version(sm[0], sm[1])
  local t = trace.begin { arch = arch, version = version, address_size = self.address_size, target_modifiers = self.target_modifiers }
  local ok, err = xpcall(function()
    for _, it in ipairs(self.items) do
      if type(it) == "string" then ptxparse.append_module(it)
      elseif func.is(it) then it:trace_into(t)
      else
        local values = it:values()
        it:trace_into(t, values, it:tensor_specs(values))
      end
      t.fn = -1
    end
  end, trace.relocate)
  trace.finish()
  if not ok then error(err, 0) end
  local opts = ffi.new("lpx_emit_opts", { self.line_info and 1 or 0, 1 })
  local text, len = ffi.new("const char*[1]"), ffi.new("size_t[1]")
  if core.emit(t.mod, opts, text, len) < 0 then error(core.error_message(), 0) end
  self.traced = { module = t.mod, ptx = ffi.string(text[0], len[0]) }
  return self.traced
end

--- The module's PTX text.
function Module:ptx() return self:trace().ptx end

--- The kernels among the items, in order.
function Module:kernels()
  local out = {}
  for _, it in ipairs(self.items) do if kernel.is(it) then out[#out + 1] = it end end
  return out
end

Module.__tostring = function(m) return ("module (%d items, %s)"):format(#m.items, m.arch) end

--- pyptx.module { arch = "sm_90a", version = "8.7", address_size = 64, line_info = false, item, ... }
function M.module(opts)
  local where = trace.format_where(trace.where(2))
  if type(opts) ~= "table" then error(where .. ": pyptx.module expects a table { arch = ..., item, ... }", 0) end
  local version = opts.version and kernel.parse_version(opts.version, where)
  local asz = opts.address_size or 64
  if asz ~= 32 and asz ~= 64 then error(where .. ": address_size must be 32 or 64, got " .. tostring(asz), 0) end
  return setmetatable({
    arch = opts.arch or "sm_90a", version = version, address_size = asz, line_info = opts.line_info ~= false,
    target_modifiers = opts.target_modifiers,
    items = check_items(opts, where), where = where,
  }, Module)
end

--- Is v a module object?
function M.is(v) return getmetatable(v) == Module end

return M
