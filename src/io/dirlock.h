// One writer per directory: an exclusive flock(2) on DIR/.omnishard.lock, held until the process ends (the kernel
// drops it on any exit, crash included). The file records the holder's pid and host for the message a second
// process gets. flock is coherent on local file systems and on shared ones that support it across hosts
// (NFS with lockd, CephFS, GPFS, Lustre mounted with -o flock); docs/operations.md lists the limits.
#pragma once

// Create dir (mkdir -p) and lock it for this process. 0; -1 + "DIR: ... is in use by pid P on host H" when another
// process holds the lock. A file system without flock support gives a warning (os_info) and 0.
int os_dir_lock(const char *dir);
