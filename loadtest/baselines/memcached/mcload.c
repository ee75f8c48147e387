// A small closed-model load client for memcached's text protocol: each of N threads keeps one
// connection and sends the next request as soon as the last is answered, 80% `get` and 20%
// `set` of VALUE_BYTES-byte values over KEYS keys (uniformly drawn, seeded per thread), for
// SECONDS seconds. It stands in for the seeds' memcached client sweep; k6 cannot speak TCP and
// a Python client would be the bottleneck long before memcached.
//
// Usage: mcload run  PORT THREADS SECONDS KEYS VALUE_BYTES   -> one JSON line of results
//        mcload load PORT KEYS VALUE_BYTES                   -> sets every key once
// Build: cc -O2 -pthread -o mcload mcload.c
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

// Latency histogram: 1 µs buckets up to 100 ms, then one overflow bucket.
#define BUCKETS 100001

struct worker {
    int port, seed;
    long keys, value_bytes;
    double until;
    long ops, errors;
    uint32_t *histogram;
};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int dial(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
        perror("connect");
        exit(2);
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static int send_all(int fd, const char *data, size_t length) {
    while (length > 0) {
        ssize_t sent = write(fd, data, length);
        if (sent <= 0) return -1;
        data += sent;
        length -= (size_t)sent;
    }
    return 0;
}

// Reads until the reply ends with `end` (a get's "END\r\n", a set's "\r\n"); 0 on success.
static int read_reply(int fd, char *buffer, size_t size, const char *end) {
    size_t have = 0, end_length = strlen(end);
    for (;;) {
        ssize_t got = read(fd, buffer + have, size - have - 1);
        if (got <= 0) return -1;
        have += (size_t)got;
        if (have >= end_length && memcmp(buffer + have - end_length, end, end_length) == 0) return 0;
        if (have + 1 >= size) return -1;
    }
}

static uint64_t next_random(uint64_t *state) {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

static void *run(void *arg) {
    struct worker *w = arg;
    int fd = dial(w->port);
    char *request = malloc((size_t)w->value_bytes + 128), reply[65536];
    char *value = malloc((size_t)w->value_bytes + 1);
    memset(value, 'v', (size_t)w->value_bytes);
    value[w->value_bytes] = 0;
    uint64_t state = 0x9E3779B97F4A7C15ULL ^ (uint64_t)(w->seed + 1) * 0x100000001B3ULL;
    for (uint64_t i = 0; now_s() < w->until; i++) {
        long key = (long)(next_random(&state) % (uint64_t)w->keys);
        int is_set = i % 5 == 4;
        int length = is_set ? snprintf(request, (size_t)w->value_bytes + 128, "set k%ld 0 0 %ld\r\n%s\r\n", key,
                                       w->value_bytes, value)
                            : snprintf(request, 128, "get k%ld\r\n", key);
        double started = now_s();
        if (send_all(fd, request, (size_t)length) != 0 ||
            read_reply(fd, reply, sizeof reply, is_set ? "\r\n" : "END\r\n") != 0 ||
            (is_set && strncmp(reply, "STORED", 6) != 0)) {
            w->errors++;
            break;
        }
        long micros = (long)((now_s() - started) * 1e6);
        w->histogram[micros < BUCKETS - 1 ? micros : BUCKETS - 1]++;
        w->ops++;
    }
    close(fd);
    free(request);
    free(value);
    return NULL;
}

static double percentile_ms(const uint64_t *merged, uint64_t total, double share) {
    uint64_t wanted = (uint64_t)(share * (double)total), seen = 0;
    for (long b = 0; b < BUCKETS; b++) {
        seen += merged[b];
        if (seen > wanted) return (double)b / 1000.0;
    }
    return (double)(BUCKETS - 1) / 1000.0;
}

static int load(int port, long keys, long value_bytes) {
    int fd = dial(port);
    char *value = malloc((size_t)value_bytes + 1), reply[64];
    memset(value, 'v', (size_t)value_bytes);
    value[value_bytes] = 0;
    char *request = malloc((size_t)value_bytes + 128);
    for (long key = 0; key < keys; key++) {
        int length = snprintf(request, (size_t)value_bytes + 128, "set k%ld 0 0 %ld\r\n%s\r\n", key, value_bytes,
                              value);
        if (send_all(fd, request, (size_t)length) != 0 || read_reply(fd, reply, sizeof reply, "\r\n") != 0) {
            fprintf(stderr, "load failed at key %ld\n", key);
            return 1;
        }
    }
    printf("{\"loaded\": %ld}\n", keys);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 5 && strcmp(argv[1], "load") == 0) return load(atoi(argv[2]), atol(argv[3]), atol(argv[4]));
    if (argc != 7 || strcmp(argv[1], "run") != 0) {
        fprintf(stderr, "usage: mcload run PORT THREADS SECONDS KEYS VALUE_BYTES | mcload load PORT KEYS VALUE_BYTES\n");
        return 2;
    }
    int port = atoi(argv[2]), threads = atoi(argv[3]);
    double seconds = atof(argv[4]);
    long keys = atol(argv[5]), value_bytes = atol(argv[6]);
    if (threads < 1 || threads > 4096 || keys < 1 || value_bytes < 1 || value_bytes > 60000) return 2;
    struct worker *workers = calloc((size_t)threads, sizeof *workers);
    pthread_t *ids = calloc((size_t)threads, sizeof *ids);
    double started = now_s();
    for (int t = 0; t < threads; t++) {
        workers[t] = (struct worker){.port = port, .seed = t, .keys = keys, .value_bytes = value_bytes,
                                     .until = started + seconds,
                                     .histogram = calloc(BUCKETS, sizeof(uint32_t))};
        pthread_create(&ids[t], NULL, run, &workers[t]);
    }
    uint64_t *merged = calloc(BUCKETS, sizeof(uint64_t)), total = 0;
    long errors = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(ids[t], NULL);
        for (long b = 0; b < BUCKETS; b++) merged[b] += workers[t].histogram[b];
        total += (uint64_t)workers[t].ops;
        errors += workers[t].errors;
    }
    double elapsed = now_s() - started;
    printf("{\"ops\": %llu, \"seconds\": %.3f, \"errors\": %ld, \"p50_ms\": %.3f, \"p95_ms\": %.3f, \"p99_ms\": %.3f}\n",
           (unsigned long long)total, elapsed, errors, percentile_ms(merged, total, 0.50),
           percentile_ms(merged, total, 0.95), percentile_ms(merged, total, 0.99));
    return errors > 0 ? 1 : 0;
}
