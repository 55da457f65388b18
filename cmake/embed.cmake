# Embeds a text file as a C++ string constant: cmake -DIN=file -DOUT=file.cc -DNAME=symbol -P embed.cmake
file(READ "${IN}" content)
file(WRITE "${OUT}" "// Generated from ${IN}; do not edit.\nnamespace coil::codegen {\nextern const char* const ${NAME};\nconst char* const ${NAME} = R\"coil_embed(${content})coil_embed\";\n}  // namespace coil::codegen\n")
