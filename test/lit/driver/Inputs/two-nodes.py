"""Runs `ingot run ARTIFACT ...` as two nodes of a multi-host group on this host (node 1
started first, then node 0), writes node 0's output to OUT and prints both exit codes and
node 1's log. Arguments after ARTIFACT OUT go to both nodes."""
import shutil
import socket
import subprocess
import sys
import time

artifact, out_path = sys.argv[1], sys.argv[2]
ingot = shutil.which("ingot")
with socket.socket() as s:  # a free port for node 0's store
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
common = [ingot, "run", artifact, "-p", "The quick brown fox", "-n", "24", "--temperature", "0",
          "--threads", "2", "--tp-mode", "processes", "--nnodes", "2",
          "--master-addr", "127.0.0.1", "--master-port", str(port)] + sys.argv[3:]
node1 = subprocess.Popen(common + ["--node-rank", "1"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
time.sleep(0.5)  # node 1 waits for node 0's store (retrying with backoff)
with open(out_path, "w") as out:
    node0 = subprocess.run(common + ["--node-rank", "0"], stdout=out, stderr=subprocess.PIPE,
                           text=True, timeout=120)
_, node1_log = node1.communicate(timeout=60)
print(node0.stderr, end="")
print(node1_log, end="")
print("node 0 exit", node0.returncode)
print("node 1 exit", node1.returncode)
