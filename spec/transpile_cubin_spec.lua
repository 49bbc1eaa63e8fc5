--- luaptx transpile against ptxas: every corpus file ptxas takes (but the
-- large ones: spec/transpile_large_spec.lua) assembles transpiled, plain
-- and sugared, to the same cubin as the input when that has no debug
-- information. Split from spec/transpile_spec.lua so that ctest runs the
-- ptxas comparisons beside the rest.
local T = require "spec.transpile_common"

describe("luaptx transpile against ptxas", function()
  it("assembles every corpus file ptxas takes, to the same cubin when the input has no debug information", function()
    assert.is_true(T.assembles(false) >= 29)
  end)

  it("sugared, assembles to the same cubins too", function()
    assert.is_true(T.assembles(true) >= 29)
  end)
end)
