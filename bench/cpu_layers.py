"""Single layers on the CPU, PyTorch eager against torch.compile(backend="coil"), in f32, bf16 and
f16: a Linear (64x1024 -> 2816), a 3x3 convolution (8x64x56x56, NCHW and channels-last) and a
3x3 depthwise convolution (8x240x56x56). Wall clock, best of 7 calls after a warm-up, in one
process; prints a markdown table (the numbers go to bench/results/ by hand, with the machine).

    .venv/bin/python -m bench.cpu_layers
"""
import time

import torch
import torch.nn.functional as F

import coil


def best_ms(fn, *args, repeats=7):
    fn(*args)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def cases(dtype):
    g = torch.Generator().manual_seed(0)

    def r(*shape):
        return torch.randn(*shape, generator=g).to(dtype)

    x, w = r(8, 64, 56, 56), r(64, 64, 3, 3)
    d, dw = r(8, 240, 56, 56), r(240, 1, 3, 3)
    return [
        ("linear 64x1024 -> 2816", lambda a, b: F.linear(a, b), (r(64, 1024), r(2816, 1024))),
        ("conv 3x3 8x64x56x56", lambda a, b: F.conv2d(a, b, padding=1), (x, w)),
        ("conv 3x3 channels-last", lambda a, b: F.conv2d(a, b, padding=1), (x.to(memory_format=torch.channels_last), w)),
        ("depthwise 3x3 8x240x56x56", lambda a, b: F.conv2d(a, b, padding=1, groups=240), (d, dw)),
    ]


def main():
    coil.register()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads\n")
    print("| layer | dtype | eager ms | coil ms | speedup |\n|---|---|---|---|---|")
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for name, fn, args in cases(dtype):
            torch._dynamo.reset()
            with torch.no_grad():
                compiled = torch.compile(fn, backend="coil")
                compiled(*args)
                eager, ours = best_ms(fn, *args), best_ms(compiled, *args)
            print(f"| {name} | {str(dtype).split('.')[1]} | {eager:.2f} | {ours:.2f} | {eager / ours:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
