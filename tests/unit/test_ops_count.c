// The counting backend (kernels/ops_count.c): every member of the seam's list is wrapped, runs on the backend it
// wraps with the same results, and counts its calls (and the bytes of alloc, upload and download).
#include "kernels/ops.h"
#include "check.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int64_t calls(const char *member) {
    for (int i = 0; i < OS_OPS_MEMBERS; i++)
        if (!strcmp(os_ops_member_name(i), member)) return os_ops_count_of(i).calls;
    return -1;
}
static int64_t bytes(const char *member) {
    for (int i = 0; i < OS_OPS_MEMBERS; i++)
        if (!strcmp(os_ops_member_name(i), member)) return os_ops_count_of(i).bytes;
    return -1;
}

int main(void) {
    const os_ops *c = os_ops_count(&os_ops_cpu);
    CHECK(!strcmp(c->name, "cpu") && c->host_memory == 1, "name and host_memory are the wrapped backend's");
    // every member is there and starts at 0
    int n = 0;
#define FILLED(name, ...) {CHECK(c->name != NULL && calls(#name) == 0, #name); n++;}
    OS_OPS_LIST(FILLED)
#undef FILLED
    CHECK(n == OS_OPS_MEMBERS && os_ops_member_name(OS_OPS_MEMBERS) == NULL, "%d members", n);
    float h[5] = {1, 2, 3, 4, 5}, back[5];
    float *a = c->alloc(sizeof h, "a"), *b = c->alloc_uninit(sizeof h, "b");
    c->upload(a, h, sizeof h);
    c->copy(b, a, 5);
    c->add(b, a, b, 5);
    c->add(b, a, b, 5);
    double *s = c->alloc(sizeof(double), "s"), ss;
    c->sumsq(b, 5, s);
    c->download(back, b, sizeof back);
    c->download(&ss, s, sizeof ss);
    CHECK(back[0] == 3 && back[4] == 15, "the wrapped backend computed: %g %g", back[0], back[4]);
    CHECK(ss == 9 + 36 + 81 + 144 + 225, "sumsq %g", ss);
    CHECK(calls("add") == 2 && calls("copy") == 1 && calls("sumsq") == 1 && calls("scale") == 0, "calls counted");
    CHECK(calls("alloc") == 2 && bytes("alloc") == (int64_t)(sizeof h + sizeof(double)), "alloc: %lld bytes",
          (long long)bytes("alloc"));
    CHECK(calls("download") == 2 && bytes("download") == (int64_t)(sizeof back + sizeof ss), "download bytes");
    CHECK(bytes("upload") == (int64_t)sizeof h && bytes("add") == 0, "upload bytes; kernels count no bytes");
    CHECK(c->attention_stats_floats(1, 3, 2) == os_ops_cpu.attention_stats_floats(1, 3, 2), "a value returned");
    os_ops_count_phase(OS_PHASE_LOSS);   // calls counted per phase too
    c->add(b, a, b, 5), c->add(b, a, b, 5);
    os_ops_count_phase(OS_PHASE_OTHER);
    c->free(a), c->free(b), c->free(s);
    CHECK(calls("free") == 3 && calls("attention_stats_floats") == 1, "free, attention_stats_floats counted");
    // the JSON written
    char path[] = "/tmp/test_ops_count_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    close(fd);
    CHECK(os_ops_count_write(path) == 0, "write");
    FILE *f = fopen(path, "r");
    char text[8192] = "";
    size_t k = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[k] = 0;
    if (f) fclose(f);
    unlink(path);
    CHECK(strstr(text, "\"backend\": \"cpu\"") && strstr(text, "\"add\": {\"calls\": 4, \"bytes\": 0}") &&
              strstr(text, "\"loss\": {\"add\": 2}") && strstr(text, "\"other\": {\"alloc\": ") &&
              strstr(text, "\"upload\": {\"calls\": 1, \"bytes\": 20}"),
          "JSON: %s", text);
    CHECK(os_ops_count_write("/nonexistent/dir/x.json") < 0, "a path that cannot be written is an error");
    return check_report("test_ops_count");
}
