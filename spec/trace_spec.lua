-- pyptx.trace: the active trace, user-line location, operand packing and
-- the one emit path every instruction takes.
local H = require "spec.helpers"
local pyptx = require "pyptx"
local trace = require "pyptx.trace"
local core = require "pyptx.core"
local reg, ptx, T = pyptx.reg, pyptx.ptx, pyptx.types

--- Run fn inside a kernel trace; returns the trace's specialization.
local function within(fn)
  return pyptx.kernel "t" { arch = "sm_80", fn }:specialize()
end

describe("pyptx.trace", function()
  describe("locations", function()
    it("formats file:line like Lua does", function()
      assert.equal("a/b.lua:12", trace.format_where("@a/b.lua", 12))
      assert.equal("stdin:3", trace.format_where("=stdin", 3))   -- Lua drops the "=" too
      local _, err = pcall(loadstring("error('x')", "=stdin"))
      assert.equal(err:match("^[^:]+:%d+"), trace.format_where("=stdin", 1))
    end)

    it("finds the first frame outside luaptx's own modules", function()
      local src, line = trace.where(1)
      assert.equal("@spec/trace_spec.lua", src)
      assert.equal(debug.getinfo(1, "l").currentline - 2, line)
    end)

    it("names the chunk from core.where only when asked (the per-instruction call builds no string)", function()
      local plain, here = { core.where(1) }, debug.getinfo(1, "l").currentline
      assert.equal(2, select("#", core.where(1)))
      assert.equal("userdata", type(plain[1]))
      assert.equal(here, plain[2])
      local key, line, name = core.where(1, true)
      assert.equal(plain[1], key)
      assert.equal(here + 4, line)
      assert.equal("@spec/trace_spec.lua", name)
    end)

    it("recognizes luaptx's own chunks by how they were loaded, never by their path", function()
      for _, fn in ipairs { trace.where, require("pyptx.reg").scalar, require("pyptx.runtime.tensor").empty } do
        local src = debug.getinfo(fn, "S").source   -- the bundle's name, or LUAPTX_LUA_DIR's file
        assert.truthy(trace.is_internal(src), src)
        assert.truthy(trace.is_own(src), src)
        assert.equal("module", core.own_source(src))
      end
      assert.equal("cli", core.own_source(debug.getinfo(require("luaptx.cli").main, "S").source))
      for _, src in ipairs { "@/usr/share/luaptx/pyptx/ptx.lua", "@/home/u/pyptx/kern/bad.lua", "@/x/pyptx/runtime/t.lua",
        "@/x/lua/pyptx/reg.lua", "@/x/../bin/luaptx.lua", "@examples/hopper/pyptx_demo.lua", "@spec/trace_spec.lua" } do
        assert.falsy(trace.is_internal(src), src)
        assert.falsy(trace.is_own(src), src)
      end
    end)

    it("takes no level: fail(msg) and form(opcode, strict) find the user's line themselves", function()
      assert.equal(1, debug.getinfo(trace.fail, "u").nparams)
      assert.equal(2, debug.getinfo(trace.form, "u").nparams)
    end)

    it("names the user's line for what a helper marked with pyptx.helper() emits or raises", function()
      local dir = H.temp_dir()
      H.write(dir .. "/helpy.lua", table.concat({
        'local pyptx = require "pyptx"',
        'pyptx.helper()',
        'local M = {}',
        'function M.bump(r) return r + pyptx.reg.scalar(pyptx.types.u64) end',
        'function M.shift(x) local y = bit.rshift(x, 2) return y end',
        'return M', "" }, "\n"))
      local script = table.concat({
        'package.path = "' .. dir .. '/?.lua;" .. package.path',
        'local pyptx = require "pyptx"',
        'local helpy = require "helpy"',
        'return pyptx.kernel "k" { arch = "sm_80", function()',
        '  helpy.bump(pyptx.reg.scalar(pyptx.types.u32))',
        '  helpy.shift({})',
        'end }', "" }, "\n")
      H.write(dir .. "/k.lua", script)
      local _, err = H.luaptx({ "ptx", "k.lua" }, { cwd = dir })
      assert.equal("luaptx: k.lua:5: operator + mixes u32 and u64; convert one side first with reg.from(x, u32)\n", err)
      H.write(dir .. "/k.lua", script:gsub("  helpy.bump[^\n]*\n", ""))
      _, err = H.luaptx({ "ptx", "k.lua" }, { cwd = dir })
      assert.matches("^luaptx: k.lua:5: [^\n]*bad argument #1 to 'rshift'", err)
      assert.is_nil(err:find("helpy.lua", 1, true))
    end)

    it("puts what the walk-saving emit_up paths append at the user's lines", function()
      local first
      local text = pyptx.kernel "up" { arch = "sm_100a", function()
        local a, b = reg.scalar(T.u32), reg.scalar(T.u32)
        first = debug.getinfo(1, "l").currentline + 1
        local s = a + b                                        -- an operator
        local c = reg.scalar(T.u32, 7)                         -- reg.scalar's mov
        ptx.mbarrier.wait(ptx.addr(reg.scalar(T.u32)), 0)      -- a helper calling a helper
        ptx.inst.add.u32(s, s, c)                              -- ptx.inst through trace.emit
      end }:ptx()
      local want = { ["add.u32"] = { first, first + 3 }, ["mov.u32"] = { first + 1 },
                     ["mbarrier.try_wait.parity.shared::cta.b64"] = { first + 2 } }
      local line, got = nil, {}
      for l in text:gmatch("[^\n]+") do
        local at = l:match("^\t%.loc\t1 (%d+) ")
        if at then line = tonumber(at) end
        local op = l:match("^\t([%w_.:]+) ")
        if op and want[op] then got[op] = got[op] or {}; got[op][#got[op] + 1] = line end
      end
      assert.same(want, got)
    end)

    it("has no luaptx module tail-call emit_up, whose walk starts above the caller's frame", function()
      local files = H.find("lua/pyptx", "%.lua$")
      assert.is_true(#files > 20)
      for _, path in ipairs(files) do
        local n = 0
        for l in H.read(path):gmatch("([^\n]*)\n") do
          n = n + 1
          local code = l:gsub("%-%-.*", "")
          assert(not code:find("return%s+[%w_.]*emit_up%s*%("), ("%s:%d tail-calls emit_up"):format(path, n))
        end
      end
    end)

    it("prefixes failures with the user's file:line", function()
      local ok, err = pcall(function() trace.fail("boom") end)
      assert.is_false(ok)
      assert.equal("spec/trace_spec.lua:" .. (debug.getinfo(1, "l").currentline - 2) .. ": boom", err)
    end)
  end)

  describe("the active trace", function()
    it("exists only inside a kernel body", function()
      assert.is_nil(trace.current())
      local seen
      within(function() seen = trace.current() end)
      assert.is_table(seen)
      assert.equal("t", seen.name)
      assert.equal("sm_80", seen.arch)
      assert.same({ 80, 0, 80 }, { seen.sm, seen.family, seen.version })
      assert.is_nil(trace.current())
    end)

    it("names what was called outside a trace, at the user's line", function()
      local ok, err = pcall(function() trace.need("ptx.thing") end)
      assert.is_false(ok)
      assert.matches("^spec/trace_spec.lua:%d+: ptx.thing called outside a kernel trace %(use it inside a kernel body%)$", err)
    end)

    it("counts instructions and calls on_emit with each item index", function()
      local got = {}
      local s = within(function()
        trace.current().on_emit = function(i) got[#got + 1] = i end
        reg.scalar(T.u32, 1)
        ptx.label("x")
        ptx.ret()
      end)
      assert.same({ 0, 2 }, got)
      assert.equal(2, s.instructions)
    end)

    it("makes fresh labels unique within a trace", function()
      within(function()
        local t = trace.current()
        assert.equal("$L__a_1", trace.fresh_label(t, "a"))
        assert.equal("$L__a_2", trace.fresh_label(t, "a"))
        assert.equal("$L__L_3", trace.fresh_label(t))
      end)
    end)

    it("interns symbols once per trace", function()
      within(function()
        local t = trace.current()
        local a = trace.sym(t, "foo")
        assert.equal(a, trace.sym(t, "foo"))
        assert.are_not.equal(a, trace.sym(t, "bar"))
      end)
    end)

    it("appends raw body lines verbatim", function()
      local s = within(function() trace.raw_line("// hand-written") end)
      assert.matches("\n\t// hand%-written\n", s.ptx)
    end)
  end)

  describe("forms", function()
    it("intern an opcode once and validate it", function()
      within(function()
        local a, info = trace.form("add.u32", true)
        assert.equal(a, (trace.form("add.u32", true)))
        assert.is_true(info.op >= 0)
      end)
    end)

    it("refuse an invalid form at the user's line", function()
      local ok, err = pcall(function() trace.form("add.u33", true) end)
      assert.is_false(ok)
      assert.matches("^spec/trace_spec.lua:%d+: add.u33:", err)
    end)
  end)

  describe("emit", function()
    it("packs numbers, strings, vectors and registers", function()
      local s = within(function()
        local f = reg.array(T.f32, 2)
        trace.emit(trace.form("mov.b64", true), reg.scalar(T.b64), { f[0], f[1] })
        trace.emit(trace.form("mov.u64", true), reg.scalar(T.u64), "t")
      end)
      assert.matches("mov.b64 \t%%rd1, {%%f1, %%f2};", s.ptx)
      assert.matches("mov.u64 \t%%rd2, t;", s.ptx)
    end)

    it("reports the core's message at the user's line", function()
      local ok, err = pcall(within, function()
        trace.emit(trace.form("add.u32", true), reg.scalar(T.u32), 1)
      end)
      assert.is_false(ok)
      assert.matches("^spec/trace_spec.lua:%d+: add.u32 takes 3 operand%(s%), got 2$", err)
    end)

    it("refuses to emit outside a trace", function()
      local ok, err = pcall(trace.emit, 0)
      assert.is_false(ok)
      assert.matches("ptx instruction called outside a kernel trace", err)
    end)
  end)

  describe("speed", function()
    --- The first and last line numbers of the function whose header line contains `header`: its
    -- end is the next line that is exactly the header's indentation followed by "end".
    local function body(text, header)
      local first, close, n = nil, nil, 0
      for line in text:gmatch("([^\n]*)\n") do
        n = n + 1
        if not first and line:find(header, 1, true) then first, close = n, line:match("^(%s*)") .. "end"
        elseif first and line == close then return first, n end
      end
      error("function not found: " .. header)
    end

    it("raises LuaJIT's trace limit, so a process tracing many kernels flushes no compiled code", function()
      -- 1,500 live loops make 1,500 traces: past LuaJIT's default limit of
      -- 1,000 it flushes them all and numbers afresh, so no trace 1,200
      local path = H.temp_file(table.concat({
        'local keep = {}',
        'for i = 1, 1500 do',
        '  keep[i] = loadstring("local s = 0 for j = 1, 300 do s = s + j end return s + " .. i)',
        '  keep[i]()',
        'end',
        'io.write(tostring(require("jit.util").traceinfo(1200) ~= nil))',
      }, "\n"), ".lua")
      local out, err = H.luaptx({ path })
      assert.equal("true", out, err)
    end)

    it("keeps the unrolled Blackwell GEMM's k-block loop free of closure aborts of the JIT", function()
      -- a closure made per wait (FNEW) or an upvalue closed per k-block
      -- (UCLO) is NYI for LuaJIT's JIT: the loop would run interpreted
      local ok, v = pcall(require, "jit.v")
      if not ok then H.pending("LuaJIT's jit.v module is not installed: " .. tostring(v)) return end
      local path = "examples/blackwell/gemm.lua"
      local text = assert(io.open(path, "rb")):read("*a")
      -- only the bodies run once per k-block: a closure made once around them (the
      -- ptx.if_ blocks) aborts at most one trace and is not what this guards
      local spans = { { body(text, "local function wait(") }, { body(text, "local function produce(kt)") },
                      { body(text, "local function consume(kt)") } }
      local log = H.temp_file("", ".log")   -- jit.v rewrites it; removed when the test ends
      local gemm = dofile(path)
      v.start(log)
      local traced, err = pcall(function() gemm.build(128, 256, 64 * 120, { unroll = true }):specialize({}) end)
      v.off()
      assert(traced, err)
      local out = assert(io.open(log, "rb")):read("*a")
      -- strictly inside: LuaJIT puts the FNEW that makes a function itself
      -- on its `end` line, and a trace that runs on past the last k-block
      -- into the code that defines consume (once per trace) aborts there
      for at in out:gmatch("NYI: bytecode 5[01] at gemm%.lua:(%d+)") do
        at = tonumber(at)
        for _, s in ipairs(spans) do
          assert(at <= s[1] or at >= s[2], ("the JIT aborts on a closure at gemm.lua:%d, inside the k-block loop (lines %d-%d)")
            :format(at, s[1] + 1, s[2] - 1))
        end
      end
    end)
  end)
end)
