#include "zero/phase_deadline.h"
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv;
static pthread_t g_thread;
static int g_armed, g_running;
static const char *g_phase;
static double g_seconds;

// the job's rank from the launcher's environment (MPI cannot be asked: the guarded call may be MPI_Init itself)
static const char *launch_rank(void) {
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    return r ? r : getenv("PMIX_RANK");
}

// now + seconds on CLOCK_MONOTONIC, saturated at a year (the longest --ddp_timeout: no cast overflows); 0, or -1
// when the clock cannot be read
static int deadline_after(double seconds, struct timespec *dl) {
    if (clock_gettime(CLOCK_MONOTONIC, dl) != 0) return -1;
    if (!(seconds < PD_MAX_SECONDS)) seconds = PD_MAX_SECONDS;   // NaN too
    double whole = floor(seconds);
    dl->tv_sec += (time_t)whole;
    dl->tv_nsec += (long)((seconds - whole) * 1e9);
    if (dl->tv_nsec >= 1000000000L) dl->tv_sec++, dl->tv_nsec -= 1000000000L;
    return 0;
}

static void *guard(void *arg) {
    (void)arg;
    struct timespec dl;
    int timed = deadline_after(g_seconds, &dl) == 0, timed_out = 0;
    pthread_mutex_lock(&g_mu);
    while (g_armed && !timed_out) {
        int rc = timed ? pthread_cond_timedwait(&g_cv, &g_mu, &dl) : pthread_cond_wait(&g_cv, &g_mu);
        if (rc == ETIMEDOUT) timed_out = 1;
        else if (rc) timed = 0;   // (EINVAL: a deadline the clock cannot hold) wait for the disarm: never spin
    }
    int fire = g_armed;
    pthread_mutex_unlock(&g_mu);
    if (!fire) return NULL;
    const char *rank = launch_rank();
    int init = !strcmp(g_phase, "MPI_Init");
    fprintf(stderr, "omnishard: %s%s%s%s did not complete within %g s (--ddp_timeout): %s; ending this rank (exit 1)\n",
            rank ? "rank " : "", rank ? rank : "", rank ? ": " : "", g_phase, g_seconds,
            init ? "a rank of the job did not start or did not reach it (a stalled launch, a host that cannot be "
                   "reached); nothing was done"
                 : "another rank of the job did not reach it (stopped, stuck or cut off)");
    fflush(stderr);
    _exit(1);
}

void pd_arm(const char *phase, double seconds) {
    if (seconds <= 0) return;
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&g_cv, &a);
    pthread_condattr_destroy(&a);
    g_phase = phase, g_seconds = seconds, g_armed = 1;
    int e = pthread_create(&g_thread, NULL, guard, NULL);
    if (e == 0) g_running = 1;
    else fprintf(stderr, "omnishard: WARNING: %s runs without a deadline (no guard thread: %s)\n", phase, strerror(e));
}

void pd_disarm(void) {
    if (!g_running) return;
    pthread_mutex_lock(&g_mu);
    g_armed = 0;
    pthread_cond_signal(&g_cv);
    pthread_mutex_unlock(&g_mu);
    pthread_join(g_thread, NULL);
    pthread_cond_destroy(&g_cv);
    g_running = 0;
}
