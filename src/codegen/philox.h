// Counter-based random numbers for philox_random (dropout, rand, randn in compiled graphs):
// Philox4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2, 3",
// SC'11), the generator PyTorch's CUDA kernels and Inductor use, written here. One value is a
// pure function of (seed, index, stream), so every kernel that inlines it (a mask recomputed in
// a consumer) computes the same bits, on the CPU, on CUDA and in the reference evaluator, which
// includes this file with COIL_FN defined as inline; generated code gets it with the special
// helpers. Plain 32/64-bit integer arithmetic only, so the three agree bit for bit.

// A uniform double in [0, 1) on the 2^-53 grid: the top 53 bits of the first two words of
// Philox4x32-10 with counter (index, stream) and key seed.
COIL_FN double philox_uniform(long long seed, long long index, long long stream) {
  unsigned int c0 = static_cast<unsigned int>(static_cast<unsigned long long>(index));
  unsigned int c1 = static_cast<unsigned int>(static_cast<unsigned long long>(index) >> 32);
  unsigned int c2 = static_cast<unsigned int>(static_cast<unsigned long long>(stream));
  unsigned int c3 = static_cast<unsigned int>(static_cast<unsigned long long>(stream) >> 32);
  unsigned int k0 = static_cast<unsigned int>(static_cast<unsigned long long>(seed));
  unsigned int k1 = static_cast<unsigned int>(static_cast<unsigned long long>(seed) >> 32);
  for (int round = 0; round < 10; ++round) {
    const unsigned long long p0 = 0xD2511F53ull * c0, p1 = 0xCD9E8D57ull * c2;
    const unsigned int hi0 = static_cast<unsigned int>(p0 >> 32), lo0 = static_cast<unsigned int>(p0);
    const unsigned int hi1 = static_cast<unsigned int>(p1 >> 32), lo1 = static_cast<unsigned int>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;  // the key schedule's Weyl constants
    k1 += 0xBB67AE85u;
  }
  const unsigned long long bits = ((static_cast<unsigned long long>(c0) << 32) | c1) >> 11;
  return static_cast<double>(bits) * (1.0 / 9007199254740992.0);  // 2^-53
}
