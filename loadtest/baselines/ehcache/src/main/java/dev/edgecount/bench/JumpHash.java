package dev.edgecount.bench;

import java.nio.charset.StandardCharsets;

/**
 * Key placement: a 64-bit hash of the composite key, then jump consistent hash
 * (Lamping and Veach, "A Fast, Minimal Memory, Consistent Hash Algorithm", 2014) to pick one
 * of N caches.
 */
public final class JumpHash {
    private static final long FNV_OFFSET = 0xcbf29ce484222325L;
    private static final long FNV_PRIME = 0x100000001b3L;

    private JumpHash() {}

    /** 64-bit hash of the UTF-8 bytes of {@code s}: FNV-1a, then a murmur3-style finalizer. */
    public static long hash64(String s) {
        return hash64(s.getBytes(StandardCharsets.UTF_8));
    }

    public static long hash64(byte[] bytes) {
        long h = FNV_OFFSET;
        for (byte b : bytes) {
            h ^= (b & 0xff);
            h *= FNV_PRIME;
        }
        // Spread the bits so that keys differing in their last byte differ in the high bits
        // too (jump hash draws from the high bits of its generator).
        h ^= h >>> 33;
        h *= 0xff51afd7ed558ccdL;
        h ^= h >>> 33;
        h *= 0xc4ceb9fe1a85ec53L;
        h ^= h >>> 33;
        return h;
    }

    /** Jump consistent hash: a bucket in [0, buckets) for a 64-bit key. */
    public static int bucket(long key, int buckets) {
        if (buckets <= 0) {
            throw new IllegalArgumentException("buckets must be positive: " + buckets);
        }
        long b = -1;
        long j = 0;
        while (j < buckets) {
            b = j;
            key = key * 2862933555777941757L + 1;
            j = (long) ((b + 1) * ((double) (1L << 31) / (double) ((key >>> 33) + 1)));
        }
        return (int) b;
    }
}
