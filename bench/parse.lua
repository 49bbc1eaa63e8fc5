--- PTX parser throughput: parse, lossless print and canonical print in
-- MB/s over the whole corpus (spec/fixtures/ptx) and over its largest file
-- (an unrolled SGEMM, > 1 MB). One core, median of repeats.
-- parse: parse + free in a loop, as in a process parsing many files. The
-- time is CPU time (os.clock) around the parse call alone, so it includes
-- the kernel's time faulting in fresh pages: whether the memory freed by
-- one pass is still mapped for the next is up to the allocator (glibc
-- gives a large free heap top back to the system), so the figure can move
-- with the heap's layout, not only with the parser's work.
-- parse(mixed): the parse timed inside the parse -> lossless -> canonical
-- -> free loop, where fresh pages for the printed text make the next parse
-- fault its memory in again.
-- fmt, whole process: `luaptx fmt big.ptx -o out.ptx` as a child process
-- on files of about 38 MB, in a temporary directory: one function (the
-- largest file's unrolled main loop again and again inside its kernel,
-- its label renamed per copy), then many (the corpus again and again, its
-- functions renamed per copy); wall clock, median of repeats (and the
-- range), start-up and exit included. Peak memory: `/usr/bin/time -v
-- luaptx fmt big.ptx -o out.ptx` (docs/performance.md; a child's getrusage
-- peak counts the bench's own pages it forked with).
-- usage: luaptx bench/parse.lua [repeats]
local common = require "bench.common"
local median, now = common.median, common.now
local sys = require "pyptx.core.sys"
local ffi = require "ffi"
local core = require "pyptx.core"
local ptxparse = require "pyptx.ptxparse"
local lfs = require "lfs"

local repeats = tonumber(arg and arg[1]) or 15
local clock = os.clock

--- Every .ptx file of the corpus with its text.
local function load_corpus()
  local files = {}
  local function walk(dir)
    for name in lfs.dir(dir) do
      local path = dir .. "/" .. name
      local mode = name:sub(1, 1) ~= "." and lfs.symlinkattributes(path, "mode")
      if mode == "directory" then walk(path)
      elseif mode == "file" and name:match("%.ptx$") then files[#files + 1] = { path = path, text = ptxparse.read_file(path) } end
    end
  end
  walk("spec/fixtures/ptx")
  table.sort(files, function(a, b) return a.path < b.path end)
  return files
end

local out_text, out_len = ffi.new("const char *[1]"), ffi.new("size_t[1]")

--- Seconds for one pass over files: parse, lossless, canonical (each timed apart).
local function one_pass(files)
  local t_parse, t_lossless, t_canon = 0, 0, 0
  for _, f in ipairs(files) do
    local t0 = clock()
    local m = core.parse(core.ctx, f.text, #f.text, f.path)
    local t1 = clock()
    assert(m ~= nil, core.error_message())
    assert(core.fmt_lossless(m, out_text, out_len) == 0)
    local t2 = clock()
    assert(core.fmt_canonical(m, out_text, out_len) == 0)
    local t3 = clock()
    core.module_free(m)
    t_parse, t_lossless, t_canon = t_parse + (t1 - t0), t_lossless + (t2 - t1), t_canon + (t3 - t2)
  end
  return t_parse, t_lossless, t_canon
end

--- Seconds for one pass that only parses (and frees) each file: the
-- steady state of a process parsing many files, allocator memory reused.
local function parse_pass(files)
  local t = 0
  for _, f in ipairs(files) do
    local t0 = clock()
    local m = core.parse(core.ctx, f.text, #f.text, f.path)
    t = t + (clock() - t0)
    core.module_free(m)
  end
  return t
end

--- Median MB/s of each phase over repeats.
local function measure(files)
  local bytes = 0
  for _, f in ipairs(files) do bytes = bytes + #f.text end
  local p, l, c, rt, alone = {}, {}, {}, {}, {}
  one_pass(files)   -- warm-up
  for i = 1, repeats do
    local _
    _, l[i], c[i] = one_pass(files)
    p[i] = select(1, one_pass(files))
    rt[i] = p[i] + l[i]
  end
  parse_pass(files)
  for i = 1, repeats do alone[i] = parse_pass(files) end
  local mb = bytes / 1e6
  return { bytes = bytes, parse = mb / median(alone), parse_mixed = mb / median(p), lossless = mb / median(l),
           canonical = mb / median(c), roundtrip = mb / median(rt) }
end

local corpus = load_corpus()
local largest = corpus[1]
for _, f in ipairs(corpus) do if #f.text > #largest.text then largest = f end end

print(("PTX parser throughput (median of %d, one core, %s)"):format(repeats, jit.version))
print(("%-30s %5s %8s %10s %12s %10s %12s %10s"):format("input", "files", "bytes", "parse", "parse(mixed)",
  "lossless", "parse+print", "canonical"))
local rows = {
  { "corpus (spec/fixtures/ptx)", corpus },
  { largest.path:match("[^/]+$"), { largest } },
}
for _, row in ipairs(rows) do
  local r = measure(row[2])
  print(("%-30s %5d %8d %5.1f MB/s %7.1f MB/s %5.1f MB/s %7.1f MB/s %5.1f MB/s"):format(row[1], #row[2], r.bytes,
    r.parse, r.parse_mixed, r.lossless, r.roundtrip, r.canonical))
end

--- A text's functions renamed with a suffix (a copy that redefines none).
local function renamed(text, suffix)
  local names = {}
  for name in text:gmatch("%.entry%s+([%w_$]+)") do names[name] = true end
  for name in text:gmatch("%.func%s+([%w_$]+)") do names[name] = true end
  for name in text:gmatch("%.func%s*%b()%s*([%w_$]+)") do names[name] = true end
  for name in pairs(names) do
    text = text:gsub("%f[%w_$]" .. name:gsub("%$", "%%$") .. "%f[^%w_$]", name .. suffix)
  end
  return text
end

--- About `bytes` of PTX: the corpus, copy after renamed copy.
local function big_text(files, bytes)
  local parts, n, copy = {}, 0, 0
  while n < bytes do
    copy = copy + 1
    for _, f in ipairs(files) do
      parts[#parts + 1] = renamed(f.text, "_c" .. copy)
      n = n + #parts[#parts]
    end
  end
  return table.concat(parts)
end

--- Median, fastest and slowest seconds of `luaptx fmt in -o out` in a
-- child process.
local function fmt_process(bin, input, output)
  local xs = {}
  for r = 1, repeats do
    local t0 = now()
    local res = sys.run { bin, "fmt", input, "-o", output }
    xs[r] = now() - t0
    assert(res and res.status == 0, "luaptx fmt failed: " .. (res and res.stderr or ""))
  end
  return median(xs), math.min(unpack(xs)), math.max(unpack(xs))
end

--- About `bytes` of PTX in one function: text's kernel with the body from
-- its first label through the last branch back to it again and again
-- (an unrolled loop), the label renamed per copy.
local function one_function_text(text, bytes)
  local label = text:match("\n(%$[%w_]+):\n")
  local s = text:find("\n" .. label:gsub("%$", "%%$") .. ":\n", 1) + 1
  local e = s
  for at in text:gmatch("bra[%.%w]*%s+" .. label:gsub("%$", "%%$") .. ";\n()") do e = at end
  local head, body, tail = text:sub(1, s - 1), text:sub(s, e - 1), text:sub(e)
  local parts, n, copy = { head }, #head + #tail, 0
  while n < bytes do
    copy = copy + 1
    parts[#parts + 1] = body:gsub(label:gsub("%$", "%%$") .. "%f[^%w_$]", label .. "_c" .. copy)
    n = n + #parts[#parts]
  end
  parts[#parts + 1] = tail
  return table.concat(parts)
end

local bin = os.getenv("LUAPTX_BIN") or (arg and arg[-1]) or "build/luaptx"
local dir = sys.temp_dir()
local ok, err = pcall(function()
  print()
  for _, case in ipairs { { "one function", one_function_text(largest.text, 38e6) }, { "many functions", big_text(corpus, 38e6) } } do
    local text = case[2]
    local input, output = dir .. "/big.ptx", dir .. "/out.ptx"
    sys.write_file(input, text)
    local t, fastest, slowest = fmt_process(bin, input, output)
    assert(ptxparse.read_file(output) == text, "luaptx fmt did not print the file back byte for byte")
    local mbs = function(x) return #text / 1e6 / x end
    print(("luaptx fmt, whole process, %s (median of %d): %d bytes in %.3f s, %.1f MB/s (%.1f-%.1f)"):format(case[1],
      repeats, #text, t, mbs(t), mbs(slowest), mbs(fastest)))
  end
end)
sys.remove_tree(dir)
if not ok then error(err, 0) end
