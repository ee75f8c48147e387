package dev.edgecount.bench;

/** A request (or one batch op) refused with an HTTP status and an edgecount error code. */
final class ApiException extends RuntimeException {
    final int status;
    final String code;
    /** For 405: the methods the route takes (the {@code Allow} header), else null. */
    final String allow;

    ApiException(int status, String code, String message) {
        this(status, code, message, null);
    }

    ApiException(int status, String code, String message, String allow) {
        super(message, null, false, false); // no stack trace: these are ordinary answers
        this.status = status;
        this.code = code;
        this.allow = allow;
    }

    static ApiException methodNotAllowed(String allow) {
        return new ApiException(405, "method_not_allowed",
                "This route takes only " + allow + ".", allow);
    }

    static ApiException notFound(String message) {
        return new ApiException(404, "not_found", message);
    }

    static ApiException overflow() {
        return new ApiException(422, "overflow",
                "The result does not fit in a signed 64-bit integer.");
    }

    static ApiException overflowInput() {
        return new ApiException(422, "overflow",
                "The number given does not fit in a signed 64-bit integer.");
    }

    static ApiException invalidNumber(String what) {
        return new ApiException(400, "invalid_number", what + " must be an integer.");
    }

    static ApiException invalidBody(String message) {
        return new ApiException(400, "invalid_body", message);
    }

    static ApiException tooLarge(String message) {
        return new ApiException(413, "payload_too_large", message);
    }
}
