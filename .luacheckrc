std = "luajit"
max_line_length = 160
files["spec/**/*_spec.lua"] = { std = "+busted" }
files["spec/fails/*.lua"] = { std = "+busted" }
exclude_files = { "build", "build-*", "types" }
-- The std of kernel scripts (docs/getting-started.md): they run in
-- luaptx's LuaJIT with its globals and none of their own (the DSL comes
-- from require "pyptx"), so a misspelt name or a stray global is flagged.
-- A project of kernel scripts copies stds.luaptx and sets
-- std = "luajit+luaptx".
stds.luaptx = { read_globals = { "arg" } }
files["examples/**/*.lua"] = { std = "luajit+luaptx" }
