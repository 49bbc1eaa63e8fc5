--- luaptx transpile against ptxas on the corpus's large files
-- (spec/fixtures/ptx/large/: a 1 MB unrolled GEMM, seconds of ptxas per
-- text): each assembles transpiled, plain and sugared, to the same cubin
-- as the input. Its own file so that ctest runs it beside the rest.
local T = require "spec.transpile_common"
local H = require "spec.helpers"

describe("luaptx transpile against ptxas, large files", function()
  local large = #H.find(T.CORPUS .. "/large", "%.ptx$")

  it("assembles every large corpus file to the same cubin", function()
    assert.is_true(large >= 1)
    assert.equal(large, T.assembles(false, "large/"))
  end)

  it("sugared, assembles to the same cubins too", function()
    assert.equal(large, T.assembles(true, "large/"))
  end)
end)
