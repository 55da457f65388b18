# The sources of coil's readers of outside data, and what they need: the .pt2 reader (zip, export
# JSON, nodes bound through the schemas with their outputs inferred), the graph text parser and
# printer, the tensor files (.safetensors, .npy), and the package format (the manifest and its
# checks; build/cache.cc for the content hash). The sanitizer builds of the readers compile
# these again on their own (tests/CMakeLists.txt: pt2_mutations; tests/fuzz: the libFuzzer
# targets), not the whole compiler.
set(COIL_READER_SOURCES
  frontend/pt2.cc frontend/export_nodes.cc frontend/export_decompose.cc frontend/export_layout.cc frontend/sympy_expr.cc frontend/zip_reader.cc
  graph/schema.cc graph/ops.cc graph/graph.cc graph/infer.cc graph/infer_elementwise.cc graph/infer_shape_ops.cc
  graph/infer_indexing.cc graph/infer_reduce.cc graph/infer_torch_call.cc graph/pooling.cc graph/verify.cc graph/printer.cc graph/lexer.cc
  graph/parser.cc
  tensor/dtype.cc tensor/tensor.cc tensor/safetensors.cc tensor/npy.cc
  support/error.cc support/half.cc arith/sym.cc arith/simplify.cc arith/bounds.cc
  driver/package_format.cc build/cache.cc)
get_filename_component(coil_src_dir ${CMAKE_CURRENT_LIST_DIR}/../src ABSOLUTE)
list(TRANSFORM COIL_READER_SOURCES PREPEND ${coil_src_dir}/)
