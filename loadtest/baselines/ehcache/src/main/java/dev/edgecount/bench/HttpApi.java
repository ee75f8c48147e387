package dev.edgecount.bench;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.databind.JsonNode;
import io.undertow.server.HttpHandler;
import io.undertow.server.HttpServerExchange;
import io.undertow.server.RequestTooBigException;
import io.undertow.util.Headers;
import io.undertow.util.HttpString;
import io.undertow.util.Methods;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import org.xnio.IoUtils;

/**
 * edgecount's API v1 routes over {@link CounterStore}. Runs on Undertow's IO threads: every
 * operation is in memory and non-blocking, and request bodies are read with the non-blocking
 * receiver, so nothing is dispatched to a worker pool.
 */
final class HttpApi implements HttpHandler {
    static final String JSON = "application/json; charset=utf-8";
    static final String TEXT = "text/plain; charset=utf-8";
    static final String DEFAULT_CACHE_TYPE = "application/octet-stream";
    static final String DEFAULT_BATCH_CACHE_TYPE = "text/plain; charset=utf-8";

    static final int MAX_NS_CHARS = 64;
    static final int MAX_KEY_BYTES = 256;
    static final long MAX_COUNTER_BODY = 4 * 1024;
    static final long MAX_CACHE_VALUE = 1024 * 1024;
    static final long MAX_BATCH_BODY = 8 * 1024 * 1024;
    static final int MAX_BATCH_OPS = 1000;

    private final CounterStore store;
    private final byte[] healthBody;

    HttpApi(CounterStore store) {
        this.store = store;
        this.healthBody = Json.ascii("{\"status\":\"ok\",\"shards\":" + store.caches() + "}");
    }

    @Override
    public void handleRequest(HttpServerExchange ex) {
        try {
            route(ex);
        } catch (ApiException e) {
            sendError(ex, e);
        } catch (RuntimeException e) {
            sendError(ex, internal(e));
        }
    }

    // ---- routing --------------------------------------------------------------------------

    private void route(HttpServerExchange ex) {
        // Undertow is configured not to decode URLs: this is the raw path, and each segment is
        // percent-decoded on its own (so %2F stays inside a key).
        String path = ex.getRequestPath();
        if (!path.startsWith("/v1/")) {
            throw noRoute();
        }
        String[] seg = new String[4];
        int count = split(path, 4, seg);
        HttpString method = ex.getRequestMethod();
        switch (seg[0]) {
            case "counters" -> {
                if (count == 3) {
                    counterRoute(ex, method, seg[1], seg[2]);
                } else if (count == 4 && (seg[3].equals("incr") || seg[3].equals("decr"))) {
                    if (!Methods.POST.equals(method)) {
                        throw ApiException.methodNotAllowed("POST");
                    }
                    increment(ex, seg[1], seg[2], seg[3].equals("decr"));
                } else {
                    throw noRoute();
                }
            }
            case "cache" -> {
                if (count != 3) {
                    throw noRoute();
                }
                cacheRoute(ex, method, seg[1], seg[2]);
            }
            case "batch" -> {
                if (count != 1) {
                    throw noRoute();
                }
                if (!Methods.POST.equals(method)) {
                    throw ApiException.methodNotAllowed("POST");
                }
                receive(ex, MAX_BATCH_BODY, this::batch);
            }
            case "health" -> {
                if (count != 1) {
                    throw noRoute();
                }
                if (!Methods.GET.equals(method)) {
                    throw ApiException.methodNotAllowed("GET");
                }
                send(ex, 200, JSON, healthBody);
            }
            default -> throw noRoute();
        }
    }

    /** Splits what follows "/v1/" into at most {@code max} segments; -1 when there are more. */
    private static int split(String path, int max, String[] out) {
        int start = 4;
        int n = 0;
        while (true) {
            int slash = path.indexOf('/', start);
            if (n == max) {
                return -1;
            }
            if (slash < 0) {
                out[n++] = path.substring(start);
                return n;
            }
            out[n++] = path.substring(start, slash);
            start = slash + 1;
        }
    }

