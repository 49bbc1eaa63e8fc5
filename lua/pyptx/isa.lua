--- The C core's instruction-family tables (src/lpx_isa.def) as Lua views,
-- read through the FFI when the module loads: matrix types, the mma.sync
-- shapes and input families, the wgmma families and the modifier groups
-- (tcgen05 shapes, kinds, ...). The wrappers in ampere.lua, hopper.lua and
-- blackwell.lua spell instructions from these views; Lua keeps no copy of
-- a table, and the rules stay in the C validator.
local bit = require "bit"
local ffi = require "ffi"
local core = require "pyptx.core"

local M = {}

--- The string a C pointer holds, or nil for NULL.
local function str(p)
  if p == nil then return nil end
  return ffi.string(p)
end

--- Matrix types by id and by name: { id, name, bits }.
M.mtypes = {}
for id = 1, core.mtype_count() do
  local t = { id = id, name = str(core.mtype_name(id)), bits = core.mtype_bits(id) }
  M.mtypes[id], M.mtypes[t.name] = t, t
end

--- The names of the matrix types in a set (bit t: type t), as { name = true }.
local function names(set)
  local out = {}
  for id = 1, core.mtype_count() do
    if bit.band(set, bit.lshift(1, id)) ~= 0 then out[M.mtypes[id].name] = true end
  end
  return out
end

--- The first (table order: accumulators f32, f64, s32 lead) type of a set.
local function first(set)
  for id = 1, core.mtype_count() do
    if bit.band(set, bit.lshift(1, id)) ~= 0 then return M.mtypes[id].name end
  end
end

--- The rows of a C table read with at(i) until it answers NULL.
local function rows(at)
  local out, i = {}, 0
  while true do
    local r = at(i)
    if r == nil then return out end
    out[#out + 1] = r
    i = i + 1
  end
end

--- The spellings of a modifier group ("TCSHAPE") in value order.
function M.modifiers(group)
  local g = core.modgroup_lookup(group)
  if g < 0 then error("pyptx.isa: the ISA table has no modifier group " .. tostring(group), 2) end
  local out = {}
  for v = 1, core.modgroup_size(g) do out[v] = str(core.modifier_name(g, v)) end
  return out
end

-- ------------------------------------------------------------ mma.sync

--- mma.sync input families by name ("s8"): inputs and accumulators as
-- { name = true } sets, the default accumulator, D and C of one type.
M.mma_families = {}
--- The family name of each A/B input type ("u8" -> "s8").
M.mma_family_of = {}
for _, f in ipairs(rows(core.mma_family_at)) do
  local fam = { name = M.mtypes[f.family].name, inputs = names(f.inputs), acc = names(f.accumulators),
                default_acc = first(f.accumulators), same_acc = f.same_acc ~= 0 }
  M.mma_families[fam.name] = fam
  for t in pairs(fam.inputs) do M.mma_family_of[t] = fam.name end
end

--- mma.sync shapes keyed "m16n8k16.f16" (shape.family): m, n, k, the A
-- and B registers per thread, acc_regs (f32/s32/f64 accumulator registers;
-- 0 for the sm_70 quad-pair form, quad = true), sm, ptx, and the
-- family's acc set and same_acc.
M.mma_shapes = {}
for _, s in ipairs(rows(core.mma_shape_at)) do
  local fam = M.mma_families[M.mtypes[s.family].name]
  M.mma_shapes[("m%dn%dk%d.%s"):format(s.m, s.n, s.k, fam.name)] = {
    m = s.m, n = s.n, k = s.k, a = s.a_regs, b = s.b_regs, acc_regs = s.acc_regs, quad = s.acc_regs == 0 or nil,
    sm = s.sm, ptx = s.ptx, acc = fam.acc, same_acc = fam.same_acc or nil,
  }
end

-- ---------------------------------------------------------------- wgmma

--- wgmma input families by A/B type name: k, bits, acc ({ name = true }),
-- default_acc, pair (the family's name when A and B may differ), scale,
-- trans, n16, satfinite, op (".and.popc"), sparse_sel (nil: no .sp form),
-- mixed_ptx.
M.wgmma_families = {}
for _, f in ipairs(rows(core.wgmma_family_at)) do
  for t in pairs(names(f.inputs)) do
    M.wgmma_families[t] = {
      k = f.k, bits = M.mtypes[t].bits, acc = names(f.accumulators), default_acc = first(f.accumulators),
      pair = f.mixed ~= 0 and M.mtypes[f.family].name or nil, scale = f.scale ~= 0, trans = f.trans ~= 0,
      n16 = f.n16 ~= 0, satfinite = f.satfinite ~= 0, op = f.popc ~= 0 and ".and.popc" or nil,
      sparse_sel = f.sparse_sel >= 0 and f.sparse_sel or nil, mixed_ptx = f.mixed_ptx,
    }
  end
end

-- -------------------------------------------------------------- tcgen05

--- tcgen05.ld/st shapes: 32-bit registers per thread per .x1, by shape.
M.tc_shape_regs = {}
for v, shape in ipairs(M.modifiers("TCSHAPE")) do M.tc_shape_regs[shape] = core.tc_shape_regs(v) end

return M
