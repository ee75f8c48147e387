package dev.edgecount.bench;

import java.io.Serializable;
import org.ehcache.Cache;
import org.ehcache.CacheManager;
import org.ehcache.config.builders.CacheConfigurationBuilder;
import org.ehcache.config.builders.CacheManagerBuilder;
import org.ehcache.config.builders.ExpiryPolicyBuilder;
import org.ehcache.config.builders.ResourcePoolsBuilder;

/**
 * The data: N on-heap Ehcache caches of counters and N of cache entries, with a key's cache
 * chosen by jump consistent hash. Every operation is lock-free on top of Ehcache's atomic
 * {@code putIfAbsent} / {@code replace(k, old, new)} / {@code remove(k, old)}.
 */
public final class CounterStore implements AutoCloseable {

    /** An opaque cached value and the Content-Type it was stored with. */
    public record Entry(byte[] bytes, String contentType) implements Serializable {}

    private final CacheManager manager;
    private final Cache<String, Long>[] counters;
    private final Cache<String, Entry>[] entries;

    @SuppressWarnings("unchecked")
    public CounterStore(int caches, long counterEntriesPerCache, long cacheEntriesPerCache) {
        if (caches <= 0) {
            throw new IllegalArgumentException("caches must be positive: " + caches);
        }
        manager = CacheManagerBuilder.newCacheManagerBuilder().build(true);
        counters = new Cache[caches];
        entries = new Cache[caches];
        for (int i = 0; i < caches; i++) {
            counters[i] = manager.createCache("counters-" + i,
                    CacheConfigurationBuilder.newCacheConfigurationBuilder(String.class, Long.class,
                                    ResourcePoolsBuilder.heap(counterEntriesPerCache))
                            .withExpiry(ExpiryPolicyBuilder.noExpiration())
                            .build());
            entries[i] = manager.createCache("entries-" + i,
                    CacheConfigurationBuilder.newCacheConfigurationBuilder(String.class, Entry.class,
                                    ResourcePoolsBuilder.heap(cacheEntriesPerCache))
                            .withExpiry(ExpiryPolicyBuilder.noExpiration())
                            .build());
        }
    }

    public int caches() {
        return counters.length;
    }

    /** The key the caches are indexed by: {@code ns + "\0" + key}. */
    public static String compositeKey(String ns, String key) {
        return ns + '\0' + key;
    }

    /** Which of the N caches owns a composite key. */
    public int cacheIndex(String compositeKey) {
        return JumpHash.bucket(JumpHash.hash64(compositeKey), counters.length);
    }

    private Cache<String, Long> counterCache(String ck) {
        return counters[cacheIndex(ck)];
    }

    private Cache<String, Entry> entryCache(String ck) {
        return entries[cacheIndex(ck)];
    }

    // ---- counters -------------------------------------------------------------------------

    /** The counter's value, or null when it was never written (or was deleted). */
    public Long get(String ck) {
        return counterCache(ck).get(ck);
    }

    /**
     * Adds {@code by} (or subtracts it when {@code subtract}) by compare-and-set and returns the
     * new value.
     *
     * @throws ArithmeticException when the result does not fit in a signed 64-bit integer; the
     *     counter is left unchanged
     */
    public long add(String ck, long by, boolean subtract) {
        Cache<String, Long> cache = counterCache(ck);
        while (true) {
            Long old = cache.get(ck);
            if (old == null) {
                long fresh = subtract ? Math.negateExact(by) : by;
                if (cache.putIfAbsent(ck, fresh) == null) {
                    return fresh;
                }
                continue; // somebody created it meanwhile: retry against their value
            }
            long next = subtract ? Math.subtractExact(old, by) : Math.addExact(old, by);
            if (cache.replace(ck, old, next)) {
                return next;
            }
        }
    }

    public void set(String ck, long value) {
        counterCache(ck).put(ck, value);
    }

    /** Removes the counter; true when there was one. */
    public boolean delete(String ck) {
        Cache<String, Long> cache = counterCache(ck);
        while (true) {
            Long old = cache.get(ck);
            if (old == null) {
                return false;
            }
            if (cache.remove(ck, old)) {
                return true;
            }
        }
    }

    // ---- cache entries --------------------------------------------------------------------

    public Entry cacheGet(String ck) {
        return entryCache(ck).get(ck);
    }

    public void cachePut(String ck, Entry entry) {
        entryCache(ck).put(ck, entry);
    }

    public boolean cacheDelete(String ck) {
        Cache<String, Entry> cache = entryCache(ck);
        while (true) {
            Entry old = cache.get(ck);
            if (old == null) {
                return false;
            }
            if (cache.remove(ck, old)) {
                return true;
            }
        }
    }

    @Override
    public void close() {
        manager.close();
    }
}
