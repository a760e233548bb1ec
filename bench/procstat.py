"""procstat.py — what the soaks (bench/soak.py, bench/soak_scrape.py) read of
a running process."""
import os


def proc_status(pid):
    """VmRSS and VmHWM (KiB), Threads and fds (open descriptors) of pid, or
    None if it is gone."""
    r = {}
    try:
        with open("/proc/%d/status" % pid) as fh:
            for line in fh:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM", "Threads"):
                    r[k] = int(v.split()[0])
        r["fds"] = len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return None
    return r
