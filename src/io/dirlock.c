// One writer per directory (io/dirlock.h).
#include "io/dirlock.h"
#include "core/err.h"
#include "io/atomic.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#define LOCK_NAME ".omnishard.lock"

static int g_fd = -1;   // kept open (and locked) until the process ends

int os_dir_lock(const char *dir) {
    if (os_mkdir_p(dir) < 0) return -1;
    char path[4200];
    snprintf(path, sizeof path, "%s/" LOCK_NAME, dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) return os_errf("%s: cannot create the lock file: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        if (e != EWOULDBLOCK) {   // ENOLCK, EOPNOTSUPP, ...: the file system cannot lock
            close(fd);
            os_info("warning: %s: cannot lock (%s): a second run on this output directory would not be noticed",
                    path, strerror(e));
            return 0;
        }
        char who[256] = {0};
        ssize_t n = pread(fd, who, sizeof who - 1, 0);
        close(fd);
        long pid = 0;
        char host[200] = "?";
        if (n <= 0 || sscanf(who, "pid %ld host %199s", &pid, host) != 2)
            return os_errf("%s: the output directory is in use by another omnishard run (it holds %s; its pid and "
                           "host are not recorded yet); one run per output directory", dir, path);
        return os_errf("%s: the output directory is in use by another omnishard run: pid %ld on host %s holds %s; "
                       "one run per output directory (wait for it, stop it, or choose another --output_dir)",
                       dir, pid, host, path);
    }
    char host[200] = "unknown", text[300];
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "unknown");
    host[sizeof host - 1] = 0;
    int n = snprintf(text, sizeof text, "pid %ld host %s\n", (long)getpid(), host);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)n, 0) != n) {
        int e = errno;
        close(fd);
        return os_errf("%s: cannot write the lock file: %s", path, strerror(e));
    }
    g_fd = fd;
    return 0;
}