    private void counterRoute(HttpServerExchange ex, HttpString method, String rawNs, String rawKey) {
        String ns = namespace(rawNs);
        String key = key(rawKey);
        String ck = CounterStore.compositeKey(ns, key);
        if (Methods.GET.equals(method)) {
            Long v = store.get(ck);
            long value = v == null ? 0 : v;
            String accept = ex.getRequestHeaders().getFirst(Headers.ACCEPT);
            if (accept != null && accept.startsWith("text/plain")) {
                send(ex, 200, TEXT, Json.ascii(Long.toString(value)));
            } else {
                send(ex, 200, JSON, Json.counter(ns, key, value, v != null));
            }
        } else if (Methods.PUT.equals(method)) {
            receive(ex, MAX_COUNTER_BODY, (e, body) -> {
                long value = counterBody(body);
                store.set(ck, value);
                send(e, 200, JSON, Json.counter(ns, key, value, true));
            });
        } else if (Methods.DELETE.equals(method)) {
            send(ex, 200, JSON, store.delete(ck) ? Json.DELETED_TRUE : Json.DELETED_FALSE);
        } else {
            throw ApiException.methodNotAllowed("GET, PUT, DELETE");
        }
    }

    private void increment(HttpServerExchange ex, String rawNs, String rawKey, boolean decr) {
        String ns = namespace(rawNs);
        String key = key(rawKey);
        long by = byParameter(ex.getQueryString());
        long value;
        try {
            value = store.add(CounterStore.compositeKey(ns, key), by, decr);
        } catch (ArithmeticException e) {
            throw ApiException.overflow();
        }
        send(ex, 200, JSON, Json.counter(ns, key, value, true));
    }

    private void cacheRoute(HttpServerExchange ex, HttpString method, String rawNs, String rawKey) {
        String ns = namespace(rawNs);
        String key = key(rawKey);
        String ck = CounterStore.compositeKey(ns, key);
        if (Methods.GET.equals(method)) {
            CounterStore.Entry entry = store.cacheGet(ck);
            if (entry == null) {
                throw ApiException.notFound("There is no cache entry for this key.");
            }
            send(ex, 200, entry.contentType(), entry.bytes());
        } else if (Methods.PUT.equals(method)) {
            String type = ex.getRequestHeaders().getFirst(Headers.CONTENT_TYPE);
            String contentType = type == null || type.isEmpty() ? DEFAULT_CACHE_TYPE : type;
            receive(ex, MAX_CACHE_VALUE, (e, body) -> {
                store.cachePut(ck, new CounterStore.Entry(body, contentType));
                e.setStatusCode(204);
                e.endExchange();
            });
        } else if (Methods.DELETE.equals(method)) {
            send(ex, 200, JSON, store.cacheDelete(ck) ? Json.DELETED_TRUE : Json.DELETED_FALSE);
        } else {
            throw ApiException.methodNotAllowed("GET, PUT, DELETE");
        }
    }

    // ---- batch ----------------------------------------------------------------------------

    private void batch(HttpServerExchange ex, byte[] body) {
        JsonNode root;
        try {
            root = Json.MAPPER.readTree(body);
        } catch (IOException e) {
            throw ApiException.invalidBody("The body is not valid JSON.");
        }
        JsonNode ops = root == null ? null : root.get("ops");
        if (ops == null || !root.isObject() || !ops.isArray()) {
            throw ApiException.invalidBody("The body must be {\"ops\": [...]}.");
        }
        if (ops.size() > MAX_BATCH_OPS) {
            throw new ApiException(413, "too_many_ops",
                    "A batch holds at most " + MAX_BATCH_OPS + " ops.");
        }
        byte[] out = Json.write(g -> {
            g.writeStartObject();
            g.writeArrayFieldStart("results");
            for (JsonNode op : ops) {
                try {
                    applyOp(g, op);
                } catch (ApiException e) {
                    Json.writeError(g, e.code, e.getMessage());
                }
            }
            g.writeEndArray();
            g.writeEndObject();
        });
        send(ex, 200, JSON, out);
    }

