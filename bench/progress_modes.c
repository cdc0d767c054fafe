// How a non-blocking exchange between two ranks can progress while they compute (docs/performance.md, "Overlapping
// communication"). Each round: both ranks post a message of MB megabytes to each other (the ring reduce-scatter's
// one step at 2 ranks), compute GEMMS products of n x n (OpenBLAS, one thread), then complete the exchange. Modes:
//   block   compute, then a blocking exchange (what a blocking reduce-scatter at the close costs)
//   none    posted before the compute, completed after it, no MPI call in between (Open MPI moves it only there)
//   points  + MPI_Test after each product (progress at natural points, what the runtime does between buckets)
//   nap     + a thread calling MPI_Iprobe every 1 ms (MPI_THREAD_MULTIPLE)
//   spin    + a thread calling MPI_Iprobe without pause
// Prints per rank the medians over rounds of: compute s (wall of the products), wait s (wall of completing the
// exchange after them), round CPU s (the whole process) and main-thread CPU s. On a shared machine the wall figures
// scatter; the CPU figures show what a progress thread costs.
// build: mpicc -O2 -std=c11 -D_GNU_SOURCE bench/progress_modes.c -o /tmp/progress_modes -lopenblas -lpthread
// run:   OPENBLAS_NUM_THREADS=1 mpirun -np 2 /tmp/progress_modes MODE [MB=30] [GEMMS=12] [N=768] [ROUNDS=7]
#include <cblas.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static volatile int g_stop;
static int g_nap;

static double now(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static double proc_cpu(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec + (double)u.ru_stime.tv_sec +
           1e-6 * (double)u.ru_stime.tv_usec;
}
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[n / 2];
}

static void *progress_thread(void *arg) {
    (void)arg;
    struct timespec nap = {0, 1000000L};
    while (!g_stop) {
        int flag;
        MPI_Iprobe(MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);   // any MPI call progresses
        if (g_nap) nanosleep(&nap, NULL);
    }
    return NULL;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "points";
    int mb = argc > 2 ? atoi(argv[2]) : 30, gemms = argc > 3 ? atoi(argv[3]) : 12, n = argc > 4 ? atoi(argv[4]) : 768;
    int rounds = argc > 5 ? atoi(argv[5]) : 7, provided, rank, size;
    int thread = !strcmp(mode, "nap") || !strcmp(mode, "spin");
    MPI_Init_thread(&argc, &argv, thread ? MPI_THREAD_MULTIPLE : MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2 || (thread && provided < MPI_THREAD_MULTIPLE)) {
        if (!rank) fprintf(stderr, "needs 2 ranks (and MPI_THREAD_MULTIPLE for %s: provided %d)\n", mode, provided);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    size_t cnt = (size_t)mb << 18;   // floats
    float *snd = malloc(cnt * 4), *rcv = malloc(cnt * 4), *a = malloc((size_t)n * n * 4), *c = malloc((size_t)n * n * 4);
    for (size_t i = 0; i < cnt; i++) snd[i] = (float)i, rcv[i] = 0;
    for (size_t i = 0; i < (size_t)n * n; i++) a[i] = 1e-3f * (float)(i % 97), c[i] = 0;
    pthread_t th;
    g_nap = !strcmp(mode, "nap");
    if (thread) pthread_create(&th, NULL, progress_thread, NULL);
    double *comp = malloc(sizeof(double) * (size_t)rounds), *wait = malloc(sizeof(double) * (size_t)rounds);
    double *cpu = malloc(sizeof(double) * (size_t)rounds), *tcpu = malloc(sizeof(double) * (size_t)rounds);
    int peer = 1 - rank;
    for (int r = 0; r < rounds; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double c0 = proc_cpu(), m0 = now(CLOCK_THREAD_CPUTIME_ID), t0 = now(CLOCK_MONOTONIC);
        MPI_Request q[2];
        int posted = strcmp(mode, "block") != 0;
        if (posted) {
            MPI_Irecv(rcv, (int)cnt, MPI_FLOAT, peer, 5, MPI_COMM_WORLD, &q[0]);
            MPI_Isend(snd, (int)cnt, MPI_FLOAT, peer, 5, MPI_COMM_WORLD, &q[1]);
        }
        for (int k = 0; k < gemms; k++) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, a, n, 0.0f, c, n);
            if (!strcmp(mode, "points")) {
                int flag;
                MPI_Testall(2, q, &flag, MPI_STATUSES_IGNORE);
            }
        }
        double t1 = now(CLOCK_MONOTONIC);
        if (posted) MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
        else MPI_Sendrecv(snd, (int)cnt, MPI_FLOAT, peer, 5, rcv, (int)cnt, MPI_FLOAT, peer, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        double t2 = now(CLOCK_MONOTONIC);
        comp[r] = t1 - t0, wait[r] = t2 - t1, cpu[r] = proc_cpu() - c0, tcpu[r] = now(CLOCK_THREAD_CPUTIME_ID) - m0;
    }
    g_stop = 1;
    if (thread) pthread_join(th, NULL);
    double res[4] = {median(comp, rounds), median(wait, rounds), median(cpu, rounds), median(tcpu, rounds)}, all[8];
    MPI_Gather(res, 4, MPI_DOUBLE, all, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (!rank)
        for (int i = 0; i < 2; i++)
            printf("%-6s rank %d: compute %.3f s  wait %.3f s  round CPU %.3f s  main-thread CPU %.3f s  (%d MB, %d x %d^3)\n",
                   mode, i, all[4 * i], all[4 * i + 1], all[4 * i + 2], all[4 * i + 3], mb, gemms, n);
    free(snd), free(rcv), free(a), free(c), free(comp), free(wait), free(cpu), free(tcpu);
    MPI_Finalize();
    return 0;
}
