"""coil's yardstick: `bench/run` (python -m bench) times coil against PyTorch eager and Inductor."""
