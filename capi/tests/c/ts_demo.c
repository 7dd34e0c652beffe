/*
 * ts_demo: the texstream C ABI end to end, as an app embedding it would use it.
 *
 *   ts_demo WORKLOAD REFERENCE_JSON IMAGE
 *
 * Opens WORKLOAD (tests/data/capi/tiny.ron), runs its `tensor` pipeline on the input in
 * REFERENCE_JSON (tests/data/import/tiny_conv_ref.json, ONNX Runtime's input and output for the
 * model) and checks the output against ONNX Runtime's; runs its `image` pipeline on IMAGE given
 * as encoded bytes and again as RGB8 pixels, which must give the same bits; submits from two
 * threads at once; cancels a request while another thread waits on it; walks the error paths
 * (unknown pipeline, NULL argument, wrong input shape, wrong reader, bad options, a failed
 * reload that leaves the engine serving); frees everything and exits 0. Every output is
 * printed as
 *   output LABEL NAME RANK DIMS... : VALUES...
 * (%.9g, which gives an f32 back exactly) so that capi/tests/c_demo.rs can compare them with
 * the same engine run from Rust.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "texstream.h"

#define CHECK(call)                                                                    \
    do {                                                                               \
        TsStatus status_ = (call);                                                     \
        if (status_ != TS_STATUS_OK) {                                                 \
            fprintf(stderr, "%s:%d: %s returned %d: %s\n", __FILE__, __LINE__, #call,  \
                    (int)status_, ts_last_error());                                    \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

#define EXPECT(cond, ...)                                                              \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "%s:%d: expected %s: ", __FILE__, __LINE__, #cond);        \
            fprintf(stderr, __VA_ARGS__);                                              \
            fprintf(stderr, "\n");                                                     \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

/* A call that must fail with `want`, leaving a last-error message that contains `needle`. */
static void expect_failure(const char *what, TsStatus got, TsStatus want, const char *needle) {
    const char *msg = ts_last_error();
    EXPECT(got == want, "%s: status %d, wanted %d (last error: %s)", what, (int)got, (int)want,
           msg);
    EXPECT(strstr(msg, needle) != NULL, "%s: last error \"%s\" does not name \"%s\"", what, msg,
           needle);
    printf("error %s: %d: %s\n", what, (int)got, msg);
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    EXPECT(f != NULL, "cannot open %s", path);
    EXPECT(fseek(f, 0, SEEK_END) == 0, "cannot seek %s", path);
    long n = ftell(f);
    EXPECT(n >= 0, "cannot size %s", path);
    EXPECT(fseek(f, 0, SEEK_SET) == 0, "cannot seek %s", path);
    char *buf = malloc((size_t)n + 1);
    EXPECT(buf != NULL, "out of memory");
    EXPECT(fread(buf, 1, (size_t)n, f) == (size_t)n, "cannot read %s", path);
    buf[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* The numbers of the JSON array under "key" in `json` (the reference file is flat). */
static float *json_array(const char *json, const char *key, size_t *count) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    const char *p = strstr(json, pattern);
    EXPECT(p != NULL, "no \"%s\" in the reference", key);
    p = strchr(p, '[');
    EXPECT(p != NULL, "\"%s\" is not an array", key);
    size_t cap = 16, n = 0;
    float *v = malloc(cap * sizeof *v);
    EXPECT(v != NULL, "out of memory");
    for (p++;;) {
        while (*p == ' ' || *p == ',') p++;
        if (*p == ']') break;
        char *end;
        double d = strtod(p, &end);
        EXPECT(end != p, "bad number in \"%s\"", key);
        if (n == cap) {
            cap *= 2;
            v = realloc(v, cap * sizeof *v);
            EXPECT(v != NULL, "out of memory");
        }
        v[n++] = (float)d;
        p = end;
    }
    *count = n;
    return v;
}

/* Waits for `req` without bound and returns its outputs (the request is freed). */
static TsValues *finish(TsRequest *req) {
    TsValues *out = NULL;
    CHECK(ts_request_wait(req, -1, &out));
    ts_request_free(req);
    return out;
}

/* Reads tensor `name` of `values` into a new array, prints it, and returns it. */
static float *print_tensor(const char *label, const TsValues *values, const char *name,
                           size_t *len) {
    TsValueKind kind;
    CHECK(ts_values_kind(values, name, &kind));
    EXPECT(kind == TS_VALUE_KIND_TENSOR, "%s: %s is of kind %d", label, name, (int)kind);
    const size_t *shape;
    size_t rank;
    CHECK(ts_values_tensor_shape(values, name, &shape, &rank));
    CHECK(ts_values_tensor_len(values, name, len));
    float *data = malloc(*len * sizeof *data);
    EXPECT(data != NULL, "out of memory");
    CHECK(ts_values_tensor_f32(values, name, data, *len));
    printf("output %s %s %zu", label, name, rank);
    for (size_t i = 0; i < rank; i++) printf(" %zu", shape[i]);
    printf(" :");
    for (size_t i = 0; i < *len; i++) printf(" %.9g", data[i]);
    printf("\n");
    return data;
}

struct worker {
    TsEngine *engine;
    const TsValues *inputs;
    float y[10];
    int ok;
};

/* A second thread's request on the same engine. */
static void *submit_from_thread(void *arg) {
    struct worker *w = arg;
    TsRequest *req = NULL;
    CHECK(ts_engine_submit(w->engine, "tensor", w->inputs, 0, &req));
    TsValues *out = finish(req);
    CHECK(ts_values_tensor_f32(out, "y", w->y, 10));
    ts_values_free(out);
    w->ok = 1;
    return NULL;
}

struct waiter {
    TsRequest *request;
    TsStatus status;
};

/* Waits on a request in another thread than the one that cancels it. */
static void *wait_in_thread(void *arg) {
    struct waiter *w = arg;
    TsValues *out = NULL;
    w->status = ts_request_wait(w->request, -1, &out);
    ts_values_free(out);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s WORKLOAD REFERENCE_JSON IMAGE\n", argv[0]);
        return 2;
    }
    size_t json_len, x_n, y_n, xs_n, ys_n;
    char *json = read_file(argv[2], &json_len);
    float *x = json_array(json, "x", &x_n);
    float *y_ref = json_array(json, "y", &y_n);
    float *x_shape_f = json_array(json, "x_shape", &xs_n);
    float *y_shape_f = json_array(json, "y_shape", &ys_n);
    EXPECT(xs_n == 4 && ys_n == 2, "reference shapes of rank %zu and %zu", xs_n, ys_n);
    size_t x_shape[4];
    for (size_t i = 0; i < 4; i++) x_shape[i] = (size_t)x_shape_f[i];

    /* Options are checked before any device work. */
    TsOptions opts;
    CHECK(ts_options_default(&opts));
    TsEngine *engine = NULL;
    opts.policy = "fastest";
    expect_failure("bad policy", ts_engine_open(argv[1], &opts, &engine),
                   TS_STATUS_INVALID_ARGUMENT, "fastest");
    EXPECT(engine == NULL, "a failed open wrote its out-pointer");
    opts.policy = NULL;
    opts.queue_depth = 8;
    CHECK(ts_engine_open(argv[1], &opts, &engine));

    char *interface = NULL;
    CHECK(ts_engine_pipelines_json(engine, &interface));
    EXPECT(strstr(interface, "\"tensor\"") && strstr(interface, "\"image\""),
           "pipelines: %s", interface);
    printf("pipelines %s\n", interface);
    ts_string_free(interface);

    /* The tensor pipeline against ONNX Runtime. */
    TsValues *inputs = NULL;
    CHECK(ts_values_new(&inputs));
    CHECK(ts_values_set_tensor_f32(inputs, "x", x_shape, 4, x, x_n));
    TsRequest *req = NULL;
    CHECK(ts_engine_submit(engine, "tensor", inputs, 0, &req));
    TsValues *out = NULL;
    TsStatus first = ts_request_wait(req, 0, &out);
    EXPECT(first == TS_STATUS_OK || first == TS_STATUS_TIMEOUT, "a 0 ms wait answered %d: %s",
           (int)first, ts_last_error());
    printf("a 0 ms wait answered %s\n", first == TS_STATUS_OK ? "ok" : "timeout");
    if (first == TS_STATUS_TIMEOUT) CHECK(ts_request_wait(req, -1, &out));
    expect_failure("second wait", ts_request_wait(req, -1, &out), TS_STATUS_INVALID_ARGUMENT,
                   "already taken");
    ts_request_free(req);
    size_t count;
    CHECK(ts_values_count(out, &count));
    EXPECT(count == 1, "the tensor pipeline gave %zu outputs", count);
    const char *name;
    CHECK(ts_values_name(out, 0, &name));
    EXPECT(strcmp(name, "y") == 0, "output 0 is `%s`", name);
    const size_t *shape;
    size_t rank;
    CHECK(ts_values_tensor_shape(out, "y", &shape, &rank));
    EXPECT(rank == 2 && shape[0] == (size_t)y_shape_f[0] && shape[1] == (size_t)y_shape_f[1],
           "y has rank %zu", rank);
    size_t y_len;
    float *y = print_tensor("tensor", out, "y", &y_len);
    EXPECT(y_len == y_n, "y has %zu values, the reference %zu", y_len, y_n);
    double worst = 0.0;
    for (size_t i = 0; i < y_n; i++) worst = fmax(worst, fabs((double)y[i] - (double)y_ref[i]));
    printf("tensor: max |y - onnxruntime| = %.3g\n", worst);
    EXPECT(worst < 1e-5, "y differs from ONNX Runtime's by %g", worst);

    /* Readers that do not fit the value fail with a code and a message. */
    const char *text;
    expect_failure("wrong reader", ts_values_text(out, "y", &text), TS_STATUS_WRONG_KIND,
                   "tensor");
    TsValueKind kind;
    expect_failure("missing value", ts_values_kind(out, "z", &kind), TS_STATUS_NOT_FOUND, "`y`");
    float small[3];
    expect_failure("short buffer", ts_values_tensor_f32(out, "y", small, 3),
                   TS_STATUS_INVALID_ARGUMENT, "10 values");
    ts_values_free(out);

    /* Two threads submit at once; both get the same bits as above. */
    struct worker workers[2] = {{engine, inputs, {0}, 0}, {engine, inputs, {0}, 0}};
    pthread_t threads[2];
    for (int i = 0; i < 2; i++)
        EXPECT(pthread_create(&threads[i], NULL, submit_from_thread, &workers[i]) == 0,
               "pthread_create");
    for (int i = 0; i < 2; i++) {
        EXPECT(pthread_join(threads[i], NULL) == 0, "pthread_join");
        EXPECT(workers[i].ok && memcmp(workers[i].y, y, sizeof workers[i].y) == 0,
               "thread %d got other outputs", i);
    }
    printf("threads: 2 concurrent requests, same outputs\n");

    /* The image pipeline: encoded bytes, then the same pixels as RGB8. */
    size_t png_len;
    char *png = read_file(argv[3], &png_len);
    TsValues *encoded = NULL;
    CHECK(ts_values_new(&encoded));
    CHECK(ts_values_set_image_encoded(encoded, "photo", (const uint8_t *)png, png_len));
    size_t width, height;
    CHECK(ts_values_image_size(encoded, "photo", &width, &height));
    size_t rgb_len = width * height * 3;
    uint8_t *rgb = malloc(rgb_len);
    EXPECT(rgb != NULL, "out of memory");
    CHECK(ts_values_image_rgb8(encoded, "photo", rgb, rgb_len));
    TsValues *raw = NULL;
    CHECK(ts_values_new(&raw));
    CHECK(ts_values_set_image_rgb8(raw, "photo", width, height, rgb, rgb_len));
    printf("image: %zux%zu\n", width, height);
    TsRequest *from_encoded = NULL, *from_raw = NULL;
    CHECK(ts_engine_submit(engine, "image", encoded, 0, &from_encoded));
    CHECK(ts_engine_submit(engine, "image", raw, 0, &from_raw));
    TsValues *out_encoded = finish(from_encoded), *out_raw = finish(from_raw);
    size_t n_encoded, n_raw;
    float *c_encoded = print_tensor("image-encoded", out_encoded, "classes", &n_encoded);
    float *c_raw = print_tensor("image-rgb8", out_raw, "classes", &n_raw);
    EXPECT(n_encoded == 5 && n_raw == 5, "classes of %zu and %zu values", n_encoded, n_raw);
    EXPECT(memcmp(c_encoded, c_raw, sizeof(float) * 5) == 0,
           "encoded and RGB8 inputs gave other outputs");
    double sum = 0.0;
    for (size_t i = 0; i < 5; i++) sum += c_encoded[i];
    EXPECT(fabs(sum - 1.0) < 1e-5, "the softmax sums to %g", sum);
    ts_values_free(out_encoded);
    ts_values_free(out_raw);

    /* Bad inputs fail where they are given... */
    expect_failure("undecodable image",
                   ts_values_set_image_encoded(raw, "photo", (const uint8_t *)"not a png", 9),
                   TS_STATUS_INVALID_ARGUMENT, "photo");
    expect_failure("shape and data disagree",
                   ts_values_set_tensor_f32(inputs, "x", x_shape, 4, x, 5),
                   TS_STATUS_INVALID_ARGUMENT, "5");
    expect_failure("NULL pipeline", ts_engine_submit(engine, NULL, inputs, 0, &req),
                   TS_STATUS_NULL_ARGUMENT, "pipeline");
    expect_failure("unknown pipeline", ts_engine_submit(engine, "no-such-pipeline", inputs, 0, &req),
                   TS_STATUS_UNKNOWN_PIPELINE, "no-such-pipeline");
    /* ...or, when only the pipeline can tell, at the wait. */
    TsValues *wrong = NULL;
    CHECK(ts_values_new(&wrong));
    size_t one[4] = {1, 3, 8, 8};
    CHECK(ts_values_set_tensor_f32(wrong, "x", one, 4, x, x_n / 2));
    CHECK(ts_engine_submit(engine, "tensor", wrong, 0, &req));
    expect_failure("wrong input shape", ts_request_wait(req, -1, &out), TS_STATUS_REQUEST_FAILED,
                   "x");
    ts_request_free(req);
    ts_values_free(wrong);

    /* A request cancelled from one thread while another waits on it: queued behind two
     * others, it has not started when the cancel comes, so its wait answers CANCELLED. */
    TsRequest *ahead[2];
    for (int i = 0; i < 2; i++) CHECK(ts_engine_submit(engine, "tensor", inputs, 0, &ahead[i]));
    struct waiter waiter = {NULL, TS_STATUS_OK};
    CHECK(ts_engine_submit(engine, "tensor", inputs, 0, &waiter.request));
    pthread_t waiting;
    EXPECT(pthread_create(&waiting, NULL, wait_in_thread, &waiter) == 0, "pthread_create");
    CHECK(ts_request_cancel(waiter.request));
    EXPECT(pthread_join(waiting, NULL) == 0, "pthread_join");
    EXPECT(waiter.status == TS_STATUS_CANCELLED, "the cancelled request answered %d",
           (int)waiter.status);
    printf("cancel: the waiting thread got TS_STATUS_CANCELLED\n");
    ts_request_free(waiter.request);
    for (int i = 0; i < 2; i++) ts_values_free(finish(ahead[i]));

    /* A failed reload keeps the old workload serving; a good one swaps. */
    expect_failure("reload of a missing file", ts_engine_reload(engine, "no/such/workload.ron"),
                   TS_STATUS_WORKLOAD, "no/such/workload.ron");
    CHECK(ts_engine_reload(engine, argv[1]));
    CHECK(ts_engine_submit(engine, "tensor", inputs, 0, &req));
    out = finish(req);
    float again[10];
    CHECK(ts_values_tensor_f32(out, "y", again, 10));
    EXPECT(memcmp(again, y, sizeof again) == 0, "outputs changed across the reload");
    ts_values_free(out);
    printf("reload: same outputs\n");

    char *stats = NULL;
    CHECK(ts_engine_stats_json(engine, &stats));
    EXPECT(strstr(stats, "\"requests_ok\":") != NULL, "stats: %s", stats);
    EXPECT(strstr(stats, "\"reloads_failed\":1") != NULL, "stats: %s", stats);
    printf("stats %s\n", stats);
    ts_string_free(stats);

    ts_engine_close(engine);
    ts_engine_close(NULL);
    ts_values_free(NULL);
    ts_request_free(NULL);
    ts_string_free(NULL);
    ts_values_free(inputs);
    ts_values_free(encoded);
    ts_values_free(raw);
    free(rgb);
    free(png);
    free(c_encoded);
    free(c_raw);
    free(y);
    free(x);
    free(y_ref);
    free(x_shape_f);
    free(y_shape_f);
    free(json);
    printf("ts_demo: ok\n");
    return 0;
}
