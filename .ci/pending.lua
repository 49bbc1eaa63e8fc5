--- Runs the busted specs (TAP output) and checks the run is honest: no
-- failure, and every pending test carries one of the known reasons (the
-- CUDA toolkit or nvdisasm, a GPU, root, a pty or (as root) mknod missing, or an emulator
-- check a mutant test waits for). Prints the
-- counts per reason.
-- usage: build/luaptx .ci/pending.lua   (from the repository root; the
-- environment, e.g. CUDA_HOME=/nonexistent PATH=/usr/bin:/bin, is passed on)
local sys = require "pyptx.core.sys"

--- Why a test may be pending: a label and a text its message contains.
local KNOWN = {
  { "ptxas missing", "ptxas not found: install the CUDA toolkit" },
  { "toolkit program missing", " not found: install the CUDA toolkit, or point CUDA_HOME at it" },
  { "nvdisasm missing", " not found: the CUDA 13 toolkit does not ship it; install its Python wheel" },
  { "no PTX compiler", "no PTX compiler: neither libnvJitLink nor ptxas was found" },
  { "no GPU", "needs a GPU: " },
  { "not root", "needs root to " },
  { "no pseudo-terminal", "needs a pseudo-terminal: " },
  -- as root, spec/outputs_spec.lua aims writers at a private /dev/full node, never the machine's
  { "no mknod as root", "as root, needs a private /dev/full (mknod): " },
}

--- The label of the known reason a pending message gives, or nil.
local function reason_of(message)
  for _, k in ipairs(KNOWN) do
    if message:find(k[2], 1, true) then return k[1] end
  end
  return nil
end

--- Tally busted's TAP output: { ok, skipped, pending = { label = n }, unexplained = {...}, failed = {...} }.
local function tally(tap)
  local t = { ok = 0, skipped = 0, pending = {}, unexplained = {}, failed = {} }
  local file, name = "?", "?"
  for line in tap:gmatch("[^\n]+") do
    local f, n = line:match("^# ([^ ]+) @ %d+: (.*)$")
    if f then file, name = f, n end
    local skip = line:match("^ok %d+ %- # SKIP (.*)$")
    if skip then
      t.skipped = t.skipped + 1
      local label = reason_of(skip)
      if label then t.pending[label] = (t.pending[label] or 0) + 1
      else t.unexplained[#t.unexplained + 1] = file .. ": " .. name .. ": " .. skip end
    elseif line:match("^ok %d+ ") then
      t.ok = t.ok + 1
    elseif line:match("^not ok %d+ ") then
      t.failed[#t.failed + 1] = file .. ": " .. name
    end
  end
  return t
end

local bin = os.getenv("LUAPTX_BIN") or "build/luaptx"
local res = assert(sys.run({ bin, "/usr/bin/busted", "-o", "TAP", "spec" },
  { env = { LUAPTX_BIN = bin, LUAPTX_CACHE_DIR = os.getenv("LUAPTX_CACHE_DIR") or "build/test-cache" } }))
local t = tally(res.stdout)
print(("specs: %d passed, %d pending, %d failed"):format(t.ok, t.skipped, #t.failed))
for _, k in ipairs(KNOWN) do
  if t.pending[k[1]] then print(("  pending, %s: %d"):format(k[1], t.pending[k[1]])) end
end
local bad = false
for _, u in ipairs(t.unexplained) do print("  pending for an unknown reason: " .. u) bad = true end
for _, f in ipairs(t.failed) do print("  FAILED: " .. f) bad = true end
if t.ok + t.skipped == 0 then print("  no test ran:\n" .. res.stdout .. res.stderr) bad = true end
os.exit(bad and 1 or 0)