    /** Runs one op and writes its result; validates everything before changing or writing. */
    private void applyOp(JsonGenerator g, JsonNode op) throws IOException {
        if (!op.isObject()) {
            throw invalidOp("Each op must be an object.");
        }
        String name = text(op, "op");
        if (name == null) {
            throw invalidOp("Each op needs an \"op\" string.");
        }
        String ns = text(op, "ns");
        if (ns == null) {
            throw invalidNamespace();
        }
        checkNamespace(ns);
        String key = text(op, "key");
        if (key == null) {
            throw invalidKey();
        }
        checkKey(key);
        String ck = CounterStore.compositeKey(ns, key);
        switch (name) {
            case "get" -> {
                Long v = store.get(ck);
                writeCounter(g, v == null ? 0 : v, v != null);
            }
            case "incr", "decr" -> {
                JsonNode byNode = op.get("by");
                long by = byNode == null ? 1 : integer(byNode, "by");
                long value;
                try {
                    value = store.add(ck, by, name.equals("decr"));
                } catch (ArithmeticException e) {
                    throw ApiException.overflow();
                }
                writeCounter(g, value, true);
            }
            case "set" -> {
                JsonNode v = op.get("value");
                if (v == null) {
                    throw invalidOp("set needs an integer \"value\".");
                }
                long value = integer(v, "value");
                store.set(ck, value);
                writeCounter(g, value, true);
            }
            case "delete" -> writeDeleted(g, store.delete(ck));
            case "cache_put" -> {
                JsonNode v = op.get("value");
                if (v == null || !v.isTextual()) {
                    throw invalidOp("cache_put needs a string \"value\".");
                }
                JsonNode t = op.get("content_type");
                if (t != null && !t.isTextual()) {
                    throw invalidOp("\"content_type\" must be a string.");
                }
                byte[] bytes = v.textValue().getBytes(StandardCharsets.UTF_8);
                if (bytes.length > MAX_CACHE_VALUE) {
                    throw ApiException.tooLarge("A cache value holds at most 1 MiB.");
                }
                String type = t == null ? DEFAULT_BATCH_CACHE_TYPE : t.textValue();
                store.cachePut(ck, new CounterStore.Entry(bytes, type));
                g.writeStartObject();
                g.writeBooleanField("stored", true);
                g.writeEndObject();
            }
            case "cache_get" -> {
                CounterStore.Entry entry = store.cacheGet(ck);
                if (entry == null) {
                    throw ApiException.notFound("There is no cache entry for this key.");
                }
                String text = utf8OrNull(entry.bytes());
                g.writeStartObject();
                if (text != null) {
                    g.writeStringField("value", text);
                } else {
                    g.writeStringField("value_base64",
                            Base64.getEncoder().encodeToString(entry.bytes()));
                }
                g.writeStringField("content_type", entry.contentType());
                g.writeEndObject();
            }
            case "cache_delete" -> writeDeleted(g, store.cacheDelete(ck));
            default -> throw invalidOp("Unknown op \"" + name + "\".");
        }
    }

    private static void writeCounter(JsonGenerator g, long value, boolean exists) throws IOException {
        g.writeStartObject();
        g.writeNumberField("value", value);
        g.writeBooleanField("exists", exists);
        g.writeEndObject();
    }

    private static void writeDeleted(JsonGenerator g, boolean deleted) throws IOException {
        g.writeStartObject();
        g.writeBooleanField("deleted", deleted);
        g.writeEndObject();
    }

    private static String text(JsonNode op, String field) {
        JsonNode n = op.get(field);
        return n != null && n.isTextual() ? n.textValue() : null;
    }

    // ---- numbers and bodies ---------------------------------------------------------------

    /** An exact signed 64-bit integer from JSON: 422 when too big, 400 when not an integer. */
    static long integer(JsonNode n, String what) {
        if (n.isIntegralNumber()) {
            if (n.canConvertToLong()) {
                return n.longValue();
            }
            throw ApiException.overflowInput();
        }
        throw ApiException.invalidNumber("\"" + what + "\"");
    }

