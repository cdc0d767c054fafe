// Unit test of the MPI_Init/MPI_Finalize guard (src/zero/phase_deadline.c) at deadlines no timespec can hold
// (issue 24: --ddp_timeout 1e19 overflowed a cast and the guard spun holding its lock, so MPI_Init's disarm waited
// forever): armed at 1e19 s, NaN and a year, the guard is disarmed within a second and ends nothing; an alarm
// ends the test as a failure if the disarm hangs. Also the guard's CPU time: a spinning guard burns its wait (1 s,
// against a bound of 0.25 s: thread start-up under ASan on a loaded machine took 0.1 s of a 0.3 s wait).
#include "zero/phase_deadline.h"
#include "check.h"
#include <math.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

static double now(int clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "FAIL test_phase_deadline: pd_disarm did not return within 10 s (the guard spins)\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
}

int main(void) {
    signal(SIGALRM, on_alarm);
    const double seconds[] = {1e19, NAN, 1e300, PD_MAX_SECONDS, 9.3e18};
    for (size_t i = 0; i < sizeof seconds / sizeof seconds[0]; i++) {
        alarm(10);
        double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
        pd_arm("test phase", seconds[i]);
        usleep(1000 * 1000);   // the guard waits (a spinning one burns this second)
        pd_disarm();
        double wall = now(CLOCK_MONOTONIC) - w0, cpu = now(CLOCK_PROCESS_CPUTIME_ID) - c0;
        alarm(0);
        CHECK(wall < 2.5, "deadline %g s: armed and disarmed in %.2f s (expected about 1 s)", seconds[i], wall);
        CHECK(cpu < 0.25, "deadline %g s: the guard used %.2f s of CPU while waiting 1 s (it spins)", seconds[i], cpu);
    }
    return check_report("test_phase_deadline");
}
