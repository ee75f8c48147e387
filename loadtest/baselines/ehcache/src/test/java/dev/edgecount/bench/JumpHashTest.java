package dev.edgecount.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class JumpHashTest {

    @Test
    void bucketsAreInRangeAndStable() {
        for (long k = 0; k < 10_000; k++) {
            long key = JumpHash.hash64("ns\0key-" + k);
            int b = JumpHash.bucket(key, 16);
            assertTrue(b >= 0 && b < 16);
            assertEquals(b, JumpHash.bucket(key, 16));
        }
        assertEquals(0, JumpHash.bucket(12345L, 1));
        assertEquals(0, JumpHash.bucket(0L, 1000)); // key 0 never jumps
    }

    @Test
    void growingMovesKeysOnlyToTheNewBucket() {
        int moved = 0;
        int keys = 20_000;
        for (int k = 0; k < keys; k++) {
            long key = JumpHash.hash64("pages\0" + k);
            int before = JumpHash.bucket(key, 16);
            int after = JumpHash.bucket(key, 17);
            if (before != after) {
                assertEquals(16, after);
                moved++;
            }
        }
        // About 1/17 of the keys should move.
        assertTrue(moved > keys / 17 / 2 && moved < keys / 17 * 2, "moved " + moved);
    }

    @Test
    void spreadsKeysEvenly() {
        int[] counts = new int[16];
        int keys = 160_000;
        for (int k = 0; k < keys; k++) {
            counts[JumpHash.bucket(JumpHash.hash64("likes\0post:" + k), 16)]++;
        }
        for (int c : counts) {
            assertTrue(Math.abs(c - keys / 16) < keys / 16 / 10, "bucket holds " + c);
        }
    }
}
