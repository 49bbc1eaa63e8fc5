std = "luajit"
max_line_length = 160
files["spec/**/*_spec.lua"] = { std = "+busted" }
files["spec/fails/*.lua"] = { std = "+busted" }
exclude_files = { "build", "build-*" }
