package dev.edgecount.bench;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.util.ByteArrayBuilder;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;

/** JSON in (Jackson tree model) and out (Jackson streaming generator). */
final class Json {
    static final ObjectMapper MAPPER = new ObjectMapper();
    static final JsonFactory FACTORY = MAPPER.getFactory();

    static final byte[] DELETED_TRUE = ascii("{\"deleted\":true}");
    static final byte[] DELETED_FALSE = ascii("{\"deleted\":false}");

    private Json() {}

    static byte[] ascii(String s) {
        return s.getBytes(StandardCharsets.US_ASCII);
    }

    /** Writes one JSON document with {@code body} and returns its bytes. */
    static byte[] write(Body body) {
        ByteArrayBuilder out = new ByteArrayBuilder(128);
        try (JsonGenerator g = FACTORY.createGenerator(out)) {
            body.write(g);
        } catch (IOException e) {
            throw new UncheckedIOException(e); // cannot happen when writing to memory
        }
        return out.toByteArray();
    }

    interface Body {
        void write(JsonGenerator g) throws IOException;
    }

    static byte[] counter(String ns, String key, long value, boolean exists) {
        return write(g -> {
            g.writeStartObject();
            g.writeStringField("ns", ns);
            g.writeStringField("key", key);
            g.writeNumberField("value", value);
            g.writeBooleanField("exists", exists);
            g.writeEndObject();
        });
    }

    static byte[] error(String code, String message) {
        return write(g -> writeError(g, code, message));
    }

    static void writeError(JsonGenerator g, String code, String message) throws IOException {
        g.writeStartObject();
        g.writeObjectFieldStart("error");
        g.writeStringField("code", code);
        g.writeStringField("message", message);
        g.writeEndObject();
        g.writeEndObject();
    }
}
