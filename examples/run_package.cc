// coil from a C++ program, no Python: load a compiled package and run it.
//
//   coil compile model.pt2 -o model.coilpkg [--device cuda]     # once, where the compiler is
//   run-package model.coilpkg in.safetensors [out.safetensors]  # anywhere with the same toolchain/GPU
//
// The inputs file holds one tensor per graph input, by name (the names `coil check model.pt2`
// prints); the outputs are written in graph order under the graph's output names.
#include <coil/coil.h>

#include <fmt/format.h>

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    fmt::print(stderr, "usage: {} MODEL.coilpkg INPUTS.safetensors [OUTPUTS.safetensors]\n", argv[0]);
    return 2;
  }
  try {
    coil::Package model = coil::Package::load(argv[1]);
    coil::TensorMap inputs;
    for (auto& [name, tensor] : coil::read_safetensors(argv[2])) inputs[name] = tensor;
    std::vector<coil::Tensor> outputs = model.run(inputs);

    coil::NamedTensors named;
    for (size_t i = 0; i < outputs.size(); ++i) {
      const std::string& name = model.graph().value_name(model.graph().outputs[i]);
      fmt::print("{}: {} {}\n", name, coil::dtype_name(outputs[i].dtype()), coil::shape_to_string(outputs[i].sizes()));
      named.emplace_back(name, outputs[i]);
    }
    if (argc == 4) coil::write_safetensors(argv[3], named);
    return 0;
  } catch (const coil::Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}
