--- The PTX front end through Lua: lossless and canonical printing of the
-- corpus, IR edits showing in the lossless text, positioned errors, the
-- `luaptx fmt` command, and ptxas assembling canonical output to the same
-- cubin as the original.
local ptxparse = require "pyptx.ptxparse"
local H = require "spec.helpers"

local CORPUS = "spec/fixtures/ptx"

--- Every .ptx file under a directory (recursively), sorted.
local function corpus_files(dir)
  return H.find(dir, "%.ptx$")
end

--- Run luaptx with args; returns its output (stderr included) and whether it succeeded.
local function luaptx(args)
  local out, _, rc = H.luaptx(args, { merge = true })
  return out, rc == 0
end

describe("ptx parser", function()
  local files = corpus_files(CORPUS)

  it("has a corpus of nvcc, tracer and hand-written PTX", function()
    assert.is_true(#files >= 30)
  end)

  it("prints every corpus file back byte for byte", function()
    for _, path in ipairs(files) do
      local text = ptxparse.read_file(path)
      assert.are.equal(text, ptxparse.parse(text, path):lossless(), path)
    end
  end)

  it("prints a canonical form that parses to itself", function()
    for _, path in ipairs(files) do
      local canon = ptxparse.parse_file(path):canonical()
      assert.are.equal(canon, ptxparse.parse(canon, "canonical"):canonical(), path)
    end
  end)

  it("gives the tracer's own output back unchanged in canonical mode", function()
    local path = CORPUS .. "/examples/hopper_rms_norm.ptx"
    local text = ptxparse.read_file(path)
    assert.are.equal(text, ptxparse.parse(text, path):canonical())
  end)

  it("reflects a renamed register in every use and declaration", function()
    local src = ".version 8.7\n.target sm_90a\n.address_size 64\n.entry k()\n{\n"
      .. "\t.reg .b32 %r<3>; // regs\n\t.reg .pred done;\n\tmov.u32 %r1, 7;\n"
      .. "\tsetp.eq.u32 done, %r1, 7;\n\t@done add.u32 %r2, %r1, %r1;\n}\n"
    local m = ptxparse.parse(src, "k.ptx")
    assert.are.equal(src, m:lossless())
    m:rename_register(0, "%r1", "%seven")
    m:rename_register(0, "done", "%p_done")
    local want = src:gsub("%%r1", "%%seven"):gsub("done", "%%p_done")
    assert.are.equal(want, m:lossless())
  end)

  it("reports malformed input as file:line:col: what was expected", function()
    local cases = {
      { ".entry k()\n{\n\tld.global.f32 %f1, [%rd1;\n}\n", "bad.ptx:3:26: expected ']'" },
      { ".entry k() {\n\tret;\n", "bad.ptx:3:1: expected '}' to close the body of k" },
      { ".version 8.0\nfoo", "bad.ptx:2:1: expected a directive" },
    }
    for _, c in ipairs(cases) do
      local ok, err = pcall(ptxparse.parse, c[1], "bad.ptx")
      assert.is_false(ok)
      assert.is_truthy(err:find(c[2], 1, true), err)
    end
  end)

  it("folds constant expressions in operands and keeps their spelling", function()
    local text = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n\t.reg .b32 \t%r<3>;\n" ..
      "\tmov.u32 \t%r1, (1+2)*4;\n\tadd.u32 \t%r2, %r1, 1 << 4;\n\tand.b32 \t%r2, %r2, 2 > 1 ? 0xF0|1 : 0;\n\tret;\n}\n"
    local m = ptxparse.parse(text, "k.ptx")
    assert.are.equal(text, m:lossless())
    local canon = m:canonical()
    assert.matches("mov.u32 \t%r1, 12;", canon, 1, true)
    assert.matches("add.u32 \t%r2, %r1, 16;", canon, 1, true)
    assert.matches("and.b32 \t%r2, %r2, 241;", canon, 1, true)
    local ok, err = pcall(ptxparse.parse, text:gsub("%(1%+2%)%*4", "(1+2)/0"), "k.ptx")
    assert.is_false(ok)
    assert.matches("k.ptx:7:%d+: malformed constant expression %(or a division by zero%)", err)
  end)

  it("folds an address offset of several constant terms as ptxas does", function()
    local path = CORPUS .. "/edge/address_exprs.ptx"
    local text = ptxparse.read_file(path)
    local canon = ptxparse.parse(text, path):canonical()
    assert.matches("[%rd1+292]", canon, 1, true)     -- [%rd1+288+4]
    assert.matches("[%rd1+2]", canon, 1, true)       -- [%rd1+4>>1]: base + (4>>1)
    assert.matches("[buf+9]", canon, 1, true)
    assert.matches("%rd2, buf+12;", canon, 1, true)
    assert.matches("st.local.u32 \t[8], %r1;", canon, 1, true)
    local ok, err = pcall(ptxparse.parse, text:gsub("%+288%+4", "-288+4"), "a.ptx")
    assert.is_false(ok)
    assert.matches("a.ptx:16:%d+: after '%-' an offset is one number; write an offset expression after '%+'", err)
    local ptxas = H.need_ptxas()
    local dir = H.temp_dir()
    local cubins = {}
    for i, src in ipairs { text, canon } do
      H.write(dir .. "/a.ptx", src)
      local res = H.run({ ptxas, "-arch=sm_80", dir .. "/a.ptx", "-o", dir .. "/a" .. i .. ".cubin" }, { merge = true })
      assert.equal(0, res.status, res.stdout)
      cubins[i] = H.read(dir .. "/a" .. i .. ".cubin")
    end
    assert.are.equal(cubins[1], cubins[2])
  end)

  it("never crashes on truncated or spliced input", function()
    local text = ptxparse.read_file(CORPUS .. "/nvcc/hopper_sm90a.ptx")
    for cut = 1, #text, 37 do
      local ok, m = pcall(ptxparse.parse, text:sub(1, cut) .. text:sub(cut + 50), "cut")
      if ok then assert.is_string(m:lossless()) else assert.matches("^cut:%d+:%d+: ", m) end
    end
  end)
end)

describe("luaptx fmt", function()
  local path = CORPUS .. "/nvcc/basic_sm80.ptx"

  it("is lossless by default", function()
    local out, ok = luaptx { "fmt", path }
    assert.is_true(ok)
    assert.are.equal(ptxparse.read_file(path), out)
  end)

  it("writes the canonical form with --canonical -o", function()
    local tmp = H.temp_dir() .. "/canon.ptx"
    local _, ok = luaptx { "fmt", path, "--canonical", "-o", tmp }
    assert.is_true(ok)
    local canon = ptxparse.read_file(tmp)
    assert.matches("^//\n// Generated by luaptx\n", canon)
    assert.is_nil(canon:find("Compiler Build ID", 1, true))
    assert.are.equal(canon, ptxparse.parse(canon):canonical())
  end)

  it("fails with the position of a syntax error", function()
    local tmp = H.temp_file(".version 8.0\n.entry k() {\n\tadd.s32 %r1, %r2\n}\n", ".ptx")
    local out, ok = luaptx { "fmt", tmp }
    assert.is_false(ok)
    assert.matches(":3:18: expected ',' or ';'", out, 1, true)
  end)

  it("creates its -o output 0600, replacing the file there (keeping its mode)", function()
    local dir = H.temp_dir()
    H.write(dir .. "/out.ptx", "old")
    H.run { "chmod", "644", dir .. "/out.ptx" }
    for out, mode in pairs { [dir .. "/new.ptx"] = "600\n", [dir .. "/out.ptx"] = "644\n" } do
      local msg, ok = luaptx { "fmt", path, "-o", out }
      assert.is_true(ok, msg)
      assert.are.equal(ptxparse.read_file(path), H.read(out))
      assert.equal(mode, H.run({ "stat", "-c", "%a", out }).stdout)
    end
    assert.same({ dir .. "/new.ptx", dir .. "/out.ptx" }, H.list(dir, ".*"))   -- no temporary left
  end)

  it("refuses to write -o through a symbolic link", function()
    local dir = H.temp_dir()
    H.write(dir .. "/victim", "keep")
    H.run { "ln", "-s", dir .. "/victim", dir .. "/out.ptx" }
    local out, ok = luaptx { "fmt", path, "-o", dir .. "/out.ptx" }
    assert.is_false(ok)
    assert.matches("cannot write " .. dir .. "/out.ptx: it is a symbolic link (not followed; name the file itself)", out,
      1, true)
    assert.equal("keep", H.read(dir .. "/victim"))
    assert.equal("link", require("pyptx.core.sys").kind(dir .. "/out.ptx"))
  end)

  it("leaves -o as it was when the input does not parse", function()
    local dir = H.temp_dir()
    local bad = H.write(dir .. "/bad.ptx", ptxparse.read_file(path) .. "\n.entry k() {\n\tadd.s32 %r1, %r2\n}\n")
    H.write(dir .. "/out.ptx", "old")
    for _, canonical in ipairs { false, true } do
      local out, ok = luaptx { "fmt", bad, "-o", dir .. "/out.ptx", canonical and "--canonical" or nil }
      assert.is_false(ok)
      assert.matches("bad.ptx:%d+:18: expected ',' or ';'", out)
      assert.equal("old", H.read(dir .. "/out.ptx"))
      assert.same({ bad, dir .. "/out.ptx" }, H.list(dir, ".*"))
    end
    local res = H.run { H.BIN, "fmt", bad }
    assert.equal(1, res.status)
    assert.equal("", res.stdout)   -- nothing printed before the error either
  end)

  it("writes -o to a device, and a file of several kernels in both layouts", function()
    local msg, ok = luaptx { "fmt", path, "-o", "/dev/null" }
    assert.is_true(ok, msg)
    local dir = H.temp_dir()
    local text = ptxparse.read_file(CORPUS .. "/large/big_gemm_sm80.ptx")
    local big = H.write(dir .. "/big.ptx", text .. text:gsub("big_gemm", "big_gemm_again"))
    msg, ok = luaptx { "fmt", big, "-o", dir .. "/out.ptx" }
    assert.is_true(ok, msg)
    assert.is_true(ptxparse.read_file(big) == H.read(dir .. "/out.ptx"))
    msg, ok = luaptx { "fmt", big, "--canonical", "-o", dir .. "/canon.ptx" }
    assert.is_true(ok, msg)
    assert.is_true(ptxparse.parse_file(big):canonical() == H.read(dir .. "/canon.ptx"))
  end)
end)

describe("canonical PTX and ptxas", function()
  it("assembles canonical output to the same cubin as the original", function()
    local dir = H.temp_dir()
    local cases = {}
    for _, path in ipairs(corpus_files(CORPUS .. "/nvcc")) do
      if not path:find("_G%.ptx$") and not path:find("lineinfo") then   -- debug info carries PTX line numbers
        local text = ptxparse.read_file(path)
        local canon = ptxparse.parse(text, path):canonical()
        assert.are.equal(canon, ptxparse.parse(canon, path):canonical(), path)
        local n = #cases + 1
        cases[n] = { path = path, arch = text:match("%.target%s+([%w_]+)"), canon = dir .. "/" .. n .. ".ptx" }
        H.write(cases[n].canon, canon)
      end
    end
    assert.is_true(#cases >= 10, "only " .. #cases .. " nvcc files")
    H.need_ptxas()
    for _, c in ipairs(cases) do   -- H.cubin: each text assembled once, also across spec files
      local a, log_a = H.cubin(ptxparse.read_file(c.path), c.arch)
      local b, log_b = H.cubin(H.read(c.canon), c.arch)
      assert(a, c.path .. ": " .. tostring(log_a))
      assert(b, c.path .. " (canonical): " .. tostring(log_b))
      assert.are.equal(a, b, c.path)
    end
  end)
end)

describe("ptx.raw", function()
  local pyptx = require "pyptx"
  local reg, ptx, T, Tile = pyptx.reg, pyptx.ptx, pyptx.types, pyptx.Tile

  --- The PTX of a one-tensor kernel whose body is fn.
  local function ptx_of(fn)
    local k = pyptx.kernel "raw_k" { arch = "sm_90a", in_specs = { Tile(64, T.f32) }, fn }
    k.line_info = false
    return k:ptx()
  end

  it("appends pasted PTX, validated, next to traced instructions", function()
    local text = ptx_of(function()
      local x = reg.scalar(T.u32)
      ptx.inst.mov.u32(x, 5)
      ptx.raw([[
        .reg .pred done;
        add.u32 %{x}, %{x}, 0x10;   // pasted
        setp.eq.u32 done, %{x}, 21;
      again:
        @!done bra.uni again;
      ]], { x = x })
      ptx.ret()
    end)
    assert.matches("\t.reg .pred \tdone;\n\tadd.u32 \t%r1, %r1, 16;\n\tsetp.eq.u32 \tdone, %r1, 21;\nagain:\n\t@!done bra.uni \tagain;\n", text, 1, true)
  end)

  it("resolves each name to the latest register of that name, in a kernel of thousands", function()
    -- the function's own name lookup (src/lpx_lookup.c), kept up to date as
    -- registers are made between calls: numbered ones of every class, named
    -- ones, ranges, and names a ptx.raw declared (the latest one wins)
    local text = ptx_of(function()
      reg.array(T.u32, 3000)
      reg.named(T.b32, "acc")
      reg.range(T.f32, "%q", 3)
      reg.array(T.f32, 9); reg.array(T.pred, 2); reg.array(T.u64, 4); reg.array(T.u16, 2)
      ptx.raw("add.u32 %r3000, %r1, acc; mov.f32 %f9, %q2; @%p2 add.u64 %rd4, %rd1, 1; mov.u16 %rs2, %rs1;")
      ptx.raw(".reg .b32 acc; .reg .b32 %t<3>; mov.b32 acc, %t2;")
      reg.scalar(T.u32)
      ptx.raw("add.u32 %r3001, acc, %t1;")
    end)
    assert.matches("\tadd.u32 \t%r3000, %r1, acc;\n\tmov.f32 \t%f9, %q2;\n\t@%p2 add.u64 \t%rd4, %rd1, 1;\n" ..
      "\tmov.u16 \t%rs2, %rs1;\n\t.reg .b32 \tacc;\n\t.reg .b32 \t%t<3>;\n\tmov.b32 \tacc, %t2;\n" ..
      "\tadd.u32 \t%r3001, acc, %t1;\n", text, 1, true)
    for _, name in ipairs { "%r0", "%r01", "%r3002", "%f10", "%rd5", "%x1" } do
      local ok, err = pcall(ptx_of, function()
        reg.array(T.u32, 3001); reg.array(T.f32, 9); reg.array(T.u64, 4)
        ptx.raw("mov.u32 " .. name .. ", 1;")
      end)
      assert.is_false(ok, name)
      assert.matches("ptx.raw:1:1: mov.u32: operand 1 must be a destination register", err, 1, true)
    end
  end)

  it("adds module-level declarations with ptx.raw_module", function()
    local text = ptx_of(function()
      ptx.raw_module(".global .align 4 .u32 table[4] = {1, 2, 3, 4};")
      local x = reg.scalar(T.u32)
      ptx.raw("ld.global.u32 %{x}, [table+8];", { x = x })
    end)
    assert.matches("\n.global .align 4 .u32 table[4] = {1, 2, 3, 4};\n", text, 1, true)
    assert.matches("\tld.global.u32 \t%r1, [table+8];\n", text, 1, true)
    local ok, err = pcall(ptx_of, function() ptx.raw_module(".func f() { ret; }") end)
    assert.is_false(ok)
    assert.matches("ptx.raw_module:1:11: function definitions cannot be added", err, 1, true)
  end)

  it("reports errors at the Lua line and the position in the text", function()
    local ok, err = pcall(ptx_of, function()
      local x = reg.scalar(T.u32)
      ptx.raw("add.u32 %{x}, %{x}, 1.5;", { x = x })
    end)
    assert.is_false(ok)
    assert.matches("parse_spec.lua:%d+: ptx.raw:1:1: add.u32: operand 3", err)
    ok, err = pcall(ptx_of, function() ptx.raw("mov.u32 %r1 1;") end)
    assert.is_false(ok)
    assert.matches("ptx.raw:1:12: expected ','", err, 1, true)
  end)
end)

describe("deeply nested PTX", function()
  local pyptx = require "pyptx"
  local reg, ptx, T = pyptx.reg, pyptx.ptx, pyptx.types
  local HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"
  local DEEP = "constant expression nested deeper than 256 levels (parentheses and ?: branches)"

  after_each(H.cleanup)

  --- A one-entry module whose body holds instruction line inst (line 7).
  local function entry(inst)
    return HEAD .. ".visible .entry k()\n{\n.reg .b32 %r<4>;\n" .. inst .. "\nret;\n}\n"
  end

  --- A 10 KB operand: 5,000 nested parentheses (this crashed with SIGSEGV).
  local PARENS = entry("add.s32 %r1, %r2, " .. ("("):rep(5000) .. "1" .. (")"):rep(5000) .. ";")

  --- Run luaptx on a file holding text; its merged output and exit status.
  local function cli(cmd, text, ...)
    local path = H.temp_file(text, ".ptx")
    local out, _, status = H.luaptx({ cmd, path, ... }, { merge = true })
    return out, status, path
  end

  it("refuses 5,000 nested parentheses in an operand with the limit and position (fmt, transpile, load_ptx)", function()
    for _, cmd in ipairs { "fmt", "transpile" } do
      local out, status, path = cli(cmd, PARENS)
      assert.are.equal(1, status, out)
      assert.matches(path .. ":7:275: " .. DEEP, out, 1, true)
    end
    local ok, err = pcall(pyptx.load_ptx, PARENS, "deep.ptx")
    assert.is_false(ok)
    assert.are.equal("deep.ptx:7:275: " .. DEEP, err)
  end)

  it("refuses nested parentheses and ?: in initializers, and accepts 256 levels", function()
    local out, status = cli("fmt", HEAD .. ".global .u32 g[1] = {" .. ("("):rep(5000) .. "1" .. (")"):rep(5000) .. "};\n")
    assert.are.equal(1, status, out)
    assert.matches(":4:278: " .. DEEP, out, 1, true)
    out, status = cli("transpile", HEAD .. ".global .u32 g[1] = {" .. ("1?"):rep(5000) .. "1" .. (":1"):rep(5000) .. "};\n")
    assert.are.equal(1, status, out)
    assert.matches(DEEP, out, 1, true)
    out, status = cli("fmt", entry("add.s32 %r1, %r2, " .. ("("):rep(256) .. "5" .. (")"):rep(256) .. ";"), "--canonical")
    assert.are.equal(0, status, out)
    assert.matches("add.s32 \t%r1, %r2, 5;", out, 1, true)
  end)

  it("folds any number of prefix operators and chained ?: without recursion", function()
    local out, status = cli("fmt", entry("add.s32 %r1, %r2, " .. ("-"):rep(200000) .. "3;"), "--canonical")
    assert.are.equal(0, status, out)
    assert.matches("add.s32 \t%r1, %r2, 3;", out, 1, true)
    out, status = cli("fmt", entry("add.s32 %r1, %r2, " .. ("~"):rep(100001) .. "3;"), "--canonical")
    assert.are.equal(0, status, out)
    assert.matches("add.s32 \t%r1, %r2, -4;", out, 1, true)
    out, status = cli("transpile", entry("add.s32 %r1, %r2, " .. ("0 ? 1 : "):rep(100000) .. "7;"))
    assert.are.equal(0, status, out)
    assert.matches('ptx.inst("add.s32", r[1], r[2], 7LL)', out, 1, true)
  end)

  it("refuses operand lists and blocks nested past their limits", function()
    local out, status = cli("fmt", entry("mov.b32 %r1, " .. ("{"):rep(5000) .. "%r2" .. ("}"):rep(5000) .. ";"))
    assert.are.equal(1, status, out)
    assert.matches(":7:78: operands nested more than 64 deep", out, 1, true)
    out, status = cli("transpile", HEAD .. ".visible .entry k()\n{\n" .. ("{\n"):rep(20000) .. ("}\n"):rep(20000) .. "}\n")
    assert.are.equal(1, status, out)
    assert.matches(":10007:1: blocks { } nested deeper than 10000 levels", out, 1, true)
  end)

  it("parses 400,000 nested initializer braces in linear time", function()
    local text = HEAD .. ".global .u32 g[1] = " .. ("{"):rep(400000) .. "7" .. ("}"):rep(400000) .. ";\n"
    local t0 = os.clock()
    local out, status = cli("fmt", text)
    assert.are.equal(0, status, out:sub(1, 200))
    assert.are.equal(text, out)
    local m = require("pyptx.ptxparse").parse(text, "braces.ptx")
    assert.are.equal(text, m:lossless())
    assert.is_true(os.clock() - t0 < 5, "took " .. os.clock() - t0 .. " s")   -- was 88 s (quadratic)
  end)

  it("gives ptx.raw and ptx.raw_module the same limits, positioned in the text", function()
    --- The error of tracing a kernel whose body is fn.
    local function fails(fn)
      local ok, err = pcall(function() return pyptx.kernel "deep" { arch = "sm_80", fn }:ptx() end)
      assert.is_false(ok)
      return err
    end
    local err = fails(function()
      local x = reg.scalar(T.u32)
      ptx.raw("add.u32 %{x}, %{x}, " .. ("("):rep(5000) .. "1" .. (")"):rep(5000) .. ";", { x = x })
    end)
    assert.matches("parse_spec.lua:%d+: ptx.raw:1:275: " .. DEEP:gsub("%p", "%%%0"), err)
    err = fails(function() ptx.raw_module(".global .u32 g[1] = {" .. ("("):rep(5000) .. "1" .. (")"):rep(5000) .. "};") end)
    assert.matches("ptx.raw_module:1:278: " .. DEEP, err, 1, true)
    err = fails(function() ptx.raw(("{\n"):rep(20000) .. ("}\n"):rep(20000)) end)
    assert.matches("ptx.raw:10002:1: blocks { } nested deeper than 10000 levels", err, 1, true)
    local text = pyptx.kernel "deep" { arch = "sm_80", function()
      local x = reg.scalar(T.u32)
      ptx.inst.mov.u32(x, 0)
      ptx.raw("add.u32 %{x}, %{x}, " .. ("-"):rep(100000) .. "9;", { x = x })
      ptx.raw_module(".global .u32 g[1] = " .. ("{"):rep(100000) .. "1" .. ("}"):rep(100000) .. ";")
    end }:ptx()
    assert.matches("add.u32 \t%r1, %r1, 9;", text, 1, true)
  end)
end)
