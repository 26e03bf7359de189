# Writes the text file IN into the C header OUT as
#   static const char *const NAME[] = {"line 1\n", "line 2\n", ..., NULL};
# (one string per line: ISO C limits the length of one string literal). Used for the
# runtime that `distdpd export --format c` copies into the code it generates.
file(READ "${IN}" content)
string(REPLACE "\\" "\\\\" content "${content}")
string(REPLACE "\"" "\\\"" content "${content}")
string(REPLACE "\n" "\\n\",\n  \"" content "${content}")
file(WRITE "${OUT}" "/* generated from ${IN} by cmake/embed_text.cmake: do not edit */\nstatic const char *const ${NAME}[] = {\n  \"${content}\",\n  0};\n")
