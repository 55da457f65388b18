// Tensors in and out: .safetensors (the format PyTorch and Hugging Face users have) and .npy.
// Readers validate everything they read and throw coil::Error naming the file and the problem;
// writers write a temporary file and rename it, so a failure never leaves a partial file.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "coil/tensor.h"

namespace coil {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Tensors by name, in the order they appear in the file.
NamedTensors read_safetensors(const std::string& path);
NamedTensors parse_safetensors(const std::string& bytes, const std::string& what);
void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {});
// The bytes write_safetensors writes; `path` names the destination in errors.
std::string safetensors_bytes(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata = {},
                              const std::string& path = "<memory>");

Tensor read_npy(const std::string& path);
Tensor parse_npy(const std::string& bytes, const std::string& what);
void write_npy(const std::string& path, const Tensor& tensor);

// Writes `bytes` to `path` through a temporary file in the same folder and a rename.
void write_file_atomic(const std::string& path, const std::string& bytes);
std::string read_file(const std::string& path);

}  // namespace coil
