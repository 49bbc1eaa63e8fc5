--- The machine code (SASS) of a kernel, under the Lua lines it came from.
-- The cubin is built with line info and disassembled by `nvdisasm -g -gp`:
-- `-gp` names the PTX line each SASS instruction came from, and the
-- PTX's `.loc` lines (one per traced instruction) name its Lua file:line;
-- `-g` (ptxas's own, coarser line table) serves when there is no PTX
-- line. Each SASS instruction falls in a class (CLASSES, data), counted
-- per Lua line.
local sys = require "pyptx.core.sys"
local toolkit = require "pyptx.runtime.toolkit"
local compile = require "pyptx.runtime.compile"
local argcheck = require "pyptx.args"

local M = {}

-- The instruction classes, in column order: a name, what it holds, and the
-- SASS opcodes (the mnemonic before the first dot: LDG of LDG.E.128). An
-- opcode in no row is "other" (integer arithmetic, moves, compares,
-- shuffles, MUFU, special registers, ...).
M.CLASSES = {
  { name = "memory", what = "loads, stores, atomics, TMA and bulk copies, tensor memory, fences",
    ops = "LD LDG LDS LDL LDC LDCU ULDC LDSM LDGSTS LDGDEPBAR ST STG STS STL STSM STAS ATOM ATOMG ATOMS RED REDG "
      .. "CCTL CCTLL CCTLT MEMBAR FENCE ERRBAR SULD SUST SUATOM SURED TEX TLD TLD4 TMML TXD TXQ "
      .. "UBLKCP UBLKRED UBLKPF UTMALDG UTMASTG UTMAREDG UTMAPF UTMACCTL UTMACMDFLUSH LDTM STTM UTCCP UTCSHIFT UTCATOMSWS" },
  { name = "fma/tensor", what = "floating-point multiply and add (f64, f32, f16x2, f32x2) and tensor-core MMA",
    ops = "FFMA FFMA32I FADD FADD32I FMUL FMUL32I FFMA2 FADD2 FMUL2 HFMA2 HFMA2_32I HADD2 HADD2_32I HMUL2 "
      .. "HMUL2_32I DFMA DADD DMUL HMMA IMMA BMMA DMMA QMMA OMMA HGMMA IGMMA QGMMA BGMMA "
      .. "UTCHMMA UTCIMMA UTCQMMA UTCOMMA UTCMMA" },
  { name = "control", what = "branches, calls, exits, barriers and synchronisation",
    ops = "BRA BRX BRXU JMP JMX JMXU CALL RET EXIT BREAK BSSY BSYNC BMOV BPT KILL NANOSLEEP RTT WARPSYNC "
      .. "YIELD BAR B2R R2B DEPBAR WARPGROUP SYNCS ARRIVES UTCBAR UCGABAR_ARV UCGABAR_WAIT ACQBULK ENDCOLLECTIVE "
      .. "CGAERRBAR" },
  { name = "conversion", what = "conversions between number formats",
    ops = "F2F F2FP F2I F2IP I2F I2FP I2I I2IP FRND" },
}
M.OTHER = "other"

local CLASS_OF = {}
for _, c in ipairs(M.CLASSES) do
  for op in c.ops:gmatch("%S+") do CLASS_OF[op] = c.name end
end

--- The class names in column order, "other" last.
function M.class_names()
  local names = {}
  for i, c in ipairs(M.CLASSES) do names[i] = c.name end
  names[#names + 1] = M.OTHER
  return names
end

--- The opcode (mnemonic before the first dot) of a SASS instruction's text,
-- past its guard predicate: "@!P0 LDG.E.128 R4, [R2.64] ;" -> "LDG".
function M.opcode(text)
  return text:gsub("^@!?U?P%w+%s+", ""):match("^([%w_]+)")
end

--- The class of a SASS opcode: a CLASSES name, or "other".
function M.classify(opcode)
  return CLASS_OF[opcode] or M.OTHER
end

-- --------------------------------------------------------------- parsing

--- Drop a function's trailing NOPs (alignment padding, never executed)
-- and its end label; returns how many NOPs there were.
local function drop_padding(fn)
  local n = 0
  while #fn.items > 0 do
    local last = fn.items[#fn.items]
    if last.opcode ~= "NOP" and not last.label then break end
    fn.items[#fn.items] = nil
    if last.opcode then n = n + 1 end
  end
  return n
end

--- Read `nvdisasm -g -gp -c` output into { functions = { { name,
-- registers, items = { { offset, text, opcode, class, file, line,
-- ptx_line } | { label } }, padding } } }: file/line from the `-g`
-- comments, ptx_line from the `-gp` ones (nil before any).
function M.parse(text)
  local functions, fn, file, line, ptx_line = {}, nil, nil, nil, nil
  for l in text:gmatch("[^\n]+") do
    local name = l:match("^//%-+ %.text%.(%S+)")
    local pl = l:match('^%s*//## File "%.nv_debug_ptx_txt[^"]*", line (%d+)')
    local f, n = l:match('^%s*//## File "(.-)", line (%d+)')
    local offset, inst = l:match("^%s*/%*(%x+)%*/%s*(.-)%s*$")
    if name then
      fn = { name = name, items = {}, padding = 0 }
      functions[#functions + 1] = fn
      file, line, ptx_line = nil, nil, nil
    elseif fn and pl then
      ptx_line = tonumber(pl)
    elseif fn and f then
      file, line = f:gsub("^%./", ""), tonumber(n)
    elseif fn and offset then
      local op = M.opcode(inst) or "?"
      fn.items[#fn.items + 1] = { offset = tonumber(offset, 16), text = inst, opcode = op,
                                  class = M.classify(op), file = file, line = line, ptx_line = ptx_line }
    elseif fn and l:match("^%.L_[%w_]+:") then
      fn.items[#fn.items + 1] = { label = l:match("^(%.L_[%w_]+):") }
    elseif fn then
      fn.registers = tonumber(l:match('SHI_REGISTERS=(%d+)')) or fn.registers
    end
  end
  for _, f in ipairs(functions) do f.padding = drop_padding(f) end
  return { functions = functions }
end

--- The Lua location of every line of PTX text: locs[n] = { file, line }
-- of the `.loc` in force at line n, or false (none yet in its function).
function M.ptx_locations(ptx)
  local files, locs, n, cur = {}, {}, 0, false
  for l in (ptx .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    local id, path = l:match('^%s*%.file%s+(%d+)%s+"(.-)"')
    if id then files[tonumber(id)] = path:gsub("^%./", "") end
    if l:match("^%s*[%.%w%s]*%.entry[%s(]") or l:match("^%s*[%.%w%s]*%.func[%s(]") then cur = false end
    local f, ln = l:match("^%s*%.loc%s+(%d+)%s+(%d+)")
    if f then cur = files[tonumber(f)] and { file = files[tonumber(f)], line = tonumber(ln) } or false end
    locs[n] = cur
  end
  return locs
end

--- Give each instruction of a listing that names its PTX line the Lua
-- line of that PTX line's `.loc` (none when it has none: a prologue).
function M.attribute(listing, ptx)
  local locs = M.ptx_locations(ptx)
  for _, fn in ipairs(listing.functions) do
    for _, it in ipairs(fn.items) do
      if it.ptx_line then
        local loc = locs[it.ptx_line]
        it.file, it.line = loc and loc.file or nil, loc and loc.line or nil
      end
    end
  end
  return listing
end

--- Disassemble cubin bytes with nvdisasm -g -gp. Returns the parsed
-- listing (see parse) with .nvdisasm (its path), its instructions given
-- Lua lines through ptx (the PTX text compiled) when given; raises the
-- missing-program message without nvdisasm, nvdisasm's own when it fails.
function M.disassemble(cubin, ptx)
  local exe = toolkit.find("nvdisasm")
  if not exe then error(toolkit.missing_message("nvdisasm"), 0) end
  local path = sys.temp_file(cubin, ".cubin")
  local res, err = sys.run({ exe, "-g", "-gp", "-c", path }, { timeout = 120 })
  os.remove(path)
  if not res then error("nvdisasm: " .. err, 0) end
  if res.status ~= 0 then
    error(("nvdisasm (%s) failed on the cubin (exit status %d): %s"):format(exe, res.status, res.stderr .. res.stdout), 0)
  end
  local listing = M.parse(res.stdout)
  if ptx then M.attribute(listing, ptx) end
  listing.nvdisasm = exe
  return listing
end

-- ----------------------------------------------------- loops and hazards

--- "file:line", or "(no Lua line)" for an instruction without one.
local function where(item)
  return item.file and ("%s:%d"):format(item.file, item.line) or "(no Lua line)"
end

-- The tensor-core MMA opcodes (a loop holding one is an MMA loop).
local MMA = {}
for op in ("HMMA IMMA BMMA DMMA QMMA OMMA HGMMA IGMMA QGMMA BGMMA UTCHMMA UTCIMMA UTCQMMA UTCOMMA UTCMMA"):gmatch("%S+") do
  MMA[op] = true
end

--- Whether an instruction is a GPU- or system-scope fence: MEMBAR at .GPU
-- or .SYS scope, or the error barriers ptxas puts beside one.
local function is_wide_fence(it)
  if it.opcode == "MEMBAR" then return it.text:match("%.GPU") ~= nil or it.text:match("%.SYS") ~= nil end
  return it.opcode == "ERRBAR" or it.opcode == "CGAERRBAR"
end

--- The wgmma wait count of a WARPGROUP.DEPBAR.LE gsb0, N (nil for others).
local function depbar_count(it)
  if it.opcode ~= "WARPGROUP" then return nil end
  local n = it.text:match("^[^;]*DEPBAR%.LE%s+gsb0%s*,%s*(0?x?%x+)")
  return n and tonumber(n)
end

-- What costs time in a loop, in report order: a name, what it is, why it
-- costs, and the test of one instruction (drain's test also sees whether
-- this iteration of a k-loop committed before it, an HGMMA marked gsb0:
-- the wait for zero groups after the last k-block, outside the k-loop,
-- is no drain).
M.HAZARDS = {
  { name = "fence", what = "GPU/system-scope fence",
    why = "waits for every earlier memory operation to be visible GPU-wide (hundreds of cycles)",
    test = function(it) return is_wide_fence(it) end },
  { name = "local", what = "local memory (spill or local array)",
    why = "LDL/STL go through L1 to DRAM: register spills or an indexed array",
    test = function(it) return it.opcode == "LDL" or it.opcode == "STL" end },
  { name = "drain", what = "wgmma drain right after the commit",
    why = "waits for every wgmma group of this iteration (wait_group 0), so the tensor pipe empties each k-block; "
      .. "wait_group 1 and release the previous stage instead",
    test = function(it, committed) return committed and depbar_count(it) == 0 end },
}

--- The offset of each label of a function: { [".L_x_3"] = offset of the
-- first instruction after it }.
local function label_offsets(fn)
  local at, pending = {}, {}
  for _, it in ipairs(fn.items) do
    if it.label then pending[#pending + 1] = it.label
    else
      for _, l in ipairs(pending) do at[l] = it.offset end
      pending = {}
    end
  end
  return at
end

--- The label a branch goes to, or nil.
local function branch_target(it)
  return it.opcode == "BRA" and it.text:match("`%((%.L_[%w_]+)%)") or nil
end

--- The loops of a function: each backward branch (to a label at or before
-- it) closes one, { from, to (offsets, inclusive), mma (MMA count),
-- uniform, inner_mma (an MMA loop holding no other: a k-loop) },
-- innermost first (shortest span). uniform: closed by BRA.U.ANY, the loop
-- ptxas wraps around an instruction that needs a warp-uniform operand
-- (once per distinct value, once in practice), neither a k-loop nor where
-- a hazard is named (the loop around it is). A jump back from an out-of-line block
-- (ptxas puts a retried mbarrier wait past the end: `@!P0 BRA` to it, and
-- it jumps back to the instruction after that branch) is no loop.
function M.loops(fn)
  local at, loops, prev = label_offsets(fn), {}, {}
  local last
  for _, it in ipairs(fn.items) do
    if it.opcode then prev[it.offset], last = last, it end
  end
  for _, it in ipairs(fn.items) do
    local target = branch_target(it)
    local before = target and at[target] and prev[at[target]]
    local into = before and branch_target(before) and at[branch_target(before)]
    local detour = into and into > at[target] and into <= it.offset
    if target and at[target] and at[target] <= it.offset and not detour then
      local lp = { from = at[target], to = it.offset, mma = 0, uniform = it.text:match("^[^;]*BRA%.U%.ANY") ~= nil }
      for _, x in ipairs(fn.items) do
        if x.opcode and x.offset >= lp.from and x.offset <= lp.to and MMA[x.opcode] then lp.mma = lp.mma + 1 end
      end
      loops[#loops + 1] = lp
    end
  end
  table.sort(loops, function(a, b) return a.to - a.from < b.to - b.from end)
  for i, lp in ipairs(loops) do
    lp.inner_mma = lp.mma > 0 and not lp.uniform
    for j = 1, i - 1 do
      local o = loops[j]
      if o.mma > 0 and not o.uniform and o.from >= lp.from and o.to <= lp.to and (o.from ~= lp.from or o.to ~= lp.to) then
        lp.inner_mma = false
      end
    end
  end
  return loops
end

--- The instructions of fn in [from, to], in order.
local function body(fn, from, to)
  local out = {}
  for _, it in ipairs(fn.items) do
    if it.opcode and it.offset >= from and it.offset <= to then out[#out + 1] = it end
  end
  return out
end

--- Add the hazards of one loop of fn to acc ({ out, by, seen }): each
-- instruction once (in the innermost loop holding it), grouped per kind
-- and Lua line.
local function loop_hazards(fn, lp, acc)
  local committed = false
  for _, it in ipairs(body(fn, lp.from, lp.to)) do
    for _, h in ipairs(M.HAZARDS) do
      if not acc.seen[it] and h.test(it, committed and lp.inner_mma) then
        acc.seen[it] = true
        local key = table.concat({ fn.name, h.name, where(it) }, "\0")
        local g = acc.by[key]
        if not g then
          g = { func = fn.name, kind = h.name, what = h.what, why = h.why, file = it.file, line = it.line,
                where = where(it), loop = { from = lp.from, to = lp.to }, insts = {} }
          acc.by[key], acc.out[#acc.out + 1] = g, g
        end
        g.insts[#g.insts + 1] = it
      end
    end
    if it.opcode == "HGMMA" and it.text:match("gsb0") then committed = true end
  end
end

--- The hazards of a listing (see HAZARDS), grouped per kernel, kind and
-- Lua line, in instruction order: { { func, kind, what, why, file, line,
-- where, loop = { from, to }, insts = { item... } } }. Only instructions
-- inside a loop (not a uniform one) count: the innermost loop holding
-- each is named.
function M.hazards(listing)
  local acc = { out = {}, by = {}, seen = {} }
  for _, fn in ipairs(listing.functions) do
    for _, lp in ipairs(M.loops(fn)) do
      if not lp.uniform then loop_hazards(fn, lp, acc) end
    end
  end
  table.sort(acc.out, function(a, b)
    if a.func ~= b.func then return a.func < b.func end
    return a.insts[1].offset < b.insts[1].offset
  end)
  return acc.out
end

--- The figures of each innermost MMA loop (an MMA loop holding no other
-- MMA loop; a k-loop): { func, registers, from, to, instructions, mma =
-- { [shape text] = n }, mma_count, in_flight (the least DEPBAR gsb0
-- count: wgmma groups left in flight; nil without one), fences (GPU or
-- system scope), local_insts (LDL, STL), batches (wgmma batches begun,
-- WARPGROUP.ARRIVE: the k-blocks an iteration of a wgmma loop runs) }.
function M.mma_loops(listing)
  local out = {}
  for _, fn in ipairs(listing.functions) do
    for _, lp in ipairs(M.loops(fn)) do
      if lp.inner_mma then
        local r = { func = fn.name, registers = fn.registers, from = lp.from, to = lp.to, instructions = 0, mma = {},
                    mma_count = 0, fences = 0, local_insts = 0, batches = 0 }
        for _, it in ipairs(body(fn, lp.from, lp.to)) do
          r.instructions = r.instructions + 1
          if MMA[it.opcode] then
            local shape = it.text:gsub("^@!?U?P%w+%s+", ""):match("^[%w%.]+")
            r.mma[shape] = (r.mma[shape] or 0) + 1
            r.mma_count = r.mma_count + 1
          end
          local n = depbar_count(it)
          if n then r.in_flight = math.min(r.in_flight or n, n) end
          if is_wide_fence(it) then r.fences = r.fences + 1 end
          if it.opcode == "WARPGROUP" and it.text:match("ARRIVE") then r.batches = r.batches + 1 end
          if it.opcode == "LDL" or it.opcode == "STL" then r.local_insts = r.local_insts + 1 end
        end
        out[#out + 1] = r
      end
    end
  end
  return out
end

-- --------------------------------------------------------------- summary

--- Instruction counts by class per Lua line: { rows = { { file, line,
-- where, counts = { class = n }, total } }, totals = { counts, total } }.
-- Rows in file order (first seen), then line; "(no Lua line)" last.
function M.summary(listing)
  local rows, by, file_rank = {}, {}, {}
  local totals = { counts = {}, total = 0 }
  for _, name in ipairs(M.class_names()) do totals.counts[name] = 0 end
  for _, fn in ipairs(listing.functions) do
    for _, it in ipairs(fn.items) do
      if it.opcode then
        local key = where(it)
        local row = by[key]
        if not row then
          row = { file = it.file, line = it.line, where = key, counts = {}, total = 0 }
          for _, name in ipairs(M.class_names()) do row.counts[name] = 0 end
          by[key], rows[#rows + 1] = row, row
          if it.file and not file_rank[it.file] then file_rank[it.file] = #rows end
        end
        row.counts[it.class], row.total = row.counts[it.class] + 1, row.total + 1
        totals.counts[it.class], totals.total = totals.counts[it.class] + 1, totals.total + 1
      end
    end
  end
  table.sort(rows, function(a, b)
    if (a.file == nil) ~= (b.file == nil) then return b.file == nil end
    if a.file ~= b.file then return file_rank[a.file] < file_rank[b.file] end
    return (a.line or 0) < (b.line or 0)
  end)
  return { rows = rows, totals = totals }
end

-- ------------------------------------------------------------- rendering

--- A reader of source lines: file, line -> the line's text (trimmed) or nil.
-- Files are read from disk once each.
function M.file_source()
  local files = {}
  return function(file, line)
    if files[file] == nil then
      local f = io.open(file, "rb")
      local lines = false
      if f then
        lines = {}
        for l in (f:read("*a") .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = l end
        f:close()
      end
      files[file] = lines
    end
    local text = files[file] and files[file][line]
    return text and (text:gsub("^%s+", ""):gsub("%s+$", ""))
  end
end

--- The listing: each function, each change of Lua line as a comment with
-- the source text, then the SASS instructions from it.
local function render_listing(listing, source, out)
  for _, fn in ipairs(listing.functions) do
    local count = 0
    for _, it in ipairs(fn.items) do if it.opcode then count = count + 1 end end
    out[#out + 1] = ("// function %s: %d instructions%s%s"):format(fn.name, count,
      fn.registers and (", %d registers"):format(fn.registers) or "",
      fn.padding > 0 and (" (+%d NOPs of padding, not counted)"):format(fn.padding) or "")
    local shown = false
    for _, it in ipairs(fn.items) do
      if it.label then
        out[#out + 1] = it.label .. ":"
      else
        local w = where(it)
        if w ~= shown then
          local text = it.file and source(it.file, it.line)
          out[#out + 1] = "-- " .. w .. (text and text ~= "" and ("  " .. text) or "")
          shown = w
        end
        out[#out + 1] = ("    /*%04x*/  %s"):format(it.offset, it.text)
      end
    end
    out[#out + 1] = ""
  end
end

--- Cut a source line to n characters for the summary table.
local function clip(text, n)
  text = text and text:gsub("%s+", " ")
  if not text or #text <= n then return text or "" end
  return text:sub(1, n - 3) .. "..."
end

--- The per-Lua-line table of class counts, a total row last.
local function render_summary(summary, source, out)
  local names = M.class_names()
  local wide = #"total"
  for _, r in ipairs(summary.rows) do wide = math.max(wide, #r.where) end
  local head = { ("%-" .. wide .. "s"):format("Lua line") }
  for _, n in ipairs(names) do head[#head + 1] = ("%10s"):format(n) end
  head[#head + 1] = ("%7s"):format("total")
  out[#out + 1] = "// SASS instructions by class per Lua line"
  out[#out + 1] = table.concat(head, " ")
  local function row(label, counts, total, text)
    local cells = { ("%-" .. wide .. "s"):format(label) }
    for _, n in ipairs(names) do cells[#cells + 1] = ("%10d"):format(counts[n]) end
    cells[#cells + 1] = ("%7d"):format(total)
    local line = table.concat(cells, " ")
    out[#out + 1] = text and text ~= "" and (line .. "  " .. text) or line
  end
  for _, r in ipairs(summary.rows) do
    row(r.where, r.counts, r.total, r.file and clip(source(r.file, r.line), 48))
  end
  row("total", summary.totals.counts, summary.totals.total)
end

--- The opcodes of a hazard's instructions with their counts, in first-seen
-- order: "MEMBAR.ALL.GPU x2, ERRBAR x2".
local function hazard_ops(insts)
  local order, n = {}, {}
  for _, it in ipairs(insts) do
    local op = it.text:gsub("^@!?U?P%w+%s+", ""):match("^[%w%._]+") or it.opcode
    if not n[op] then order[#order + 1] = op; n[op] = 0 end
    n[op] = n[op] + 1
  end
  for i, op in ipairs(order) do order[i] = n[op] > 1 and ("%s x%d"):format(op, n[op]) or op end
  return table.concat(order, ", ")
end

--- The lines that report hazards (see M.hazards): one per Lua line and
-- kind with its source text, then why it costs; one line saying there is
-- none when the list is empty. source: a reader of source lines.
function M.render_hazards(hazards, source)
  source = source or M.file_source()
  if #hazards == 0 then
    local names = {}
    for i, h in ipairs(M.HAZARDS) do names[i] = h.what end
    return { "// hazards in loops: none (" .. table.concat(names, ", ") .. ")" }
  end
  local out = { ("// hazards in loops: %d"):format(#hazards) }
  for _, h in ipairs(hazards) do
    local text = h.file and source(h.file, h.line)
    out[#out + 1] = ("hazard %s: %s: %d instruction%s (%s) in the loop /*%04x*/../*%04x*/ of %s%s"):format(
      h.where, h.what, #h.insts, #h.insts == 1 and "" or "s", hazard_ops(h.insts), h.loop.from, h.loop.to, h.func,
      text and text ~= "" and ("  " .. clip(text, 60)) or "")
    out[#out + 1] = "    " .. h.why
  end
  return out
end

--- Text of a listing: a header, the interleaved listing (unless
-- opts.summary_only), then the per-line table. opts.source: a reader of
-- source lines (default: the files on disk, see file_source).
function M.render(listing, opts)
  opts = opts or {}
  local source = opts.source or M.file_source()
  local summary = listing.summary or M.summary(listing)
  local out = {}
  if listing.kernel then
    out[#out + 1] = ("// kernel %s, %s: %d SASS instructions (a cubin of %d bytes from %s)"):format(
      listing.kernel, listing.arch, summary.totals.total, listing.cubin_size or 0, listing.compiler or "?")
    out[#out + 1] = "// disassembled by " .. (listing.nvdisasm or "nvdisasm")
  end
  if not opts.summary_only then render_listing(listing, source, out) end
  render_summary(summary, source, out)
  for _, l in ipairs(M.render_hazards(listing.hazards or M.hazards(listing), source)) do out[#out + 1] = l end
  return table.concat(out, "\n") .. "\n"
end

-- --------------------------------------------------------------- kernels

--- The SASS of a kernel specialization: k:sass{values}. Compiles the
-- kernel (through the cubin cache, with line info), disassembles it and
-- returns the text (see render; opts: summary_only, source) and the
-- listing { kernel, arch, functions, summary, ... }.
function M.kernel(k, given, opts)
  if not toolkit.find("nvdisasm") then error(toolkit.missing_message("nvdisasm"), 0) end
  local s = k:specialize(given)
  local cubin = compile.kernel_cubin(s)
  local listing = M.disassemble(cubin.data, s.ptx)
  listing.kernel, listing.arch, listing.cubin_size, listing.compiler = k.name, s.arch, cubin.size, compile.identity()
  listing.summary = M.summary(listing)
  listing.hazards = M.hazards(listing)
  return M.render(listing, opts), listing
end

argcheck.sign(M, "sass", {
  opcode = { "text: string" },
  classify = { "opcode: string" },
  parse = { "text: string" },
  ptx_locations = { "ptx: string" },
  attribute = { "listing: table", "ptx: string" },
  disassemble = { "cubin: string", "ptx: string?" },
  summary = { "listing: table" },
  render = { "listing: table", "opts: table?" },
  kernel = { "k: table", "given: table?", "opts: table?" },
  loops = { "fn: table" },
  hazards = { "listing: table" },
  mma_loops = { "listing: table" },
  render_hazards = { "hazards: table", "source: function?" },
})

return M