    /** The counter PUT body: {"value": N}. */
    static long counterBody(byte[] body) {
        JsonNode root;
        try {
            root = Json.MAPPER.readTree(body);
        } catch (IOException e) {
            throw ApiException.invalidBody("The body is not valid JSON.");
        }
        JsonNode v = root == null || !root.isObject() ? null : root.get("value");
        if (v == null) {
            throw ApiException.invalidBody("The body must be {\"value\": <integer>}.");
        }
        return integer(v, "value");
    }

    /** The {@code by} query parameter (default 1); other parameters are ignored. */
    static long byParameter(String query) {
        if (query == null || query.isEmpty()) {
            return 1;
        }
        String found = null;
        int i = 0;
        int len = query.length();
        while (i <= len) {
            int amp = query.indexOf('&', i);
            if (amp < 0) {
                amp = len;
            }
            int eq = query.indexOf('=', i);
            int nameEnd = eq >= 0 && eq < amp ? eq : amp;
            if (nameEnd - i == 2 && query.startsWith("by", i)) {
                if (found != null) {
                    throw new ApiException(400, "duplicate_parameter",
                            "The query parameter \"by\" is given more than once.");
                }
                found = nameEnd < amp ? query.substring(nameEnd + 1, amp) : "";
            }
            i = amp + 1;
        }
        if (found == null) {
            return 1;
        }
        if (found.indexOf('%') >= 0) {
            found = percentDecode(found);
            if (found == null) {
                throw ApiException.invalidNumber("\"by\"");
            }
        }
        return parseLong(found, "\"by\"");
    }

    /** Decimal digits with an optional leading '-': 400 when malformed, 422 when too big. */
    static long parseLong(String s, String what) {
        int n = s.length();
        int start = n > 0 && s.charAt(0) == '-' ? 1 : 0;
        if (start == n) {
            throw ApiException.invalidNumber(what);
        }
        for (int i = start; i < n; i++) {
            char c = s.charAt(i);
            if (c < '0' || c > '9') {
                throw ApiException.invalidNumber(what);
            }
        }
        try {
            return Long.parseLong(s);
        } catch (NumberFormatException e) {
            throw ApiException.overflowInput();
        }
    }

    // ---- names ----------------------------------------------------------------------------

    static String namespace(String raw) {
        String ns = raw;
        if (raw.indexOf('%') >= 0) {
            ns = percentDecode(raw);
            if (ns == null) {
                throw invalidNamespace();
            }
        }
        checkNamespace(ns);
        return ns;
    }

    static void checkNamespace(String ns) {
        int n = ns.length();
        if (n == 0 || n > MAX_NS_CHARS) {
            throw invalidNamespace();
        }
        for (int i = 0; i < n; i++) {
            char c = ns.charAt(i);
            boolean ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
                    || c == '_' || c == '.' || c == '-';
            if (!ok) {
                throw invalidNamespace();
            }
        }
    }

    static String key(String raw) {
        String key = raw;
        if (raw.indexOf('%') >= 0) {
            key = percentDecode(raw);
            if (key == null) {
                throw invalidKey();
            }
        }
        checkKey(key);
        return key;
    }

    /** 1..256 bytes of UTF-8, no control characters, not "." or "..". */
    static void checkKey(String key) {
        int n = key.length();
        if (n == 0 || key.equals(".") || key.equals("..")) {
            throw invalidKey();
        }
        int bytes = 0;
        for (int i = 0; i < n; i++) {
            char c = key.charAt(i);
            if (c < 0x80) {
                if (c < 0x20 || c == 0x7f) {
                    throw invalidKey();
                }
                bytes += 1;
            } else if (c < 0x800) {
                if (c < 0xa0) { // C1 controls
                    throw invalidKey();
                }
                bytes += 2;
            } else if (Character.isHighSurrogate(c)) {
                if (i + 1 >= n || !Character.isLowSurrogate(key.charAt(i + 1))) {
                    throw invalidKey();
                }
                i++;
                bytes += 4;
            } else if (Character.isLowSurrogate(c)) {
                throw invalidKey();
            } else {
                bytes += 3;
            }
        }
        if (bytes > MAX_KEY_BYTES) {
            throw invalidKey();
        }
    }

