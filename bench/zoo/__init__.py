"""The model zoo: real models (torchvision, timm, transformers) built from their configs with
random weights, run through PyTorch eager, Inductor and coil. `python -m bench.zoo.run --help`."""
