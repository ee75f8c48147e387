package dev.edgecount.bench;

import io.undertow.Undertow;
import io.undertow.UndertowOptions;
import org.xnio.Options;

/**
 * The "Ehcache with consistent hashing" counter service that edgecount's load tests compare
 * against: N on-heap Ehcache caches, keys placed by jump consistent hash, counters incremented
 * by compare-and-set, served over HTTP by Undertow on 127.0.0.1.
 *
 * <pre>java -jar ehcache-counter.jar [--port 8792] [--caches 16] [--io-threads CORES]
 *     [--heap-entries 4000000] [--cache-heap-entries 1000000]</pre>
 */
public final class EhcacheCounterServer {
    static final String HOST = "127.0.0.1";

    private EhcacheCounterServer() {}

    public static void main(String[] args) {
        // Quiet logging (warnings and errors only) for Ehcache (slf4j) and Undertow/XNIO
        // (jboss-logging, routed to slf4j); no request logging at all.
        setDefault("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        setDefault("org.jboss.logging.provider", "slf4j");

        int cores = Runtime.getRuntime().availableProcessors();
        int port = 8792;
        int caches = 16;
        int ioThreads = cores;
        long heapEntries = 4_000_000L;
        long cacheHeapEntries = 1_000_000L;
        try {
            for (int i = 0; i < args.length; i++) {
                String arg = args[i];
                String value;
                int eq = arg.indexOf('=');
                if (arg.startsWith("--") && eq > 0) {
                    value = arg.substring(eq + 1);
                    arg = arg.substring(0, eq);
                } else if (arg.equals("-h") || arg.equals("--help")) {
                    usage(0);
                    return;
                } else if (i + 1 < args.length) {
                    value = args[++i];
                } else {
                    throw new IllegalArgumentException("missing value for " + arg);
                }
                switch (arg) {
                    case "--port" -> port = Integer.parseInt(value);
                    case "--caches" -> caches = Integer.parseInt(value);
                    case "--io-threads" -> ioThreads = Integer.parseInt(value);
                    case "--heap-entries" -> heapEntries = Long.parseLong(value);
                    case "--cache-heap-entries" -> cacheHeapEntries = Long.parseLong(value);
                    default -> throw new IllegalArgumentException("unknown option " + arg);
                }
            }
            if (port < 0 || port > 65535 || caches < 1 || ioThreads < 1 || heapEntries < 1
                    || cacheHeapEntries < 1) {
                throw new IllegalArgumentException("values out of range");
            }
        } catch (IllegalArgumentException e) {
            System.err.println("ehcache-counter: " + e.getMessage());
            usage(2);
            return;
        }

        CounterStore store = new CounterStore(caches, heapEntries, cacheHeapEntries);
        Undertow server = Undertow.builder()
                .addHttpListener(port, HOST)
                .setIoThreads(ioThreads)
                // Handlers never dispatch; the worker pool exists but stays idle.
                .setWorkerThreads(Math.max(2, cores))
                .setSocketOption(Options.BACKLOG, 4096)
                .setServerOption(UndertowOptions.DECODE_URL, false)
                .setServerOption(UndertowOptions.ALWAYS_SET_KEEP_ALIVE, true)
                .setServerOption(UndertowOptions.RECORD_REQUEST_START_TIME, false)
                .setServerOption(UndertowOptions.ENABLE_STATISTICS, false)
                .setHandler(new HttpApi(store))
                .build();
        server.start();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            server.stop();
            store.close();
        }, "shutdown"));
        System.out.printf("ehcache-counter listening on http://%s:%d (%d caches, %d IO threads)%n",
                HOST, port, caches, ioThreads);
        System.out.flush();
    }

    private static void setDefault(String property, String value) {
        if (System.getProperty(property) == null) {
            System.setProperty(property, value);
        }
    }

    private static void usage(int status) {
        (status == 0 ? System.out : System.err).println(
                "usage: java -jar ehcache-counter.jar [--port 8792] [--caches 16] [--io-threads N]"
                        + " [--heap-entries 4000000] [--cache-heap-entries 1000000]");
        if (status != 0) {
            System.exit(status);
        }
    }
}