    /** Percent-decodes a path segment or query value as strict UTF-8; null when malformed. */
    static String percentDecode(String s) {
        int n = s.length();
        byte[] buf = new byte[n];
        int len = 0;
        for (int i = 0; i < n; i++) {
            char c = s.charAt(i);
            if (c == '%') {
                if (i + 2 >= n) {
                    return null;
                }
                int hi = Character.digit(s.charAt(i + 1), 16);
                int lo = Character.digit(s.charAt(i + 2), 16);
                if (hi < 0 || lo < 0) {
                    return null;
                }
                buf[len++] = (byte) ((hi << 4) | lo);
                i += 2;
            } else if (c > 0x7f) {
                return null;
            } else {
                buf[len++] = (byte) c;
            }
        }
        return utf8OrNull(ByteBuffer.wrap(buf, 0, len));
    }

    static String utf8OrNull(byte[] bytes) {
        return utf8OrNull(ByteBuffer.wrap(bytes));
    }

    private static String utf8OrNull(ByteBuffer bytes) {
        try {
            return StandardCharsets.UTF_8.newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(bytes)
                    .toString();
        } catch (CharacterCodingException e) {
            return null;
        }
    }

    // ---- errors ---------------------------------------------------------------------------

    private static ApiException noRoute() {
        return ApiException.notFound("There is no such route.");
    }

    private static ApiException invalidNamespace() {
        return new ApiException(400, "invalid_namespace",
                "The namespace may only hold letters, digits, `_`, `.` and `-` (1 to 64).");
    }

    private static ApiException invalidKey() {
        return new ApiException(400, "invalid_key",
                "The key must be 1 to 256 bytes of UTF-8 without control characters, not `.` or `..`.");
    }

    private static ApiException invalidOp(String message) {
        return new ApiException(400, "invalid_op", message);
    }

    private static ApiException internal(RuntimeException e) {
        return new ApiException(500, "internal", "Internal error: " + e.getClass().getSimpleName());
    }

    // ---- I/O ------------------------------------------------------------------------------

    interface BodyHandler {
        void handle(HttpServerExchange ex, byte[] body);
    }

    /** Reads the whole body without blocking (on the IO thread), then runs {@code handler}. */
    private static void receive(HttpServerExchange ex, long maxBytes, BodyHandler handler) {
        ex.setMaxEntitySize(maxBytes);
        ex.getRequestReceiver().receiveFullBytes((e, body) -> {
            try {
                handler.handle(e, body);
            } catch (ApiException a) {
                sendError(e, a);
            } catch (RuntimeException r) {
                sendError(e, internal(r));
            }
        }, (e, failure) -> {
            if (failure instanceof RequestTooBigException && !e.isResponseStarted()) {
                sendError(e, ApiException.tooLarge("The body is over " + maxBytes + " bytes."));
            } else {
                IoUtils.safeClose(e.getConnection());
            }
        });
    }

    static void send(HttpServerExchange ex, int status, String contentType, byte[] body) {
        ex.setStatusCode(status);
        ex.getResponseHeaders().put(Headers.CONTENT_TYPE, contentType);
        ex.setResponseContentLength(body.length);
        ex.getResponseSender().send(ByteBuffer.wrap(body));
    }

    static void sendError(HttpServerExchange ex, ApiException e) {
        if (ex.isResponseStarted()) {
            IoUtils.safeClose(ex.getConnection());
            return;
        }
        if (e.allow != null) {
            ex.getResponseHeaders().put(Headers.ALLOW, e.allow);
        }
        send(ex, e.status, JSON, Json.error(e.code, e.getMessage()));
    }
}
