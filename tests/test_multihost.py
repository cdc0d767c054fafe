"""Multi-host for real (issue 9): two "hosts" on this machine, network namespaces joined by a veth pair, Open MPI
over TCP between them, a launcher agent that enters the other host's namespace (docs/operations.md, "Multi-node
launch"). A ZeRO-3 run across them equals the single-host run bitwise; with one host's link cut mid-run every
process ends within the watchdog bound."""
import os, re, shutil, subprocess
import numpy as np
import pytest

from oracle import slam_omni_ref as ref
from omni_run import sft, logs, weights
from conftest import BIN
from fault_run import run_with_fault, tagged_pids

HOSTS = {"10.213.0.1": "a", "10.213.0.2": "b"}
TIMEOUT = 2
ARGS = ["--max_length", "32", "--deepspeed", "zero3", "--learning_rate", "1e-3"]


def ip(*args):
    return subprocess.run(["ip", *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    """Two namespaces osmh<pid>a/b, veth ends osmh<pid>a/b, 10.213.0.1 and .2 /24 (visible only inside them)."""
    if os.geteuid() != 0:
        pytest.skip("the two-host test needs root: it makes two hosts out of network namespaces")
    if not shutil.which("ip") or not shutil.which("unshare"):
        pytest.skip("the two-host test needs iproute2 (ip netns) and util-linux (unshare): apt-get install iproute2 util-linux")
    base = f"osmh{os.getpid() % 100000}"
    ns = {h: base + s for h, s in HOSTS.items()}
    p = ip("netns", "add", ns["10.213.0.1"])
    if p.returncode:
        pytest.skip(f"the two-host test cannot create network namespaces here (a container without the rights?): {p.stderr.strip()}")
    try:
        steps = [["netns", "add", ns["10.213.0.2"]],
                 ["link", "add", base + "a", "type", "veth", "peer", "name", base + "b"]]
        for h, n in ns.items():
            dev = base + HOSTS[h]
            steps += [["link", "set", dev, "netns", n], ["-n", n, "addr", "add", h + "/24", "dev", dev],
                      ["-n", n, "link", "set", dev, "up"], ["-n", n, "link", "set", "lo", "up"],
                      # TCP gives up on a dead peer after ~3 s instead of ~15 min (docs/operations.md)
                      ["netns", "exec", n, "sysctl", "-q", "-w", "net.ipv4.tcp_retries2=3"]]
        for s in steps:
            p = ip(*s)
            if p.returncode:
                pytest.skip(f"the two-host test could not link its hosts with a veth pair (ip {' '.join(s)}): {p.stderr.strip()}")
        d = tmp_path_factory.mktemp("mh")
        agent = d / "agent.sh"   # plm_rsh_agent: "agent HOST COMMAND..." runs COMMAND on HOST, as ssh would
        agent.write_text("#!/bin/sh\nhost=$1; shift\ncase $host in\n"
                         + "".join(f"  {h}) ns={n};;\n" for h, n in ns.items())
                         + '  *) echo "agent: unknown host $host" >&2; exit 1;;\nesac\n'
                         'exec ip netns exec "$ns" unshare --uts sh -c "hostname $ns; $*"\n')
        agent.chmod(0o755)
        (d / "hostfile").write_text("".join(f"{h} slots=1\n" for h in HOSTS))
        ref.make_model(str(d / "model"), hidden=16, layers=2, heads=2, kv_heads=1, inter=24, T=192, A=80, G=3, seed=7)
        ref.make_data(str(d / "data.jsonl"), 10, G=3, T=192, A=80, seed=8)
        yield dict(dir=d, ns=ns, agent=agent, dev_b=base + "b")
    finally:
        for n in ns.values():
            ip("netns", "del", n)   # deletes the veth pair with it


def mpirun_two_hosts(h, extra_mca=()):
    """mpirun inside host a's namespace; host b's daemon through the agent; TCP only, on the veth subnet."""
    return ["ip", "netns", "exec", h["ns"]["10.213.0.1"], "mpirun", "--allow-run-as-root", "--hostfile",
            str(h["dir"] / "hostfile"), "-np", "2", "--bind-to", "none", "--mca", "plm_rsh_agent", str(h["agent"]),
            "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "10.213.0.0/24",
            "--mca", "oob_tcp_if_include", "10.213.0.0/24", *extra_mca]


def test_two_hosts_equal_one_host_bitwise(hosts, tmp_path):
    h = hosts
    sft(h["dir"] / "model", h["dir"] / "data.jsonl", tmp_path / "one", 4, ARGS, np_=2)
    cmd = [*mpirun_two_hosts(h), str(BIN), "sft", "--model", str(h["dir"] / "model"), "--dataset",
           str(h["dir"] / "data.jsonl"), "--output_dir", str(tmp_path / "two"), "--max_steps", "4", *ARGS]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert p.returncode == 0, p.stdout + p.stderr
    a, b = logs(tmp_path / "one"), logs(tmp_path / "two")
    assert len(a) == len(b) == 4 and [x["loss"] for x in a] == [x["loss"] for x in b]
    wa, wb = weights(tmp_path / "one" / "final_model"), weights(tmp_path / "two" / "final_model")
    assert set(wa) == set(wb)
    for k in wa:
        assert np.array_equal(wa[k], wb[k]), k


def test_cut_link_ends_every_process(hosts, tmp_path):
    """Host b's link goes down mid-run: rank 0 (host a) names rank 1; every process on both hosts (ranks, the
    daemon on b, mpirun) is gone within --ddp_timeout + 10 s. The namespaces have net.ipv4.tcp_retries2=3: after
    the watchdog's MPI_Abort mpirun's kill order to host b's daemon is never acknowledged, and with Linux's default
    mpirun would wait ~15 min for TCP to give up (docs/operations.md, "Multi-node launch")."""
    h, out = hosts, tmp_path / "o"
    cmd = [*mpirun_two_hosts(h), str(BIN), "sft", "--model", str(h["dir"] / "model"), "--dataset",
           str(h["dir"] / "data.jsonl"), "--output_dir", str(out), "--max_steps", "100000", "--save_steps", "0",
           "--ddp_timeout", str(TIMEOUT), *ARGS]

    def cut(tag):
        assert set(tagged_pids(tag)) == {0, 1}
        assert ip("-n", h["ns"]["10.213.0.2"], "link", "set", h["dev_b"], "down").returncode == 0

    rc, err = run_with_fault(cmd, out, cut, TIMEOUT + 10, "the link went down")
    assert rc != 0
    line = [l for l in err.splitlines() if l.startswith("omnishard: rank 0: collective watchdog")]
    assert line and re.search(r"did not arrive at [^:]*: rank 1 \(no answer", line[0]), err
