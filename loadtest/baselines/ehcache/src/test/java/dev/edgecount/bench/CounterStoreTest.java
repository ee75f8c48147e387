package dev.edgecount.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;

class CounterStoreTest {

    @Test
    void incrementsByCompareAndSet() throws Exception {
        try (CounterStore store = new CounterStore(4, 10_000, 1_000)) {
            String ck = CounterStore.compositeKey("pages", "home");
            assertNull(store.get(ck));
            assertEquals(1, store.add(ck, 1, false));
            assertEquals(11, store.add(ck, 10, false));
            assertEquals(9, store.add(ck, 2, true));

            int threads = 4;
            int perThread = 5_000;
            String hot = CounterStore.compositeKey("likes", "hot");
            ConcurrentHashMap<Long, Boolean> seen = new ConcurrentHashMap<>();
            ExecutorService pool = Executors.newFixedThreadPool(threads);
            List<Future<?>> done = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                done.add(pool.submit(() -> {
                    for (int i = 0; i < perThread; i++) {
                        assertNull(seen.put(store.add(hot, 1, false), true)); // each value once
                    }
                }));
            }
            for (Future<?> f : done) {
                f.get();
            }
            pool.shutdown();
            assertEquals(threads * perThread, store.get(hot));
        }
    }

    @Test
    void overflowLeavesTheCounterUnchanged() {
        try (CounterStore store = new CounterStore(2, 1_000, 1_000)) {
            String ck = CounterStore.compositeKey("n", "big");
            store.set(ck, Long.MAX_VALUE);
            assertThrows(ArithmeticException.class, () -> store.add(ck, 1, false));
            assertEquals(Long.MAX_VALUE, store.get(ck));
            String fresh = CounterStore.compositeKey("n", "fresh");
            assertThrows(ArithmeticException.class, () -> store.add(fresh, Long.MIN_VALUE, true));
            assertNull(store.get(fresh));
        }
    }

    @Test
    void deletesAndCacheEntries() {
        try (CounterStore store = new CounterStore(2, 1_000, 1_000)) {
            String ck = CounterStore.compositeKey("n", "k");
            assertFalse(store.delete(ck));
            store.set(ck, 5);
            assertTrue(store.delete(ck));
            assertNull(store.get(ck));

            store.cachePut(ck, new CounterStore.Entry(new byte[] {1, 2, 3}, "image/png"));
            CounterStore.Entry e = store.cacheGet(ck);
            assertEquals("image/png", e.contentType());
            assertEquals(3, e.bytes().length);
            assertTrue(store.cacheDelete(ck));
            assertNull(store.cacheGet(ck));
        }
    }
}
