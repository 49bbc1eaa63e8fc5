-- printf and assert on the emulator: calls to the extern functions CUDA's
-- runtime provides, vprintf (CUDA printf, Triton's tl.device_print) and
-- __assertfail (CUDA assert, tl.device_assert), in the PTX nvcc and Triton
-- emit; any other extern function is refused when a thread reaches it.
local pyptx = require "pyptx"
local tensor = require "pyptx.runtime.tensor"
local H = require "spec.helpers"
local R = require "spec.fixtures.triton.run"
local ptx = pyptx.ptx

--- The lines of text (without their newlines).
local function lines(text)
  local t = {}
  for l in text:gmatch("([^\n]*)\n") do t[#t + 1] = l end
  return t
end

--- Run Lua code in a child luaptx (stdout is what printf writes); its
-- stdout, stderr and status.
local function child(code)
  return H.luaptx({ "-e", code }, { cwd = H.ROOT })
end

--- Lua code launching nvcc's printf kernel on 4 threads with x, on the emulator.
local function nvcc_pr(x)
  return ([[
local pyptx, tensor = require "pyptx", require "pyptx.runtime.tensor"
local dev = require("pyptx.runtime").open("emu")
local x = tensor.from_table({ %s }, pyptx.types.s32, nil, dev)
local mod = pyptx.load_ptx("spec/fixtures/ptx/nvcc/printf_sm80.ptx")
io.stderr:write(("x at 0x%%x\n"):format(tonumber(x.ptr)))
mod.pr { grid = 1, block = 4, args = { x, 1.5, 2.25, 1234567890123, 65535 }, device = dev }
]]):format(table.concat(x, ", "))
end

describe("vprintf on the emulator (issue 26 item 6)", function()
  it("formats nvcc's printf as CUDA does: its argument buffer, every conversion, widths, l/ll/h; one whole line per thread", function()
    local out, err, status = child(nvcc_pr { 0, 7, 42, 255 })
    assert.equal(0, status, err)
    local p = assert(err:match("x at (0x%x+)"))
    local hex = { "0", "7", "2a", "ff" }
    local want = {}
    for t, x in ipairs({ 0, 7, 42, 255 }) do
      want[t] = ("[thread (%d,0,0), CTA (0,0,0)] t=%d x=%d u=%d hex=%s HEX=%s oct=%o c=%s s=str p=%s"):format(t - 1, t - 1, x, x,
        hex[t], hex[t]:upper(), x, string.char(64 + t), p)
    end
    for t = 0, 3 do
      want[5 + t] = ("[thread (%d,0,0), CTA (0,0,0)] f=1.500000 e=2.250000e+00 g=1.5 a=0x1.2p+1 w=[   1.500] [%d     ] [00000%d] "
        .. "[+%d] ll=1234567890123 llx=11f71fb04cb h=-1 hu=65535 %%"):format(t, t, t, t)
    end
    assert.same(want, lines(out))
  end)

  it("prints Triton's tl.device_print, each thread's line whole", function()
    local out, err, status = child([[
local R = require "spec.fixtures.triton.run"
R.run(R.case("print_sm_80"), require("pyptx.runtime").open("emu"))]])
    assert.equal(0, status, err)
    local want = {}
    for cta = 0, 1 do
      for t = 0, 31 do
        want[#want + 1] = ("[thread (%d,0,0), CTA (%d,0,0)] pid (%d, 0, 0) idx (%d) x: %.6f"):format(t, cta, cta, t % 4,
          (cta * 4 + t % 4) * 0.5)
      end
    end
    -- CTAs run on several host threads: whole lines, in any order between CTAs
    local got = lines(out)
    table.sort(want)
    table.sort(got)
    assert.same(want, got)
  end)
end)

describe("__assertfail on the emulator (issue 26 item 6)", function()
  it("stops the launch as CUDA's runtime reports a failed assert: message, file, line, function, block, thread", function()
    local _, err, status = child(nvcc_pr { 0, -7, 42, 255 })
    assert.not_equal(0, status)
    assert.matches("launching entry pr: pr, PTX line 143: call%.uni%s+__assertfail[^\n]*: device%-side assert triggered: printf%.cu:8: "
      .. "void pr%(const int %*, float, double, long long, unsigned short%): block: %[0,0,0%], thread: %[1,0,0%] "
      .. "Assertion `x%[t%] >= 0` failed%.", err)
  end)

  it("runs Triton's tl.device_assert, and stops at a failing one", function()
    local c = R.case("assert_sm_80")
    R.run(c, H.emu())
    local x = {}
    for i = 1, 64 do x[i] = i == 6 and -3 or i - 1 end
    local args = R.arguments(c, H.emu())
    args[1] = tensor.from_table(x, pyptx.types.s32, nil, H.emu())
    local ok, err = pcall(pyptx.load_ptx(R.DIR .. c.ptx).assert_kernel, { grid = 1, block = c.block, args = args, device = H.emu() })
    assert.is_false(ok)
    assert.matches("device%-side assert triggered: [^\n]*kernels%.py:%d+: unknown: block: %[0,0,0%], thread: %[5,0,0%] "
      .. "Assertion `x must be non%-negative` failed%.", err)
  end)
end)

describe("other extern functions (issue 26 item 6)", function()
  local PTX = [[
.version 8.0
.target sm_80
.address_size 64
.extern .func (.param .b32 r) mystery (.param .b32 a);
.visible .entry k(.param .u32 go, .param .u64 out)
{
  .reg .b32 %r<4>;
  .reg .b64 %rd<2>;
  .reg .pred %p<2>;
  ld.param.u32 %r1, [go];
  mov.u32 %r3, 5;
  setp.eq.u32 %p1, %r1, 0;
  @%p1 bra DONE;
  {
  .param .b32 p0;
  st.param.b32 [p0], %r1;
  .param .b32 r0;
  call.uni (r0), mystery, (p0);
  ld.param.b32 %r3, [r0];
  }
DONE:
  ld.param.u64 %rd1, [out];
  st.global.u32 [%rd1], %r3;
  ret;
}
]]

  it("are refused only when a thread reaches the call, naming the callee", function()
    local mod = pyptx.load_ptx(PTX, "mystery.ptx")
    local out = tensor.empty({ 1 }, pyptx.types.u32, H.emu())
    mod.k { grid = 1, block = 32, args = { 0, out }, device = H.emu() }
    assert.same({ 5 }, out:values())
    local ok, err = pcall(mod.k, { grid = 1, block = 32, args = { 1, out }, device = H.emu() })
    assert.is_false(ok)
    assert.matches("call%.uni%s+%(r0%), mystery, %(p0%): calls the extern function mystery, which has no body in this module; the "
      .. "emulator provides only vprintf %(printf%) and __assertfail %(assert%)", err)
  end)
end)

describe("ptx.printf and ptx.assert (issue 26 item 6)", function()
  local K = require "spec.fixtures.devlib_kernels"

  it("print each thread's line on the emulator, after the Lua line and the thread", function()
    local out, err, status = child([[
local K = require "spec.fixtures.devlib_kernels"
K.printing()()
io.stderr:write("line ", K.print_line, "\n")]])
    assert.equal(0, status, err)
    local line = assert(err:match("line (%d+)"))
    local got = lines(out)
    assert.equal(8, #got)
    for t = 0, 3 do
      assert.equal(("spec/fixtures/devlib_kernels.lua:%s: [thread (%d,0,0), CTA (0,0,0)] t=%d f=%d.00 d=%s w=%d h=%d x=%s s=hi "
        .. "n=-42 pi=3.5 %%"):format(line, t, t, t, ("%e"):format(t), t, t, ("%#06x"):format(t)), got[t + 1]:gsub("^%./", ""))
      assert.matches("^[^\n]*devlib_kernels%.lua:%d+: %[thread %(" .. t .. ",0,0%), CTA %(0,0,0%)%] no arguments$", got[5 + t])
    end
  end)

  it("emit what ptxas accepts (sm_80 and sm_90a)", function()
    local ptxas = H.need_ptxas()
    local sys = require "pyptx.core.sys"
    for _, arch in ipairs({ "sm_80", "sm_90a" }) do
      local path = sys.temp_file(K.printing(arch):ptx() , ".ptx")
      local r = H.run({ ptxas, "-arch=" .. arch, path, "-o", path .. ".cubin" })
      sys.remove_tree(path); sys.remove_tree(path .. ".cubin")
      assert.equal(0, r.status, r.stderr)
    end
    local k = K.asserting()
    local path = sys.temp_file(k:ptx(), ".ptx")
    local r = H.run({ ptxas, "-arch=sm_80", path, "-o", path .. ".cubin" })
    sys.remove_tree(path); sys.remove_tree(path .. ".cubin")
    assert.equal(0, r.status, r.stderr)
  end)

  it("assert: passes when the predicate holds, stops the launch like CUDA's assert when it does not", function()
    local k = K.asserting()
    local x = tensor.arange(64, pyptx.types.u32)
    assert.same(x:values(), k(x):values())
    local bad = x:values()
    bad[8] = 300
    local ok, err = pcall(k, tensor.from_table(bad, pyptx.types.u32))
    assert.is_false(ok)
    assert.matches(("devlib_kernels%%.lua:%d: @!%%%%p%%d+ call%%s+__assertfail[^\n]*: device%%-side assert triggered: "
      .. "[^\n]*devlib_kernels%%.lua:%d: devlib_assert: block: %%[0,0,0%%], thread: %%[7,0,0%%] Assertion `values stay below 100` "
      .. "failed%%."):format(K.assert_line, K.assert_line), err)
  end)

  it("refuse a format and arguments that do not match, at the caller's line", function()
    local function trace_error(body)   -- H.trace_error with this kernel's options; nil (no error) fails the match
      return H.trace_error(body, { arch = "sm_80", block = { 32 }, in_specs = {}, out_specs = {} })
    end
    assert.matches("printf_spec%.lua:%d+: ptx%.printf: format \"%%d %%d\" takes 2 argument%(s%), got 1",
      trace_error(function() ptx.printf("%d %d", 1) end))
    assert.matches("printf_spec%.lua:%d+: ptx%.printf: format \"%%y\": '%%y' at byte 1 is not a conversion CUDA's printf takes",
      trace_error(function() ptx.printf("%y", 1) end))
    assert.matches("printf_spec%.lua:%d+: ptx%.printf: argument 1 %(for %%d%) takes an integer register, got a f32 register",
      trace_error(function() ptx.printf("%d", pyptx.reg.scalar(pyptx.types.f32, 1)) end))
    assert.matches("printf_spec%.lua:%d+: ptx%.assert: expected a predicate register",
      trace_error(function() ptx.assert(1, "x") end))
  end)
end)
